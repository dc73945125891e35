// Analytic cost models: the time and memory of one operator under one choice, and of a whole
// plan. Memory is linear in the batch size b, kept as (fixed, per-sample) pairs; time is a sum of
// such pairs and of maxima of two (OptionTime); the search evaluates both at every b.
//
// `paper` is DESIGN section 1 exactly:
//   M_i(DP,b)  = M_i^model + b*M_i^act + M_i^extra      T_i(DP,b)  = 2(N-1)(a + S_i/N*beta) + b*g_i
//   M_i(ZDP,b) = M_i^model/N + b*M_i^act + M_i^extra    T_i(ZDP,b) = 3(N-1)(a + S_i/N*beta) + b*g_i
//   with no transient term and no overlap.
// `extended` adds: the transient peak while an operator runs (its gathered slice, the prefetched
// next unit, its full-size gradient before reduce-scatter, recomputed activations, workspace),
// the cost of each extra slice (kernel launches + partial-sum adds), checkpointing with unfused
// and fused recompute gathers, Z2 and HSDP, the optimizer step, and the overlap of compute and
// communication the simulator schedules (OverlappedPhase): the time is then a convex piecewise
// linear function of b, still a sum over operators.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "model/cluster.hpp"
#include "model/mode.hpp"
#include "model/plan.hpp"
#include "model/prefetch_policy.hpp"
#include "model/training.hpp"
#include "model/workload.hpp"

