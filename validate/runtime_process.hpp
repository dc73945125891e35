// The libtorch runtime runs in a process of its own, `osdp-runtime`, so that the planner's
// commands (plan, sweep, explain, simulate) never load libtorch: `osdp validate` starts it to
// measure plans, and `osdp calibrate` becomes it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace osdp::validate {

// $OSDP_RUNTIME when set, else `osdp-runtime` beside the running executable. Throws InputError
// naming the path when there is none (an osdp built without libtorch).
std::string runtime_executable();

// Runs osdp-runtime with `arguments` (after its own name) and waits for it. A SIGINT or SIGTERM
// this process receives meanwhile is passed on to it. Returns its exit code, or 128 + the
// signal that ended it (130 after SIGINT, as shells report).
int run_runtime(const std::vector<std::string>& arguments);

// Replaces this process with osdp-runtime and `arguments`; throws InputError if it cannot.
[[noreturn]] void exec_runtime(const std::vector<std::string>& arguments);

// Removes a directory and everything in it with POSIX calls; missing is fine, errors are
// ignored (it cleans up temporary folders). Not std::filesystem::remove_all: PyTorch's pip
// libtorch exports its own copies of libstdc++'s filesystem functions, and the GPU runtime,
// which loads libtorch, crashed in them (docs/validator.md, "The first GPU runs").
void remove_directory_tree(const std::filesystem::path& directory);

// A fresh private directory under the system's temporary folder, removed with everything in
// it when the object goes.
class TemporaryDirectory {
 public:
  explicit TemporaryDirectory(const std::string& prefix);
  ~TemporaryDirectory();
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace osdp::validate
