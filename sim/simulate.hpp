// The simulator's API: one training iteration of a plan, or collectives alone, on the simulated
// cluster. Each call runs SimGrid in a forked child process (the engine is a per-process
// singleton), so callers may simulate as many plans as they like from one process.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/collectives.hpp"
#include "model/scenario.hpp"
#include "sim/options.hpp"

namespace osdp::sim {

// ---- collectives ----

struct CollectiveRequest {
  CollectiveKind kind = CollectiveKind::all_gather;
  double bytes = 0;        // the full (unsharded) buffer, S
  std::vector<int> ranks;  // the group; empty: every rank
};

struct CollectiveResult {
  CollectiveKind kind = CollectiveKind::all_gather;
  int ranks = 0;
  double bytes = 0;
  double time_s = 0;
  double algorithm_bandwidth_Bps = 0;  // bytes / time (nccl-tests)
  double bus_bandwidth_Bps = 0;        // algorithm bandwidth x bus_bandwidth_factor
  double alpha_beta_time_s = 0;        // the cluster's world timing for the same collective
  // What runs: "ring" / "Simple" unless the cluster declares `"collectives": "nccl"`.
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;
  CollectiveProtocol protocol = CollectiveProtocol::simple;
  std::vector<int> ring_order;
};

// Runs the requests at once (they contend for links) and reports each one's time.
std::vector<CollectiveResult> simulate_collectives(const Cluster& cluster,
                                                   const std::vector<CollectiveRequest>& requests,
                                                   const SimOptions& options);
CollectiveResult simulate_collective(const Cluster& cluster, CollectiveKind kind, double bytes,
                                     const SimOptions& options);

// ---- one training iteration ----

enum class CommCategory {
  ag_forward,
  ag_backward,
  ag_recompute,
  reduce_scatter,
  all_reduce,
  ag_after_step  // updated parameter shards after the optimizer step (ZeRO-1)
};
inline constexpr int comm_categories = 6;
std::string_view comm_category_name(CommCategory category);

enum class MemoryCategory {
  model_states,
  extra,
  activations,
  recomputed_activations,
  gathered_parameters,
  unsharded_gradients,
  workspace
};
inline constexpr int memory_categories = 7;
std::string_view memory_category_name(MemoryCategory category);

struct RankResult {
  double finish_s = 0;  // end of the optimizer step
  double compute_s = 0;
  double peak_memory_bytes = 0;
  double peak_time_s = 0;
  std::string peak_cause;  // the allocation that reached the peak
  std::array<double, memory_categories> peak_breakdown_bytes{};
  std::array<double, comm_categories> exposed_comm_s{};
};

struct SimulationResult {
  int ranks = 0;
  int batch_size = 0;
  Granularity granularity = Granularity::step;
  double iteration_time_s = 0;          // slowest rank
  double throughput_samples_per_s = 0;  // ranks * b / iteration time
  // Rank 0's figures (ranks are symmetric unless the network is not).
  double compute_s = 0;  // forward, recompute and backward kernels incl. launch gaps
  double optimizer_step_s = 0;
  std::array<double, comm_categories> exposed_comm_s{};
  // Peak memory: the highest rank, when, what set it and what was live then.
  double peak_memory_bytes = 0;
  int peak_rank = 0;
  double peak_time_s = 0;
  std::string peak_memory_cause;
  std::array<double, memory_categories> peak_breakdown_bytes{};
  std::vector<double> peak_memory_bytes_per_rank;
  // Every rank's exposed communication (all categories): ranks that take turns on shared cores
  // wait unlike (sim/README.md).
  std::vector<double> exposed_comm_total_s_per_rank;
  // Work done: compute tasks, collectives, network flows and timers.
  std::int64_t compute_tasks = 0;
  std::int64_t collectives = 0;
  std::int64_t flows = 0;
  std::int64_t timers = 0;
  std::int64_t events() const { return compute_tasks + collectives + flows + timers; }

  double exposed_comm_total_s() const;
  // The exposed communication of the rank that waited least: the critical rank's, as the
  // validator measures it (all ranks run the same passes; the others' extra waits are for it).
  double critical_rank_exposed_comm_s() const;
};

// Simulates one iteration of `plan`. When `trace_path` is not empty, writes a Chrome trace
// (JSON; Perfetto opens it) of ranks 0 .. trace_ranks - 1 there, atomically.
SimulationResult simulate_plan(const Scenario& scenario, const Plan& plan,
                               const SimOptions& options, const std::string& trace_path = "",
                               int trace_ranks = 64);
// Several plans (re-ranking candidates), `parallelism` simulations at a time; results in order.
std::vector<SimulationResult> simulate_plans(const Scenario& scenario,
                                             const std::vector<Plan>& plans,
                                             const SimOptions& options, int parallelism = 2);

Json to_json(const SimulationResult& result);
SimulationResult simulation_result_from_json(const Json& json);
Json to_json(const CollectiveResult& result);

}  // namespace osdp::sim
