// Runs a function in a forked child process and hands back the text it returns, through a
// pipe. The SimGrid engine is a per-process singleton that cannot be restarted, so every
// simulation runs in its own child; the caller may run as many as it likes.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace osdp::sim {

// The child's InputError is rethrown as an InputError, any other exception as
// std::runtime_error, a crash as std::runtime_error naming the signal.
std::string run_in_child(const std::function<std::string()>& body);

// Runs the bodies in children, at most `parallelism` at a time; replies in the bodies' order.
// Every child is reaped; the first failure is rethrown after the others have finished.
std::vector<std::string> run_in_children(const std::vector<std::function<std::string()>>& bodies,
                                         int parallelism);

}  // namespace osdp::sim