namespace osdp {

enum class CostModelKind { paper, extended };
std::string_view cost_model_name(CostModelKind kind);

struct CostSettings {
  CostModelKind kind = CostModelKind::extended;
  // Units in flight (FSDP's rate limiter): 2 means a neighbour's gather buffer may be live while
  // an operator runs (prefetch). The peak adds (units_in_flight - 1) x the largest gather buffer
  // of the plan to the largest transient term: never below the true max_i (t_i + buf_i+-1).
  int units_in_flight = 2;
  // The finest split the search may give an operator: a neighbour's slice, which hides this
  // operator's first gather, is assumed that small (1: split as this operator is).
  int finest_split = 1;
  // The schedule the simulator runs (the scenario's "simulation" object), so that the extended
  // model predicts the iteration it simulates.
  struct Overlap {
    bool forward_prefetch = true;  // "forward_prefetch" > 0: a gather hides behind the compute
    BackwardPrefetch backward_prefetch = BackwardPrefetch::pre;
    bool separate_reduction_lane = false;    // "separate_reduce_scatter_lane"
    bool all_reduce_after_backward = false;  // "gradient_all_reduce": "after_backward"
    std::optional<double> slowdown;          // overrides the GPU's overlap_slowdown
    std::optional<double> kernel_launch_s;   // overrides the GPU's kernel_launch
  } overlap{};
};

// A host floor under `weight` compute calls whose law is call_fixed + b * call_per_sample: each
// call takes max(floor_s, law), so the floor adds weight x max(0, floor_s - law(b)) to the sum.
struct HostFloor {
  double weight = 1;
  double floor_s = 0;
  double call_fixed = 0;
  double call_per_sample = 0;
  double shortfall(double batch) const {
    return weight * std::max(0.0, floor_s - (call_fixed + batch * call_per_sample));
  }
};

// A quantity linear in the batch size: fixed + b * per_sample, held up by host floors where it
// sums compute calls (convex piecewise linear then; no floors for memory, nor on clusters
// without them).
struct Linear {
  double fixed = 0;
  double per_sample = 0;
  std::vector<HostFloor> floors = {};
  double at(int batch) const { return at_real(batch); }
  double at_real(double batch) const {
    double total = fixed + batch * per_sample;
    for (const HostFloor& floor : floors) total += floor.shortfall(batch);
    return total;
  }
  Linear& operator+=(const Linear& other) {
    fixed += other.fixed;
    per_sample += other.per_sample;
    floors.insert(floors.end(), other.floors.begin(), other.floors.end());
    return *this;
  }
  friend Linear operator+(Linear a, const Linear& b) { return a += b; }
};

// A stretch of the iteration where compute runs beside communication on the lanes (prefetched
// gathers, reductions of the previous operator): while both run, compute is slowed by
// `slowdown` and communication by `communication_slowdown` (1 on GPUs; on CPU ranks sharing
// cores both slow alike), so the stretch lasts
//   max(comm + compute x slowdown x (1 - 1/comm_slowdown),
//       compute + comm x comm_slowdown x (1 - 1/slowdown)),
// the first while the communication outlasts the compute, the second otherwise (with
// communication_slowdown 1: max(comm, compute + comm x (1 - 1/slowdown))). Convex in the
// compute while slowdown x (1 - 1/communication_slowdown) <= 1, which factors of at most 2 are.
struct OverlappedPhase {
  Linear compute_s;            // at full speed
  double communication_s = 0;  // the busiest lane's work beside it, at full speed
  double slowdown = 1;
  double communication_slowdown = 1;
  // The stretch's length for a compute of `compute_s` seconds.
  double length_s(double compute_s) const;
  double at(int batch) const;
  // The part of the communication the compute does not hide (the stream waits).
  double exposed_s(int batch) const;
  // The batch size where it turns from communication- to compute-bound (may be < 1 or inf).
  double break_even_batch() const;
};

// The time of one option at batch size b: a serial part plus overlapped phases. It is convex
// and piecewise linear in b; every consumer evaluates it at b.
struct OptionTime {
  static constexpr int max_phases = 9;
  Linear serial_s;                    // nothing overlaps it
  double serial_communication_s = 0;  // of which exposed communication
  std::array<OverlappedPhase, max_phases> phases{};
  int phase_count = 0;
  double at(int batch) const;
  double exposed_communication_s(int batch) const;
  void add_phase(const OverlappedPhase& phase);
  // Values that identify the function (for grouping identical operators).
  void append_key(std::vector<double>& key) const;
};

// Whether a takes no longer than b at every batch size >= 1 (exact for piecewise-linear times:
// compared at b = 1, at every break-even point and in the slope beyond).
bool no_slower(const OptionTime& a, const OptionTime& b);

// Cost of one operator under one choice.
// Time figures cover one iteration: all m micro-batches of the training's accumulation and the
// optimizer step; memory is per micro-batch (activations live for one micro-batch at a time).
struct OptionCost {
  OptionTime time_s;        // compute, communication (overlapped or exposed), slicing, optimizer
  Linear persistent_bytes;  // live for the whole iteration: model states, saved activations
  Linear transient_bytes;   // live only while this operator runs; peak adds the largest one
  double gather_buffer_bytes = 0;  // its gathered slice, which may be in flight beside another
  double host_bytes = 0;           // in host memory per rank (offloaded states)
  // Its own next sharded slice, gathered while one runs (0 with fewer than two sharded slices).
  double next_slice_buffer_bytes = 0;
  // Breakdown, for explanations.
  Linear compute_s;
  double communication_s = 0;
  double slicing_overhead_s = 0;
};

// Where the peak memory comes from.
struct PeakBreakdown {
  double model_state_bytes = 0;
  double activation_bytes = 0;
  double extra_bytes = 0;
  double transient_bytes = 0;   // the largest transient term plus the prefetch window
  double prefetch_bytes = 0;    // of which: (units in flight - 1) x the largest gather buffer
  int transient_operator = -1;  // operator whose transient sets the peak
  // "model states", "activations", ... : the largest part.
  std::string dominant_part() const;
};

// What a plan's peak memory combines, gathered operator by operator (`CostModel::add_peak_terms`).
// Three kinds of moment can set the peak (the simulator's memory timeline shows each):
// - while the operator that runs last in backward (the first in execution order, a GPT's
//   embedding) runs its backward: every other operator's activations are freed by then and
//   nothing is prefetched after it, so beside the resting states only its own activations and
//   transient term and the window of the next operator's gather buffer (its forward prefetch,
//   its backward gradient) or of its own next sharded slice count;
// - while the operator next to it runs: all activations, its transient term and the window of
//   the larger of its neighbours' buffers (the first operator's is prefetched in backward);
// - while any other operator runs: all activations, the largest transient term among them and
//   the window of the largest gather buffer but the first operator's (which is live only beside
//   its neighbour).
// For the paper model (no transient terms) the persistent sum is the peak.
struct PeakTerms {
  double persistent_bytes = 0;        // every operator's states, extras and activations
  double resting_bytes = 0;           // every operator's states and extras
  double others_transient_bytes = 0;  // largest transient term from the third operator on
  double largest_buffer_bytes = 0;    // largest gather buffer from the second operator on
  double last_bytes = 0;              // the first operator's activations and transient term
  double last_buffer_bytes = 0;       // the first operator's gather buffer
  double last_next_slice_bytes = 0;   // and the buffer of its own next sharded slice
  double beside_transient_bytes = 0;  // the second operator's transient term
  double beside_buffer_bytes = 0;     // the second operator's gather buffer
};

struct PlanCost {
  int batch_size = 0;
  double iteration_time_s = 0;
  double compute_s = 0;
  double communication_s = 0;
  // The part of the communication no compute hides (the compute stream waits for it).
  double exposed_communication_s = 0;
  double optimizer_step_s = 0;  // of which host_optimizer_step_s on the CPU (offloaded states)
  double host_optimizer_step_s = 0;
  double host_copy_s = 0;  // copies between device and host memory (in communication_s)
  double peak_memory_bytes = 0;
  // Offloaded states in host memory: one node's ranks together.
  double host_memory_bytes = 0;
  // All ranks: ranks * b * accumulation steps / iteration time.
  double throughput_samples_per_s = 0;
  PeakBreakdown peak;
};

class CostModel {
 public:
  CostModel(const Workload& workload, const Cluster& cluster, const Training& training,
            CostSettings settings);
  // How much slower compute and communication run while they overlap (shared_core_overlap_slowdown
  // for CPU ranks on shared cores; the GPU's overlap_slowdown and unslowed communication else).
  double overlap_slowdown() const;
  double overlap_communication_slowdown() const;

