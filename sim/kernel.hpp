// The SimGrid side of a simulation: the engine (configured for CM02, no crosstraffic,
// TCP-gamma 0 unless told otherwise), the platform built from a NetworkPlan, and flows and
// timers driven from maestro, without actors, each with a completion callback.
// The SimGrid engine is a per-process singleton: make one Kernel per (forked) process.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/network.hpp"
#include "sim/options.hpp"

namespace simgrid::s4u {
class Engine;
class Host;
class Activity;
}  // namespace simgrid::s4u

namespace osdp::sim {

class Kernel {
 public:
  // `ring_routes` false: the topology rings' routes are left out of the platform (their
  // collectives send no flow: collectives_run_alone in scale mode); 8,192 GPUs' ring channels
  // otherwise hold gigabytes of routes.
  Kernel(const NetworkPlan& plan, const NetworkConfig& config, bool ring_routes = true);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  double now() const;
  // Calls `done` at now + delay.
  void after(double delay_s, std::function<void()> done);
  // Sends `bytes` along the channel's route after `delay_s`; calls `done` when the last byte
  // arrives: the route's bandwidth share (SimGrid), then its latency (a timer). `channel` must
  // outlive the simulation.
  void send(const Channel& channel, double bytes, double delay_s, std::function<void()> done);
  // As send, without the route's latency: the links carry bytes only (their latency is not in
  // the SimGrid platform), and a ring collective charges its own per-step latency.
  void transfer(const Channel& channel, double bytes, double delay_s, std::function<void()> done);
  void run();

  RingsInFlight& rings_in_flight() { return rings_in_flight_; }

  std::int64_t flows() const { return flows_; }
  std::int64_t timers() const { return timers_; }

 private:
  struct State;
  void start_flow(const Channel& channel, double bytes, std::function<void()> done);
  void on_completion(const simgrid::s4u::Activity& activity);

  std::unique_ptr<State> state_;
  RingsInFlight rings_in_flight_;
  std::int64_t flows_ = 0;
  std::int64_t timers_ = 0;
};

}  // namespace osdp::sim
