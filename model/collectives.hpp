// One description per ring collective, shared by the cost model, the simulator and the
// validator so the definitions cannot drift (nccl-tests conventions).
//   all-gather / reduce-scatter: N-1 steps, each moving S/N bytes per rank
//   all-reduce (reduce-scatter then all-gather): 2(N-1) steps of S/N bytes
// S is the full (unsharded) buffer size in bytes, N the ranks in the group.
#pragma once

#include <string_view>

namespace osdp {

enum class CollectiveKind { all_gather, reduce_scatter, all_reduce };

constexpr std::string_view collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_gather:
      return "all-gather";
    case CollectiveKind::reduce_scatter:
      return "reduce-scatter";
    case CollectiveKind::all_reduce:
      return "all-reduce";
  }
  return "?";
}

// Ring steps each rank performs.
constexpr int ring_steps(CollectiveKind kind, int ranks) {
  if (ranks <= 1) return 0;
  return kind == CollectiveKind::all_reduce ? 2 * (ranks - 1) : ranks - 1;
}

// Bytes a rank sends to its ring neighbour in one step.
constexpr double ring_step_bytes(double full_bytes, int ranks) {
  return ranks <= 1 ? 0.0 : full_bytes / ranks;
}

// nccl-tests: bus bandwidth = algorithm bandwidth x this factor.
constexpr double bus_bandwidth_factor(CollectiveKind kind, int ranks) {
  if (ranks <= 1) return 0.0;
  const double n = ranks;
  return kind == CollectiveKind::all_reduce ? 2.0 * (n - 1.0) / n : (n - 1.0) / n;
}

// Latency-bandwidth model of one ring step: alpha + bytes * beta.
struct AlphaBeta {
  double alpha_s = 0.0;
  double beta_s_per_byte = 0.0;

  constexpr double step_time_s(double step_bytes) const {
    return alpha_s + step_bytes * beta_s_per_byte;
  }
};

// Time of a whole ring collective under the alpha-beta model.
constexpr double ring_time_s(CollectiveKind kind, double full_bytes, int ranks,
                             const AlphaBeta& link) {
  return ring_steps(kind, ranks) * link.step_time_s(ring_step_bytes(full_bytes, ranks));
}

}  // namespace osdp
