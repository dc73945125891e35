#include "validate/launch.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
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

namespace {

// The signal that asked this process to stop while it waits for its ranks. A signal handler
// may only set a flag: this is it.
volatile std::sig_atomic_t stop_signal = 0;

void record_stop_signal(int signal_number) { stop_signal = signal_number; }

// Installs the recording handler for SIGINT and SIGTERM for the lifetime of the object, without
// SA_RESTART so that a blocking waitpid returns at once.
class StopSignals {
 public:
  StopSignals() {
    stop_signal = 0;
    struct sigaction action {};
    action.sa_handler = record_stop_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

[[noreturn]] void run_rank(int rank, const std::function<int(int rank)>& body) {
  // A rank starts with default dispositions: the parent's handlers are not its own.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_IGN);
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

}  // namespace

LaunchResult launch_local_ranks(int ranks, const std::function<int(int rank)>& body,
                                std::chrono::milliseconds grace) {
  std::fflush(nullptr);
  const StopSignals signals;
  std::vector<pid_t> children(ranks, -1);
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      for (pid_t child : children) {
        if (child > 0) kill(child, SIGKILL);
      }
      throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) run_rank(rank, body);
    children[rank] = pid;
  }

  LaunchResult result;
  std::vector<bool> stopped(ranks, false);  // killed here: their exit is not a failure
  int running = ranks;
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline = Clock::time_point::max();  // when the survivors are killed
  while (running > 0) {
    if (stop_signal != 0 && result.interrupted_by_signal == 0) {
      result.interrupted_by_signal = stop_signal;
      result.ok = false;
      for (pid_t child : children) {
        if (child > 0) kill(child, SIGTERM);
      }
      // A rank stopped (SIGSTOP) or ignoring SIGTERM is killed after a second.
      deadline = Clock::now() + std::chrono::seconds(1);
    }
    // Polled, so that a signal arriving at any moment is seen within one sleep. Ranks that
    // ended since the last poll are taken together, those killed by a signal first: a rank that
    // dies makes its peers fail within microseconds, and the dead one is the cause.
    std::vector<std::pair<pid_t, int>> ended;
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) break;
      ended.emplace_back(pid, status);
    }
    if (ended.empty()) {
      if (Clock::now() >= deadline) {
        for (int rank = 0; rank < ranks; ++rank) {
          if (children[rank] <= 0 || stopped[rank]) continue;
          kill(children[rank], SIGKILL);
          stopped[rank] = true;
          if (result.interrupted_by_signal == 0) {
            result.failures.push_back(
                fmt::format("rank {} was stopped: still running {} ms after rank {} failed", rank,
                            grace.count(), result.first_failed_rank));
          }
        }
        deadline = Clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::stable_sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
      return WIFSIGNALED(a.second) && !WIFSIGNALED(b.second);
    });
    for (const auto& [pid, status] : ended) {
      int rank = -1;
      for (int r = 0; r < ranks; ++r) {
        if (children[r] == pid) rank = r;
      }
      if (rank < 0) continue;
      children[rank] = -1;
      --running;
      if (stopped[rank] || result.interrupted_by_signal != 0) continue;
      std::string failure;
      if (WIFSIGNALED(status)) {
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
          deadline = Clock::now() + grace;
        }
      }
    }
  }
  if (result.interrupted_by_signal != 0) {
    result.failures.push_back(
        fmt::format("stopped by {}: the ranks were stopped and the run's temporary files removed",
                    result.interrupted_by_signal == SIGINT ? "SIGINT" : "SIGTERM"));
  }
  return result;
}

void throw_if_failed(const LaunchResult& result, const std::string& what) {
  if (result.ok) return;
  std::string message = fmt::format("the {} run failed:", what);
  for (const auto& failure : result.failures) message += "\n  " + failure;
  throw RunFailure(message, result.interrupted_by_signal);
}

}  // namespace osdp::validate
