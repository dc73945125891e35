// Runs a function in a forked child process and hands back the text it returns, through a
// pipe. The SimGrid engine is a per-process singleton that cannot be restarted, so every
// simulation runs in its own child; the caller may run as many as it likes.
#pragma once

#include <functional>
#include <string>

namespace osdp::sim {

// The child's InputError is rethrown as an InputError, any other exception as
// std::runtime_error, a crash as std::runtime_error naming the signal.
std::string run_in_child(const std::function<std::string()>& body);

}  // namespace osdp::sim
