#include "cli/work_guard.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "model/units.hpp"
#include "search/options.hpp"

namespace osdp::cli {
namespace {

// Measured on the development machine: the exact search spends about 30 ns per option and
// batch size (scenarios/default.json: 1e6 in 31 ms); the simulator runs about 3e5 events/s.
constexpr double search_seconds_per_unit = 3e-8;
// Before the search, every operator's options are costed and the dominated ones dropped, a
// comparison per pair of its options (plus the strategy baselines beside it): linear in the
// operators, quadratic in their options. Measured: 2,000-layer tiny GPTs (4,002 operators) take
// 6.7 s to plan: 3.4e7 option pairs (about 92 options an operator), 0.2 us a pair.
constexpr double seconds_per_option_pair = 2e-7;
constexpr double simulator_events_per_second = 3e5;
// Measured (2026-12-07): local-cpu-3d.json on 2 ranks at a global batch of 65,536 (2.6e6
// passes) 1.4 s, at 262,144 (1.0e7) 5.9 s: 5.7e-7 s a pass; the 13 B GPT on 32 H100s
// (h100-4x8-gpt-13b-global-256.json) at 65,536 (6.2e7 passes) 66 s: 1.1e-6 s a pass (its OSDP
// stages cost a layout several times). The larger, so that the estimate errs towards asking.
constexpr double layout_seconds_per_pass = 1.1e-6;
constexpr int step_mode_max_ranks = 32;
// SimGrid's full routing zone: a pointer per ordered pair of endpoints. Measured (2026-12-07,
// 8,192 H100s of a leaf-spine cluster, 24,576 endpoints): 5.9 GB resident, 30-36 s to build.
constexpr double routing_bytes_per_pair = 8;
constexpr double seconds_per_routing_byte = 7e-9;
// A ring collective at --collectives step: per flow, per flow in flight beside it. Measured
// (2026-12-07, all-reduce of 64 GiB on the leaf-spine H100 cluster cut to 128 .. 1,024 GPUs):
// 0.19, 0.77, 4.6 and 46 s (2.1e9 flow-pairs at 1,024 GPUs).
constexpr double seconds_per_flow_in_flight = 2.2e-8;

// One simulated forward + backward of `operators` on `ranks`: up to four collectives per
// operator (gathers for forward, recompute and backward, and the gradient's), each a flow per
// rank per step, plus compute tasks.
double micro_batch_events(double ranks, double operators, bool every_step = false) {
  const double steps = every_step || ranks <= step_mode_max_ranks ? ranks - 1.0 : 1.0;
  return ranks * operators * (4.0 * steps + 3.0);
}

// The most micro-batches a rank runs per iteration over the batch-size range: every one is
// simulated (a global batch of 2^24 at micro-batch 1 is millions of them).
double most_micro_batches(const Training& training, int ranks) {
  double most = training.accumulation_steps;
  if (!training.global_batch_size) return most;
  for (int b = training.min_batch_size; b <= training.max_batch_size; ++b) {
    if (const auto steps = training.accumulation_for(b, ranks)) {
      most = std::max(most, static_cast<double>(*steps));
    }
  }
  return most;
}

// The endpoints of the world's ring on the simulated network: each GPU, and where the ring
// leaves a node, its last and the next node's first GPU once more per NIC channel.
double world_ring_endpoints(const Cluster& cluster) {
  double endpoints = cluster.ranks;
  if (cluster.topology && cluster.topology->nodes > 1 && cluster.topology->node.gpus > 1) {
    endpoints += 2.0 * cluster.topology->nodes * cluster.topology->nics_per_node;
  }
  return endpoints;
}

double routing_table_bytes(double endpoints) {
  return endpoints * endpoints * routing_bytes_per_pair;
}

}  // namespace

WorkEstimate planning_work(const Scenario& scenario, int repetitions) {
  const CostModel model = scenario.cost_model();
  double options = 0;
  double pairs = 0;
  const int operators = scenario.workload->size();
  // Identical operators cost the same to enumerate; sample a few to bound the time of the
  // estimate itself on huge models.
  const int sampled = std::min(operators, 64);
  for (int i = 0; i < sampled; ++i) {
    const double count = static_cast<double>(enumerate_choices(model, i, scenario.search).size());
    options += count;
    pairs += count * count;
  }
  options *= static_cast<double>(operators) / sampled;
  pairs *= static_cast<double>(operators) / sampled;
  const double batches = scenario.training.max_batch_size - scenario.training.min_batch_size + 1.0;
  WorkEstimate estimate;
  estimate.units = options * batches * repetitions;
  estimate.seconds =
      estimate.units * search_seconds_per_unit + pairs * seconds_per_option_pair * repetitions;
  estimate.description = fmt::format(
      "{:.2g} option evaluations ({} operators, {:.0f} options, {:.2g} option pairs to compare, "
      "{:.0f} batch sizes{})",
      estimate.units, operators, options, pairs, batches,
      repetitions > 1 ? fmt::format(", {} memory limits", repetitions) : std::string());
  return estimate;
}

WorkEstimate simulation_work(const Scenario& scenario, int plans, bool every_step) {
  const double ranks = scenario.cluster.ranks;
  const double micro_batches = most_micro_batches(scenario.training, scenario.cluster.ranks);
  WorkEstimate estimate;
  estimate.units =
      plans * micro_batches * micro_batch_events(ranks, scenario.workload->size(), every_step);
  // Its network's routing table, at least the world ring's (the table is built once a plan).
  estimate.memory_bytes = routing_table_bytes(world_ring_endpoints(scenario.cluster));
  estimate.seconds = estimate.units / simulator_events_per_second +
                     plans * estimate.memory_bytes * seconds_per_routing_byte;
  estimate.description =
      fmt::format("{:.2g} simulated events ({:.0f} ranks x {} operators{}{}{})", estimate.units,
                  ranks, scenario.workload->size(),
                  micro_batches > 1 ? fmt::format(" x {:.0f} micro-batches", micro_batches) : "",
                  plans > 1 ? fmt::format(" x {} plans", plans) : "",
                  every_step && ranks > step_mode_max_ranks ? ", every ring step a flow" : "");
  return estimate;
}

WorkEstimate layout_search_work(const Scenario& scenario, const LayoutSearchOptions& options,
                                int repetitions) {
  WorkEstimate estimate;
  estimate.units = layout_search_passes(scenario, options) * repetitions;
  estimate.seconds = estimate.units * layout_seconds_per_pass;
  estimate.description =
      fmt::format("{:.2g} pipeline passes to lay out (every layout's micro-batches x stages{}{})",
                  estimate.units,
                  scenario.training.global_batch_size
                      ? fmt::format(", a global batch of {}", *scenario.training.global_batch_size)
                      : std::string(),
                  repetitions > 1 ? fmt::format(", {} searches", repetitions) : std::string());
  return estimate;
}

WorkEstimate collective_work(const Cluster& cluster, CollectiveKind kind, double bytes,
                             bool every_step) {
  const double endpoints = world_ring_endpoints(cluster);
  WorkEstimate estimate;
  estimate.units = endpoints;
  estimate.memory_bytes = routing_table_bytes(endpoints);
  estimate.seconds = estimate.memory_bytes * seconds_per_routing_byte;
  estimate.description =
      fmt::format("a routing table for {:.0f} ring endpoints ({} ranks)", endpoints, cluster.ranks);
  if (every_step && cluster.ranks > 1 &&
      cluster.world.choice(kind, bytes, cluster.ranks).algorithm == CollectiveAlgorithm::ring) {
    const double ranks = cluster.ranks;
    const double steps = ring_steps(kind, cluster.ranks);
    const double flows = steps * ranks;
    estimate.units += flows;
    estimate.seconds += flows * ranks * seconds_per_flow_in_flight;
    estimate.description +=
        fmt::format(" and {:.2g} ring-step flows ({:.0f} steps x {:.0f} ranks, {:.0f} in flight)",
                    flows, steps, ranks, ranks);
  }
  return estimate;
}

WorkEstimate measured_rows_work(const MeasuredTable& table, int passes) {
  double events = 0;
  double most_row = 0;
  for (const MeasuredRun& run : table.runs) {
    // The generated GPT: an embedding, an attention and an MLP per layer, a head.
    const double operators = 2.0 * run.layers + 2.0;
    const double micro_batches = run.accumulation_steps();
    // A tensor- or pipeline-parallel row is costed on its schedule's timeline, not simulated:
    // one event per operator, micro-batch and stage.
    const double row = uses_model_parallelism(run)
                           ? operators * micro_batches * run.pipeline_parallelism
                           : micro_batches * micro_batch_events(run.gpus, operators);
    events += row;
    most_row = std::max(most_row, row);
  }
  WorkEstimate estimate;
  estimate.units = passes * events;
  estimate.seconds = estimate.units / simulator_events_per_second;
  estimate.description =
      fmt::format("{:.2g} simulated events ({} row{}{}, the largest {:.2g} events)", estimate.units,
                  table.runs.size(), table.runs.size() == 1 ? "" : "s",
                  passes > 1 ? fmt::format(" x {} passes", passes) : "", most_row);
  return estimate;
}

void refuse_unless_forced(const WorkEstimate& estimate, bool force, double limit_seconds,
                          double limit_memory_bytes) {
  if (force) return;
  if (estimate.memory_bytes > limit_memory_bytes) {
    throw InputError("command line", "--force", "a run of about " + estimate.description,
                     fmt::format("work that holds at most {} at once (this would hold about "
                                 "{}); pass --force to run it anyway, on a machine with the memory",
                                 units::format_bytes(limit_memory_bytes),
                                 units::format_bytes(estimate.memory_bytes)));
  }
  if (estimate.seconds <= limit_seconds) return;
  throw InputError("command line", "--force", "a run of about " + estimate.description,
                   fmt::format("work that finishes in minutes (this would take about {:.0f} s); "
                               "pass --force to run it anyway",
                               estimate.seconds));
}

WorkDeadline work_deadline(bool force, double limit_seconds) {
  if (force) return {std::nullopt, limit_seconds};
  return {std::chrono::steady_clock::now() +
              std::chrono::milliseconds(static_cast<long long>(limit_seconds * 1000)),
          limit_seconds};
}

void refuse_overrun(const std::string& what, const WorkDeadline& deadline) {
  throw InputError(
      "command line", "--force",
      fmt::format("{} still running after {:.0f} s (stopped)", what, deadline.limit_seconds),
      "work that finishes in minutes (a 3D simulation's work is not known before "
      "it runs: its flows follow the topology's routing); pass --force to let it "
      "run to the end");
}

}  // namespace osdp::cli
