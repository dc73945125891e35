// Refusing absurd work up front: before planning or simulating, estimate the work from the
// scenario's sizes; above a bound, stop with the estimate (exit 2) unless --force is given.
// (The loaders already cap every size so that no input number allocates unbounded memory.)
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "model/measured_table.hpp"
#include "model/scenario.hpp"
#include "search/layout_search.hpp"

namespace osdp::cli {

struct WorkEstimate {
  double units = 0;         // option evaluations, or simulated events
  double seconds = 0;       // rough wall time on one core
  double memory_bytes = 0;  // what the work holds at once, where that is what limits it
  std::string description;  // "2.1e+09 option evaluations (98 operators x ...)"
};

// The search: operators x options per operator x batch sizes x `repetitions` (memory limits).
WorkEstimate planning_work(const Scenario& scenario, int repetitions = 1);
// One simulated iteration: ranks x operators x collective steps (step mode up to 32 ranks, or
// at any size with `every_step`: --collectives step) x micro-batches.
WorkEstimate simulation_work(const Scenario& scenario, int plans = 1, bool every_step = false);

// The 3D layout search (search/layout_search), `repetitions` times (memory limits, or explain's
// search of every tensor x pipeline degree beside the best): each layout it costs lays out
// every micro-batch's passes on its pipeline timeline.
WorkEstimate layout_search_work(const Scenario& scenario, const LayoutSearchOptions& options,
                                int repetitions = 1);

// One collective alone (simulate --collective): SimGrid's routing table holds a slot for every
// pair of the ring's endpoints (each GPU, and each NIC channel where the ring leaves a node),
// so its memory and the time to fill it grow with the square of the cluster's size. With
// `every_step` (--collectives step) a ring (not NCCL's tree, a timer) is a flow per rank per
// step, and every flow's end re-shares the bandwidth among the ranks' flows in flight: the
// time grows with the cube of the ranks.
WorkEstimate collective_work(const Cluster& cluster, CollectiveKind kind, double bytes,
                             bool every_step);

// predict / fit: every row of a measured table simulated `passes` times (its GPUs, its GPT,
// its micro-batches), before any row runs.
WorkEstimate measured_rows_work(const MeasuredTable& table, int passes = 1);

// Throws InputError naming `--force` when the estimate exceeds `limit_seconds` or
// `limit_memory_bytes` and not `force`.
inline constexpr double default_memory_limit_bytes = 4.0 * (1LL << 30);
void refuse_unless_forced(const WorkEstimate& estimate, bool force, double limit_seconds = 120,
                          double limit_memory_bytes = default_memory_limit_bytes);

// Work that cannot be estimated before it runs (3D layouts simulated on a topology) is given
// a deadline instead: `limit_seconds` from now, none with `force`.
struct WorkDeadline {
  std::optional<std::chrono::steady_clock::time_point> at;
  double limit_seconds = 0;
};
WorkDeadline work_deadline(bool force, double limit_seconds = 120);
// The InputError naming `--force` for `what` stopped at its deadline.
[[noreturn]] void refuse_overrun(const std::string& what, const WorkDeadline& deadline);

}  // namespace osdp::cli