  const Workload& workload() const { return *workload_; }
  const Cluster& cluster() const { return *cluster_; }
  const Training& training() const { return *training_; }
  const CostSettings& settings() const { return settings_; }
  int ranks() const { return cluster_->ranks; }
  double memory_limit_bytes() const;

  // Throws InputError when the choice is not valid for the operator (e.g. slices on an
  // unsplittable operator, checkpointing an operator without an input size).
  OptionCost option_cost(int op, const OperatorChoice& choice) const;
  // Time of the optimizer step for this operator's local states (extended model only): on the
  // device, and on the host's CPU for offloaded slices (host_optimizer_step_s, included).
  double optimizer_step_s(int op, const OperatorChoice& choice) const;
  double host_optimizer_step_s(int op, const OperatorChoice& choice) const;
  // Host memory one rank keeps for the operator (offloaded states of its sharded slices).
  double host_state_bytes(int op, const OperatorChoice& choice) const;
  // Whether the host memory of a node holds `host_memory_bytes` (always, when not given).
  bool host_memory_fits(double host_memory_bytes) const;
  // The bytes one host copy of a slice of `slice_bytes` parameters moves (a rank's shard).
  double host_copy_bytes(Mode mode, const HostCopy& copy, double slice_bytes) const;
  // Whether the choice is allowed for the operator in this cluster.
  bool valid(int op, const OperatorChoice& choice) const;

  PlanCost plan_cost(const Plan& plan) const;
  // Memory the prefetch window adds to the peak, given the plan's largest gather buffer.
  double prefetch_window_bytes(double largest_gather_buffer_bytes) const;
  // The operator that runs last in backward (first in execution order) and the one next to it
  // (-1 when there is none).
  int last_in_backward() const;
  int beside_last_in_backward() const;
  // `terms` with operator `op`'s option (at batch b) added.
  PeakTerms add_peak_terms(PeakTerms terms, int op, const OptionCost& cost, int batch) const;
  // The peak memory the terms give: the largest of the moments of PeakTerms.
  double peak_bytes(const PeakTerms& terms) const;
  // The moments apart: while an operator from the third on runs, while the second runs, while
  // the first runs its backward (each the persistent sum or less where it does not apply).
  double others_moment_bytes(const PeakTerms& terms) const;
  double beside_moment_bytes(const PeakTerms& terms) const;
  double last_moment_bytes(const PeakTerms& terms) const;

  // One call of the whole operator at batch b: fixed + b x per-sample seconds, from the
  // operator's own gamma_i, its kind's calibrated law in the cluster, or FLOPs / compute rate;
  // with the law's host floor (extended model) at(b) is max(floor, fixed + b x per-sample).
  Linear forward_compute_s(int op) const;
  Linear backward_compute_s(int op) const;
  // What each slice after the first adds to the phase, measured for the operator's kind; nullopt
  // when not calibrated (then the launch + partial-sum estimate applies).
  std::optional<double> calibrated_extra_slice_s(int op, bool backward) const;
  // gamma_i: compute seconds per sample, forward + backward; and forward alone.
  double compute_s_per_sample(int op) const;
  double forward_compute_s_per_sample(int op) const;

  // Bytes a gradient reduction moves per byte of parameters (2 / 4 for fp16 parameters
  // all-reduced in fp32; 1 unless the training setup says otherwise).
  double gradient_reduce_ratio() const;

  // The memory parts of one choice, persistent model states only (for explanations).
  double model_state_bytes(int op, const OperatorChoice& choice) const;

 private:
  Linear phase_compute_s(int op, bool backward) const;
  // One operator's call (a unit's member, or operator `index` itself; `index` names it in
  // errors).
  Linear operator_compute_s(const Operator& op, int index, bool backward) const;
  const ComputeLaw* law_of(const Operator& op, bool backward) const;
  // The calibrated law of the operator's kind for the phase; nullptr for operators with their
  // own gamma_i or kinds the cluster has no law for.
  const ComputeLaw* kind_law(int op, bool backward) const;
  double straggler_slowdown() const;
  // States the rank keeps and updates: all of a DP slice, the shard of a sharded one.
  double owned_state_bytes(int op, const OperatorChoice& choice) const;
  // One slice's collectives in `mode` over the iteration's micro-batches (DP: the DP slices'
  // all-reduce), as model/mode describes them; with `offload`, its host copies too.
  double sharded_communication_s(Mode mode, double slice_bytes, Checkpoint checkpoint,
                                 bool offload = false) const;
  // The extended model's time: phases of overlap as the simulator schedules them (sim/program).
  OptionTime overlapped_time(int op, const OperatorChoice& choice, const Linear& slicing) const;
  double kernel_launch_s() const;

  const Workload* workload_;
  const Cluster* cluster_;
  const Training* training_;
  CostSettings settings_;
};

}  // namespace osdp
