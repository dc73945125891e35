#include "validate/runtime_process.hpp"

#include <fmt/format.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "model/input_error.hpp"

extern char** environ;

namespace osdp::validate {
namespace {

namespace fs = std::filesystem;

constexpr const char* runtime_name = "osdp-runtime";

// The runtime's pid while this process waits for it, for the signal handler to pass signals
// on. A handler can only reach static storage: this is the one place that needs it.
volatile std::sig_atomic_t runtime_pid = 0;

void forward_to_runtime(int signal_number) {
  if (runtime_pid > 0) kill(static_cast<pid_t>(runtime_pid), signal_number);
}

std::vector<char*> argv_of(const std::string& executable, const std::vector<std::string>& arguments,
                           std::vector<std::string>& storage) {
  storage.clear();
  storage.push_back(executable);
  storage.insert(storage.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& argument : storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

std::string runtime_executable() {
  if (const char* configured = std::getenv("OSDP_RUNTIME"); configured && *configured) {
    if (access(configured, X_OK) != 0) {
      throw InputError("environment", "OSDP_RUNTIME", fmt::format("\"{}\"", configured),
                       "the path of an executable osdp-runtime");
    }
    return configured;
  }
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  const fs::path beside = error ? fs::path(runtime_name) : self.parent_path() / runtime_name;
  if (access(beside.c_str(), X_OK) != 0) {
    throw InputError("installation", runtime_name,
                     fmt::format("\"{}\" (not found)", beside.string()),
                     "the libtorch runtime beside osdp: build osdp with libtorch-dev installed "
                     "(scripts/install-deps.sh), or set OSDP_RUNTIME to its path");
  }
  return beside.string();
}

int run_runtime(const std::vector<std::string>& arguments) {
  const std::string executable = runtime_executable();
  std::vector<std::string> storage;
  std::vector<char*> argv = argv_of(executable, arguments, storage);

  struct sigaction forward {};
  forward.sa_handler = forward_to_runtime;
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  struct sigaction previous_int {};
  struct sigaction previous_term {};
  // Handlers first: a signal between the spawn and the wait must reach the runtime too.
  runtime_pid = 0;
  sigaction(SIGINT, &forward, &previous_int);
  sigaction(SIGTERM, &forward, &previous_term);
  std::fflush(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, executable.c_str(), nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (spawned == 0) {
    runtime_pid = pid;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    runtime_pid = 0;
  }
  sigaction(SIGINT, &previous_int, nullptr);
  sigaction(SIGTERM, &previous_term, nullptr);
  if (spawned != 0) {
    throw std::runtime_error(
        fmt::format("cannot start {}: {}", executable, std::strerror(spawned)));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

void exec_runtime(const std::vector<std::string>& arguments) {
  const std::string executable = runtime_executable();
  std::vector<std::string> storage;
  std::vector<char*> argv = argv_of(executable, arguments, storage);
  std::fflush(nullptr);
  execv(executable.c_str(), argv.data());
  throw InputError("installation", runtime_name, fmt::format("\"{}\"", executable),
                   fmt::format("an executable osdp-runtime ({})", std::strerror(errno)));
}

TemporaryDirectory::TemporaryDirectory(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error(
        fmt::format("cannot create a temporary directory {}: {}", pattern, std::strerror(errno)));
  }
  path_ = pattern;
}

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);  // a file, a link or (visited after its contents) an emptied directory
  return 0;
}

}  // namespace

void remove_directory_tree(const std::filesystem::path& directory) {
  constexpr int kOpenDirectories = 16;
  ::nftw(directory.c_str(), remove_entry, kOpenDirectories, FTW_DEPTH | FTW_PHYS);
}

TemporaryDirectory::~TemporaryDirectory() { remove_directory_tree(path_); }

}  // namespace osdp::validate
