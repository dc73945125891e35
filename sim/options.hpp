// Options of the simulator, read strictly from a scenario's "simulation" object:
//   {"collectives": "auto" | "step" | "scale", "forward_prefetch": 1, "backward_prefetch": "pre",
//    "units_in_flight": 2, "separate_reduce_scatter_lane": false,
//    "gradient_all_reduce": "per_operator" | "after_backward", "overlap_slowdown": 1.1,
//    "kernel_launch": "5us", "network": {"model": "CM02", "crosstraffic": false, "tcp_gamma": 0}}
// Every key is optional; unknown keys are input errors.
#pragma once

#include <optional>
#include <string>

#include "model/json_reader.hpp"
#include "model/prefetch_policy.hpp"

namespace osdp::sim {

// step: every ring step is its own set of flows; scale: one aggregated flow per ring edge;
// automatic: step up to auto_step_max_ranks ranks, scale above (step mode's flows grow as N^2).
enum class Granularity { step, scale, automatic };
inline constexpr int auto_step_max_ranks = 32;
// The mode a simulation of `ranks` ranks runs in: never `automatic`.
Granularity resolve_granularity(Granularity granularity, int ranks);
std::string_view granularity_name(Granularity granularity);

struct NetworkConfig {
  std::string model = "CM02";
  bool crosstraffic = false;
  double tcp_gamma = 0.0;
};

// When DP gradients are all-reduced: after each operator's backward in the last micro-batch,
// overlapping the rest of the backward (DDP), or all at once after the backward ends
// (Megatron / DeepSpeed without overlapped reduction).
enum class GradientAllReduce { per_operator, after_backward };

struct SimOptions {
  Granularity granularity = Granularity::automatic;
  // Gathers may run this many compute tasks ahead of their use in forward (0: no prefetch).
  int forward_prefetch = 1;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
  // FSDP's rate limiter: gather m waits for the free of gather m - units_in_flight.
  int units_in_flight = 2;
  // Reduce-scatters and all-reduces on their own lane instead of the gathers' lane.
  bool separate_reduce_scatter_lane = false;
  GradientAllReduce gradient_all_reduce = GradientAllReduce::per_operator;
  // Overrides of the cluster's GPU figures.
  std::optional<double> overlap_slowdown;
  std::optional<double> kernel_launch_s;
  NetworkConfig network;
};

// Reads the scenario's "simulation" object; `path` is its JSON path ("$.simulation").
SimOptions read_sim_options(const Json& simulation, const std::string& file,
                            const std::string& path = "$.simulation");

}  // namespace osdp::sim
