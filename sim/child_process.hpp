// Runs a function in a forked child process and hands back the text it returns, through a
// pipe. The SimGrid engine is a per-process singleton that cannot be restarted, so every
// simulation runs in its own child; the caller may run as many as it likes.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace osdp::sim {

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// A child still running at its deadline: killed, reaped, and this thrown.
struct DeadlinePassed : std::runtime_error {
  DeadlinePassed() : std::runtime_error("sim: the simulation ran past its deadline") {}
};

// The child's InputError is rethrown as an InputError, any other exception as
// std::runtime_error, a crash as std::runtime_error naming the signal. With a `deadline`, a
// child still running then is killed (DeadlinePassed).
std::string run_in_child(const std::function<std::string()>& body, Deadline deadline = {});

// Runs the bodies in children, at most `parallelism` at a time; replies in the bodies' order.
// Every child is reaped; the first failure is rethrown after the others have finished.
std::vector<std::string> run_in_children(const std::vector<std::function<std::string()>>& bodies,
                                         int parallelism);

}  // namespace osdp::sim
