#include "validate/launch.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "model/input_error.hpp"

namespace osdp::validate {
namespace {

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

int integer_variable(const char* name, const std::string& text, int min_value, int max_value) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || value < min_value || value > max_value) {
    throw InputError("environment", name, "\"" + text + "\"",
                     fmt::format("an integer from {} to {}", min_value, max_value));
  }
  return static_cast<int>(value);
}

std::optional<std::pair<const char*, std::string>> first_of(
    std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto value = variable(name)) return std::make_pair(name, *value);
  }
  return std::nullopt;
}

}  // namespace

std::optional<RankEnvironment> rank_from_environment() {
  const auto rank = first_of({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"});
  const auto world = first_of({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"});
  if (!rank && !world) return std::nullopt;
  if (!rank) throw InputError("environment", "RANK", "unset", "RANK with WORLD_SIZE");
  if (!world) throw InputError("environment", "WORLD_SIZE", "unset", "WORLD_SIZE with RANK");
  RankEnvironment environment;
  environment.world_size = integer_variable(world->first, world->second, 1, 1 << 20);
  environment.rank = integer_variable(rank->first, rank->second, 0, environment.world_size - 1);
  if (const auto local = first_of({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})) {
    environment.local_rank = integer_variable(local->first, local->second, 0, 1 << 20);
  }
  if (auto address = variable("MASTER_ADDR")) {
    environment.master_addr = *address;
  } else if (environment.world_size > 1) {
    throw InputError("environment", "MASTER_ADDR", "unset",
                     "the address of rank 0 (torchrun sets it; export it under Slurm or mpirun)");
  }
  if (auto port = variable("MASTER_PORT")) {
    environment.master_port = integer_variable("MASTER_PORT", *port, 1, 65535);
  }
  return environment;
}

LaunchResult launch_local_ranks(int ranks, const std::function<int(int rank)>& body,
                                std::chrono::milliseconds grace) {
  std::fflush(nullptr);
  std::vector<pid_t> children(ranks, -1);
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      for (pid_t child : children) {
        if (child > 0) kill(child, SIGKILL);
      }
      throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      int code = 1;
      try {
        code = body(rank);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "osdp: rank %d: %s\n", rank, error.what());
        code = 1;
      } catch (...) {
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    children[rank] = pid;
  }

  LaunchResult result;
  std::vector<bool> stopped(ranks, false);
  int running = ranks;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, deadline ? WNOHANG : 0);
    if (pid < 0) break;
    if (pid == 0) {
      if (std::chrono::steady_clock::now() >= *deadline) {
        for (int rank = 0; rank < ranks; ++rank) {
          if (children[rank] > 0 && !stopped[rank]) {
            kill(children[rank], SIGKILL);
            stopped[rank] = true;
            result.failures.push_back(
                fmt::format("rank {} was stopped: still running {} ms after rank {} failed", rank,
                            grace.count(), result.first_failed_rank));
          }
        }
        deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    int rank = -1;
    for (int r = 0; r < ranks; ++r) {
      if (children[r] == pid) rank = r;
    }
    if (rank < 0) continue;
    children[rank] = -1;
    --running;
    std::string failure;
    if (stopped[rank]) {
      continue;
    } else if (WIFSIGNALED(status)) {
      failure = fmt::format("rank {} was killed by signal {} ({})", rank, WTERMSIG(status),
                            strsignal(WTERMSIG(status)));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      failure = fmt::format("rank {} exited with code {}", rank, WEXITSTATUS(status));
    }
    if (!failure.empty()) {
      result.ok = false;
      result.failures.push_back(failure);
      if (result.first_failed_rank < 0) {
        result.first_failed_rank = rank;
        deadline = std::chrono::steady_clock::now() + grace;
      }
    }
  }
  return result;
}

}  // namespace osdp::validate
