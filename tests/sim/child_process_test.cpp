// Simulations run in forked children (sim/child_process): their replies and errors come back,
// and a child still running at its deadline is killed and reaped, not waited for.
#include "sim/child_process.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "model/input_error.hpp"

using namespace osdp;
using namespace std::chrono_literals;

TEST_CASE("a child's reply and its input error cross the pipe", "[sim][child]") {
  CHECK(sim::run_in_child([] { return std::string("reply"); }) == "reply");
  CHECK_THROWS_AS(
      sim::run_in_child([]() -> std::string { throw InputError("f.json", "$.x", "1", "2"); }),
      InputError);
}

TEST_CASE("a child still running at its deadline is stopped", "[sim][child]") {
  const auto started = std::chrono::steady_clock::now();
  const auto sleeper = []() -> std::string {
    std::this_thread::sleep_for(30s);
    return "too late";
  };
  CHECK_THROWS_AS(sim::run_in_child(sleeper, started + 200ms), sim::DeadlinePassed);
  // Killed at the deadline, not awaited: well under the child's 30 s.
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  // One that answers in time is unaffected by its deadline.
  CHECK(sim::run_in_child([] { return std::string("in time"); },
                          std::chrono::steady_clock::now() + 60s) == "in time");
}
