#include "model/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "model/input_error.hpp"

namespace osdp {

std::string_view cost_model_name(CostModelKind kind) {
  return kind == CostModelKind::paper ? "paper" : "extended";
}

std::string PeakBreakdown::dominant_part() const {
  const std::array<std::pair<double, const char*>, 4> parts{{
      {model_state_bytes, "model states"},
      {activation_bytes, "activations"},
      {extra_bytes, "extra buffers"},
      {transient_bytes, "transient buffers"},
  }};
  return std::max_element(parts.begin(), parts.end(),
                          [](const auto& a, const auto& b) { return a.first < b.first; })
      ->second;
}

CostModel::CostModel(const Workload& workload, const Cluster& cluster, const Training& training,
                     CostSettings settings)
    : workload_(&workload), cluster_(&cluster), training_(&training), settings_(settings) {}

double CostModel::memory_limit_bytes() const {
  if (training_->memory_limit_bytes) return *training_->memory_limit_bytes;
  if (cluster_->gpu.memory_bytes) return *cluster_->gpu.memory_bytes;
  throw InputError("", "$.training.memory_limit", "nothing",
                   "a memory limit (in the training setup, or the GPU's memory in the cluster)");
}

const ComputeLaw* CostModel::kind_law(int index, bool backward) const {
  return law_of(workload_->op(index), backward);
}

const ComputeLaw* CostModel::law_of(const Operator& op, bool backward) const {
  // Profiled per operator, or a unit of several: no kind law of its own.
  if (op.compute_s_per_sample || !op.members.empty()) return nullptr;
  const OperatorCompute* law = cluster_->gpu.compute_law(operator_kind_name(op.kind));
  if (!law) return nullptr;
  return backward ? &law->backward : &law->forward;
}

// The extended model's ranks run at the slowest rank's pace (the paper's keep b x gamma_i).
double CostModel::straggler_slowdown() const {
  return settings_.kind == CostModelKind::extended ? cluster_->gpu.straggler_slowdown : 1.0;
}

Linear CostModel::phase_compute_s(int index, bool backward) const {
  const Operator& op = workload_->op(index);
  if (op.members.empty()) return operator_compute_s(op, index, backward);
  // An FSDP unit computes its members one after another, each by its own law.
  Linear total;
  for (const Operator& member : op.members) total += operator_compute_s(member, index, backward);
  return total;
}

namespace {
double law_score_rate(const ComputeLaw* law) {
  return law && law->score_flops_per_s ? *law->score_flops_per_s : 1.0;
}
}  // namespace

Linear CostModel::operator_compute_s(const Operator& op, int index, bool backward) const {
  const double straggling = straggler_slowdown();
  if (!backward && op.forward_compute_s_per_sample) {
    return {0.0, *op.forward_compute_s_per_sample * straggling};
  }
  if (op.compute_s_per_sample) {
    // A given gamma_i (profiled per operator) has no fixed part; backward is about twice the
    // forward (two MatMuls per forward MatMul) unless the forward is given too.
    const double forward = op.forward_compute_s_per_sample.value_or(*op.compute_s_per_sample / 3.0);
    return {0.0, (backward ? *op.compute_s_per_sample - forward : forward) * straggling};
  }
  const double flops = backward ? op.backward_flops_per_sample : op.forward_flops_per_sample;
  const ComputeLaw* law = law_of(op, backward);
  const std::optional<double> rate =
      law && law->flops_per_s ? law->flops_per_s : cluster_->gpu.compute_flops_per_s;
  if (!rate && flops > 0) {
    throw InputError("", fmt::format("$.model.operators[{}].compute_s_per_sample", index),
                     "nothing", "compute seconds per sample, or a GPU compute rate in the cluster");
  }
  // Attention's score products at their own rate where the law has one.
  const double score_flops =
      law && law->score_flops_per_s
          ? (backward ? op.score_backward_flops_per_sample : op.score_forward_flops_per_sample)
          : 0.0;
  const double flops_time_s =
      flops > 0 ? (flops - score_flops) / *rate + score_flops / law_score_rate(law) : 0.0;
  const double rows_time_s =
      law && law->score_row_s ? op.score_rows_per_sample * *law->score_row_s : 0.0;
  Linear call{(law ? law->fixed_s : 0.0) * straggling, (flops_time_s + rows_time_s) * straggling};
  if (law && law->activation_bytes_per_s && settings_.kind == CostModelKind::extended) {
    const double bytes = op.activation_bytes_per_sample * (backward ? 2.0 : 1.0);
    call.per_sample += bytes / *law->activation_bytes_per_s * straggling;
  }
  // The paper's model has no fixed part, and so no floor either.
  if (law && law->host_floor_s > 0 && settings_.kind == CostModelKind::extended) {
    call.floors.push_back({1.0, law->host_floor_s * straggling, call.fixed, call.per_sample});
  }
  return call;
}

namespace {
// The floors of `calls` calls of a phase, each as one call of it had.
std::vector<HostFloor> floors_of(const Linear& phase, double calls) {
  std::vector<HostFloor> floors = phase.floors;
  for (HostFloor& floor : floors) floor.weight *= calls;
  return floors;
}
}  // namespace

std::optional<double> CostModel::calibrated_extra_slice_s(int index, bool backward) const {
  const ComputeLaw* law = kind_law(index, backward);
  if (!law || !law->extra_slice_s) return std::nullopt;
  return *law->extra_slice_s * straggler_slowdown();
}

Linear CostModel::forward_compute_s(int index) const { return phase_compute_s(index, false); }
Linear CostModel::backward_compute_s(int index) const { return phase_compute_s(index, true); }

double CostModel::compute_s_per_sample(int index) const {
  return forward_compute_s(index).per_sample + backward_compute_s(index).per_sample;
}

double CostModel::forward_compute_s_per_sample(int index) const {
  return forward_compute_s(index).per_sample;
}

bool CostModel::valid(int index, const OperatorChoice& choice) const {
  const Operator& op = workload_->op(index);
  if (!choice_consistent(choice)) return false;
  if (choice.slices > 1 && !op.splittable) return false;
  if (op.split_units > 0 && op.split_units % choice.slices != 0) return false;
  if (choice.checkpoint != Checkpoint::none && !op.input_activation_bytes_per_sample) return false;
  return mode_fits_cluster(choice.mode, *cluster_);
}

double CostModel::owned_state_bytes(int index, const OperatorChoice& choice) const {
  const double all_states = workload_->op(index).model_state_bytes();
  const double sharded_fraction = static_cast<double>(choice.sharded_slices) / choice.slices;
  // Offloaded shards are updated on the host (host_optimizer_step_s).
  return (1.0 - sharded_fraction) * all_states +
         (choice.offload ? 0.0
                         : sharded_fraction * (all_states / shard_degree(choice.mode, *cluster_)));
}

double CostModel::host_state_bytes(int index, const OperatorChoice& choice) const {
  if (!choice.offload) return 0.0;
  const Operator& op = workload_->op(index);
  const double sharded_fraction = static_cast<double>(choice.sharded_slices) / choice.slices;
  return sharded_fraction * osdp::host_state_bytes(choice.mode, *cluster_, op.parameter_bytes,
                                                   op.gradient_bytes, op.optimizer_bytes);
}

bool CostModel::host_memory_fits(double host_memory_bytes) const {
  return !cluster_->host.memory_bytes || host_memory_bytes <= *cluster_->host.memory_bytes;
}

double CostModel::host_optimizer_step_s(int index, const OperatorChoice& choice) const {
  if (settings_.kind == CostModelKind::paper || !choice.offload) return 0.0;
  // The CPU update reads and writes the rank's shard of every state once (CPU Adam); the node's
  // ranks share the host's optimizer bandwidth. Ranks that compute on the host already update
  // there, at the rate calibrated with every rank updating at once.
  const double all_states = workload_->op(index).model_state_bytes();
  const double sharded_fraction = static_cast<double>(choice.sharded_slices) / choice.slices;
  const double shard_bytes = sharded_fraction * all_states / shard_degree(choice.mode, *cluster_);
  double rank_bandwidth = cluster_->host.optimizer_bandwidth_Bps / cluster_->gpus_per_node;
  if (cluster_->host_cores) {
    const Gpu& cpu = cluster_->gpu;
    rank_bandwidth = cpu.optimizer_bandwidth_Bps.value_or(
        cpu.memory_bandwidth_Bps.value_or(cluster_->host.optimizer_bandwidth_Bps));
  }
  return 2.0 * shard_bytes / rank_bandwidth;
}

double CostModel::model_state_bytes(int index, const OperatorChoice& choice) const {
  const Operator& op = workload_->op(index);
  const double sharded_fraction = static_cast<double>(choice.sharded_slices) / choice.slices;
  double sharded_slice_states =
      resting_state_bytes(choice.mode, *cluster_, op.parameter_bytes, op.gradient_bytes,
                          op.optimizer_bytes, choice.offload);
  // Parameters gathered once (FSDP SHARD_GRAD_OP) are kept from forward to backward, so at the
  // peak the whole copy lives beside the shard.
  if (describe_mode(choice.mode).parameters == ParameterUse::gathered_once) {
    sharded_slice_states += op.parameter_bytes;
  }
  return (1.0 - sharded_fraction) * op.model_state_bytes() +
         sharded_fraction * sharded_slice_states;
}

double CostModel::gradient_reduce_ratio() const {
  if (training_->gradient_reduce == ReducePrecision::parameters) return 1.0;
  return reduce_element_bytes(training_->precision, training_->gradient_reduce) /
         bytes_per_parameter(training_->precision, training_->optimizer).parameter;
}

double CostModel::host_copy_bytes(Mode mode, const HostCopy& copy, double slice_bytes) const {
  const double shard_bytes = slice_bytes / shard_degree(mode, *cluster_);
  return copy.gradients ? shard_bytes * gradient_reduce_ratio() : shard_bytes;
}

double CostModel::sharded_communication_s(Mode mode, double slice_bytes, Checkpoint checkpoint,
                                          bool offload) const {
  const ModeDescription& description = describe_mode(mode);
  double time_s = 0.0;
  if (offload && description.offload) {
    for (const HostCopy& copy : description.offload->copies) {
      if (!copy_runs(copy, checkpoint)) continue;
      const int runs =
          copy_runs_every_micro_batch(description, copy) ? training_->accumulation_steps : 1;
      time_s += runs * host_copy_s(*cluster_, host_copy_bytes(mode, copy, slice_bytes));
    }
  }
  for (const ModeCollective& collective : description.collectives) {
    if (!collective_runs(collective, checkpoint)) continue;
    // Reductions move gradients, in the precision the training reduces them in.
    double bytes = collective.kind == CollectiveKind::all_gather
                       ? slice_bytes
                       : slice_bytes * gradient_reduce_ratio();
    if (collective.node_shard_bytes) bytes /= cluster_->gpus_per_node;
    const int runs =
        runs_every_micro_batch(description, collective) ? training_->accumulation_steps : 1;
    time_s += runs * group_timing(collective.group, *cluster_)
                         .time_s(collective.kind, bytes, group_ranks(collective.group, *cluster_));
  }
  return time_s;
}

double CostModel::optimizer_step_s(int index, const OperatorChoice& choice) const {
  const std::optional<double> bandwidth = cluster_->gpu.optimizer_bandwidth_Bps
                                              ? cluster_->gpu.optimizer_bandwidth_Bps
                                              : cluster_->gpu.memory_bandwidth_Bps;
  if (settings_.kind == CostModelKind::paper) return 0.0;
  // The update reads and writes every state this rank owns once (memory bound): the shard of
  // a sharded slice (for Z2 not the gathered copy it holds through the step), all of a DP one;
  // an offloaded shard's update runs on the host.
  const double device_s =
      bandwidth ? 2.0 * owned_state_bytes(index, choice) / *bandwidth * straggler_slowdown() : 0.0;
  return device_s + host_optimizer_step_s(index, choice);
}

double OverlappedPhase::length_s(double compute) const {
  return std::max(communication_s + compute * slowdown * (1.0 - 1.0 / communication_slowdown),
                  compute + communication_s * communication_slowdown * (1.0 - 1.0 / slowdown));
}

double OverlappedPhase::at(int batch) const { return length_s(compute_s.at(batch)); }

double OverlappedPhase::exposed_s(int batch) const {
  // The stream waits from the end of its (slowed) compute to the end of the communication.
  return std::max(0.0, communication_s - compute_s.at(batch) * slowdown / communication_slowdown);
}

double OverlappedPhase::break_even_batch() const {
  if (compute_s.per_sample <= 0) return std::numeric_limits<double>::infinity();
  const double target = communication_s * communication_slowdown / slowdown;
  if (compute_s.floors.empty()) return (target - compute_s.fixed) / compute_s.per_sample;
  // Host floors make the compute convex piecewise linear and still increasing: bisect.
  double low = 0.0;
  double high = 1.0;
  while (compute_s.at_real(high) < target && high < 1e12) high *= 2.0;
  if (compute_s.at_real(low) >= target) return 0.0;
  for (int i = 0; i < 100; ++i) {
    const double middle = 0.5 * (low + high);
    (compute_s.at_real(middle) < target ? low : high) = middle;
  }
  return high;
}

double OptionTime::at(int batch) const {
  double total = serial_s.at(batch);
  for (int p = 0; p < phase_count; ++p) total += phases[p].at(batch);
  return total;
}

double OptionTime::exposed_communication_s(int batch) const {
  double total = serial_communication_s;
  for (int p = 0; p < phase_count; ++p) total += phases[p].exposed_s(batch);
  return total;
}

void OptionTime::add_phase(const OverlappedPhase& phase) {
  if (phase.communication_s <= 0) {
    serial_s += phase.compute_s;  // nothing beside it: plain compute
    return;
  }
  if (phase_count == max_phases) throw std::logic_error("cost model: too many overlapped phases");
  phases[phase_count++] = phase;
}

namespace {

// A Linear's host floors, which bend it: identical operators have identical floors too.
void append_floors(const Linear& linear, std::vector<double>& key) {
  key.push_back(static_cast<double>(linear.floors.size()));
  for (const HostFloor& f : linear.floors) {
    key.insert(key.end(), {f.weight, f.floor_s, f.call_fixed, f.call_per_sample});
  }
}

// Where a host floor meets its call's law (the Linear bends there); none without floors.
void append_bends(const Linear& linear, std::vector<double>& points) {
  for (const HostFloor& floor : linear.floors) {
    if (floor.call_per_sample <= 0) continue;
    points.push_back((floor.floor_s - floor.call_fixed) / floor.call_per_sample);
  }
}

}  // namespace

void OptionTime::append_key(std::vector<double>& key) const {
  key.insert(key.end(), {serial_s.fixed, serial_s.per_sample, serial_communication_s,
                         static_cast<double>(phase_count)});
  append_floors(serial_s, key);
  for (int p = 0; p < phase_count; ++p) {
    const OverlappedPhase& phase = phases[p];
    key.insert(key.end(), {phase.compute_s.fixed, phase.compute_s.per_sample, phase.communication_s,
                           phase.slowdown, phase.communication_slowdown});
    append_floors(phase.compute_s, key);
  }
}

namespace {

// The time at a real batch size (break-even points fall between integers).
double time_at(const OptionTime& time, double batch) {
  double total = time.serial_s.at_real(batch);
  for (int p = 0; p < time.phase_count; ++p) {
    const OverlappedPhase& phase = time.phases[p];
    total += phase.length_s(phase.compute_s.at_real(batch));
  }
  return total;
}

// d time / d b once every phase is compute-bound and every host floor is left behind.
double final_slope(const OptionTime& time) {
  double slope = time.serial_s.per_sample;
  for (int p = 0; p < time.phase_count; ++p) {
    slope += std::max(0.0, time.phases[p].compute_s.per_sample);
  }
  return slope;
}

}  // namespace

bool no_slower(const OptionTime& a, const OptionTime& b) {
  // a - b is piecewise linear with kinks only at the phases' break-even points: comparing at
  // b = 1, at every kink beyond and in the final slope decides it for every b >= 1.
  std::vector<double> points{1.0};
  for (const OptionTime* time : {&a, &b}) {
    append_bends(time->serial_s, points);
    for (int p = 0; p < time->phase_count; ++p) {
      points.push_back(time->phases[p].break_even_batch());
      append_bends(time->phases[p].compute_s, points);
    }
  }
  for (double x : points) {
    if (std::isfinite(x) && x >= 1.0 && time_at(a, x) > time_at(b, x)) return false;
  }
  return final_slope(a) <= final_slope(b);
}

double CostModel::overlap_slowdown() const {
  if (cluster_->host_cores) return shared_core_overlap_slowdown(*cluster_);
  return settings_.overlap.slowdown.value_or(cluster_->gpu.overlap_slowdown);
}

double CostModel::overlap_communication_slowdown() const {
  return cluster_->host_cores ? shared_core_overlap_slowdown(*cluster_) : 1.0;
}

double CostModel::kernel_launch_s() const {
  return settings_.overlap.kernel_launch_s.value_or(cluster_->gpu.kernel_launch_s);
}

namespace {

// Communication of one operator's phase, per lane: collectives on one lane run one after the
// other (NCCL order), lanes run side by side.
struct LaneLoads {
  std::map<int, double> lane_s;
  void add(int lane, double seconds) { lane_s[lane] += seconds; }
  void add(const LaneLoads& other) {
    for (const auto& [lane, seconds] : other.lane_s) lane_s[lane] += seconds;
  }
  double busiest_s() const {
    double busiest = 0.0;
    for (const auto& [lane, seconds] : lane_s) busiest = std::max(busiest, seconds);
    return busiest;
  }
  double total_s() const {
    double total = 0.0;
    for (const auto& [lane, seconds] : lane_s) total += seconds;
    return total;
  }
};

// What one micro-batch of an operator puts on the lanes, by where it runs (sim/program).
struct OperatorCollectives {
  LaneLoads forward_gathers;   // before each forward slice
  LaneLoads backward_gathers;  // before the recomputes and backwards
  LaneLoads reductions;        // after each backward (every micro-batch)
  LaneLoads last_reductions;   // after the backward of the last micro-batch only
  // The DP slices' all-reduce, issued once after the operator's last backward slice (in the
  // last micro-batch): on the gathers' lane it holds back the next operator's gathers.
  LaneLoads dp_all_reduce;
  double after_backward_s = 0;         // DP all-reduce in one bucket after the whole backward
  double after_step_s = 0;             // after the optimizer step
  double backward_slice_gather_s = 0;  // one sharded slice's backward gather
};

}  // namespace

OptionTime CostModel::overlapped_time(int index, const OperatorChoice& choice,
                                      const Linear& slicing) const {
  const CostSettings::Overlap& schedule = settings_.overlap;
  const int k = choice.slices;
  const int j = choice.sharded_slices;
  const int m = training_->accumulation_steps;
  const bool checkpointed = choice.checkpoint != Checkpoint::none;

  // The lanes (sim/program): one per process group, reductions on a second one when separate.
  auto gather_into = [&](OperatorCollectives& calls, int operator_index, Mode mode,
                         double slice_bytes, int count, bool dp_slices) {
    const ModeDescription& description = describe_mode(mode);
    // Host copies (offload) run on the lane of their stage's collectives, before the gather
    // they feed or after the reduction they drain (sim/program issues them there).
    if (!dp_slices && choice.offload && description.offload) {
      const int lane = static_cast<int>(description.shard_group.value_or(GroupAxis::data)) * 2;
      for (const HostCopy& copy : description.offload->copies) {
        if (!copy_runs(copy, choice.checkpoint)) continue;
        const double time_s =
            count * host_copy_s(*cluster_, host_copy_bytes(mode, copy, slice_bytes));
        const int copy_lane = lane + (copy.gradients && schedule.separate_reduction_lane ? 1 : 0);
        switch (copy.stage) {
          case Stage::forward:
            calls.forward_gathers.add(copy_lane, time_s);
            break;
          case Stage::recompute:
          case Stage::backward:
            calls.backward_gathers.add(copy_lane, time_s);
            if (copy.stage == Stage::backward) calls.backward_slice_gather_s += time_s / count;
            break;
          case Stage::after_backward:
            if (copy_runs_every_micro_batch(description, copy)) {
              calls.reductions.add(copy_lane, time_s);
            } else {
              calls.last_reductions.add(copy_lane, time_s);
            }
            break;
          case Stage::after_step:
            calls.after_step_s += time_s;
            break;
        }
      }
    }
    for (const ModeCollective& collective : description.collectives) {
      if (!collective_runs(collective, choice.checkpoint)) continue;
      const bool reduction = collective.kind != CollectiveKind::all_gather;
      double bytes = reduction ? slice_bytes * gradient_reduce_ratio() : slice_bytes;
      if (collective.node_shard_bytes) bytes /= cluster_->gpus_per_node;
      const double time_s =
          count * group_timing(collective.group, *cluster_)
                      .time_s(collective.kind, bytes, group_ranks(collective.group, *cluster_));
      const int lane = static_cast<int>(collective.group) * 2 +
                       (reduction && schedule.separate_reduction_lane ? 1 : 0);
      switch (collective.stage) {
        case Stage::forward:
          calls.forward_gathers.add(lane, time_s);
          break;
        case Stage::recompute:
        case Stage::backward:
          calls.backward_gathers.add(lane, time_s);
          if (collective.stage == Stage::backward) calls.backward_slice_gather_s += time_s / count;
          break;
        case Stage::after_backward:
          if (dp_slices && schedule.all_reduce_after_backward) {
            // One all-reduce of the whole bucket: each operator adds its bytes, the latency
            // counts once (charged to the first operator in execution order).
            const double latency_s =
                group_timing(collective.group, *cluster_)
                    .time_s(collective.kind, 0.0, group_ranks(collective.group, *cluster_));
            calls.after_backward_s += time_s - latency_s;
            if (operator_index == workload_->execution_order().front()) {
              calls.after_backward_s += latency_s;
            }
          } else if (dp_slices) {
            calls.dp_all_reduce.add(lane, time_s);
          } else if (runs_every_micro_batch(description, collective)) {
            calls.reductions.add(lane, time_s);
          } else {
            calls.last_reductions.add(lane, time_s);
          }
          break;
        case Stage::after_step:
          calls.after_step_s += time_s;
          break;
      }
    }
  };
  // What an operator of `parameter_bytes` puts on the lanes under this choice.
  auto collectives_of = [&](int operator_index) {
    const double parameter_bytes = workload_->op(operator_index).parameter_bytes;
    OperatorCollectives calls;
    if (j < k) gather_into(calls, operator_index, Mode::dp, parameter_bytes * (k - j) / k, 1, true);
    if (j > 0) gather_into(calls, operator_index, choice.mode, parameter_bytes / k, j, false);
    return calls;
  };
  const OperatorCollectives calls = collectives_of(index);

  // Compute of one micro-batch, as the simulator runs it: every slice launches its forward
  // (and recompute) kernel once and its backward kernels twice; the extra slices add their
  // partial sums (slicing).
  const double launch_s = kernel_launch_s();
  const int forward_calls = checkpointed ? 2 : 1;
  Linear forward = forward_compute_s(index);
  forward.fixed += k * launch_s;
  Linear backward = backward_compute_s(index);
  backward.fixed += 2 * k * launch_s;
  Linear backward_phase = backward;  // with the recompute, between the backward gathers
  if (checkpointed) backward_phase += forward;
  const Linear slicing_per_micro{slicing.fixed / m, slicing.per_sample / m};
  // The partial-sum adds split between the phases as the calls do.
  auto share = [&](double calls_in_phase) {
    const double fraction = calls_in_phase / (forward_calls + 1);
    return Linear{slicing_per_micro.fixed * fraction, slicing_per_micro.per_sample * fraction};
  };
  forward += share(1);
  backward_phase += share(forward_calls);

  const auto& order = workload_->execution_order();
  const auto position = std::find(order.begin(), order.end(), index);
  const bool first = position == order.begin();
  const bool last = position == order.end() || std::next(position) == order.end();
  const double slowdown = overlap_slowdown();
  const double communication_slowdown = overlap_communication_slowdown();
  OptionTime time;
  // Host floors scale with the calls they stand under (a slice's call is 1/k of the law).
  auto scaled = [](Linear value, double factor) {
    Linear result{value.fixed * factor, value.per_sample * factor, value.floors};
    for (HostFloor& floor : result.floors) floor.weight *= factor;
    return result;
  };
  auto exposed = [&](double communication_s) {
    time.serial_s.fixed += communication_s;
    time.serial_communication_s += communication_s;
  };
  // Communication beside compute `hidden` (per micro-batch, `count` of them): the operator is
  // charged what it adds to that compute, the phase's length (OverlappedPhase) - hidden,
  // so that summed over the chain every compute counts once (it is charged by its own
  // operator) and every collective adds only what the compute beside it does not hide.
  auto beside = [&](Linear hidden, double communication_s, int count) {
    if (communication_s <= 0) return;
    time.add_phase(
        {scaled(hidden, count), count * communication_s, slowdown, communication_slowdown});
    time.serial_s += scaled(hidden, -count);
  };
  // The compute a neighbour's slice does in a phase. Its choice is not known here (the time
  // must stay a sum over operators): it is assumed checkpointed as this operator is and split
  // as finely as the search may split it (finest_split), so that no plan gains by pairing a
  // whole operator with a finely split neighbour whose last slice hides little.
  auto neighbour = [&](int other, bool backward) {
    const int slices = workload_->op(other).splittable ? std::max(k, settings_.finest_split) : k;
    Linear compute =
        scaled(backward ? backward_compute_s(other) : forward_compute_s(other), 1.0 / slices);
    compute.fixed += (backward ? 2 : 1) * launch_s;
    if (backward && checkpointed) {
      compute += scaled(forward_compute_s(other), 1.0 / k);
      compute.fixed += launch_s;
    }
    return compute;
  };
  const int previous = first ? -1 : *std::prev(position);
  const int next = last ? -1 : *std::next(position);

  // Every compute of the operator, on the stream.
  time.serial_s += scaled(forward, m);
  time.serial_s += scaled(backward_phase, m);

  // Forward: a gather runs while the slice before it computes (prefetch of depth one: the
  // rate limiter's two units in flight allow no deeper): the first slice's behind the previous
  // operator's last, the others behind this operator's. The first operator's first gather has
  // nothing to hide behind.
  const double forward_gathers_s = calls.forward_gathers.total_s();
  if (forward_gathers_s > 0) {
    if (!schedule.forward_prefetch) {
      exposed(m * forward_gathers_s);
    } else {
      Linear hidden = scaled(forward, (j - 1.0) / k);
      double hidden_gathers_s = forward_gathers_s;
      if (first) {
        exposed(m * forward_gathers_s / j);
        hidden_gathers_s -= forward_gathers_s / j;
      } else {
        hidden += neighbour(previous, false);
      }
      beside(hidden, hidden_gathers_s, m);
    }
  }

  // Backward, step by step as sim/program issues it: a checkpointed operator first recomputes
  // its slices, then runs their backwards. A prefetched (pre) gather runs beside the compute of
  // the step before it (the next operator's last step, then this operator's), the reductions
  // after a backward beside the steps after it; one lane carries both, in issue order. The
  // recomputes (a third of the compute) and the backwards are charged apart: a phase's slack
  // does not hide another's communication. Exposed: the first backward unit's gathers (the
  // last operator's), the last unit's reductions (the first operator's), gathers without
  // prefetch, and a gather that refills a buffer still in use (an unfused recompute's last
  // slice, a fused recompute's later slices).
  const bool fused = choice.checkpoint == Checkpoint::fused;
  // The last operator's backward gathers have nothing before them to hide behind when it
  // recomputes first; without a recompute only its first backward slice's gather (when that
  // slice is sharded) waits, the others are prefetched behind its own slices.
  const bool pre = schedule.backward_prefetch == BackwardPrefetch::pre;
  const bool prefetched = pre && (!last || !checkpointed);
  const double gathers_s = calls.backward_gathers.total_s();
  const double slice_gather_s = calls.backward_slice_gather_s;
  double recompute_gathers_s = 0.0;  // beside the recomputes
  double backward_gathers_s = 0.0;   // beside the backwards
  double refills_s = 0.0;
  if (fused) {
    refills_s = std::max(0, j - 1) * slice_gather_s;
    recompute_gathers_s = gathers_s - refills_s;
  } else if (checkpointed) {
    refills_s = j == k ? slice_gather_s : 0.0;
    recompute_gathers_s = j * slice_gather_s;
    backward_gathers_s = gathers_s - recompute_gathers_s - refills_s;
  } else if (last) {
    refills_s = j == k ? slice_gather_s : 0.0;
    backward_gathers_s = gathers_s - refills_s;
  } else {
    backward_gathers_s = gathers_s;
  }
  if (!prefetched) {
    refills_s = gathers_s;
    recompute_gathers_s = backward_gathers_s = 0.0;
  }
  Linear recompute_phase = checkpointed ? forward : Linear{};
  const Linear backward_only{backward_phase.fixed - recompute_phase.fixed,
                             backward_phase.per_sample - recompute_phase.per_sample};
  const Linear next_step = !last ? neighbour(next, true) : Linear{};
  Linear recompute_hidden = scaled(recompute_phase, (k - 1.0) / k) + next_step;
  Linear backward_hidden =
      checkpointed ? backward_only : scaled(backward_only, (k - 1.0) / k) + next_step;
  if (last && !first && !checkpointed) backward_hidden += neighbour(previous, true);
  // A reduction on a lane of its own (not the gathers') runs beside what the stream does after
  // the backward that produced it: the backward (and a checkpointed one's recompute) of the
  // operator before it in execution order, which comes next in backward. The lane is a queue
  // that nothing limits, so a long reduction spills into the next operator's slack: charged
  // over a pair (this operator and the one before it, taken in this operator's choice), half
  // of what the pair's reductions exceed the pair's compute, so that an attention that hides
  // its reduction and an MLP that cannot, one after the other, are seen as the lane sees them.
  const int gather_lane =
      static_cast<int>(describe_mode(choice.mode).shard_group.value_or(GroupAxis::data)) * 2;
  const Linear own_step = scaled(backward_phase, 1.0);  // one micro-batch's backward (+ recompute)
  OperatorCollectives before;
  Linear reduction_hidden;
  if (!first) {
    before = collectives_of(previous);
    reduction_hidden = scaled(neighbour(previous, true) + own_step, 0.5);
  }
  auto backward_micro_batches = [&](int count, bool with_last_reductions) {
    if (count <= 0) return;
    LaneLoads reductions = calls.reductions;
    if (with_last_reductions) reductions.add(calls.last_reductions);
    // A mixed operator's DP all-reduce on the gathers' lane: the operator before it (taken in
    // this choice, so with sharded slices to gather) computes its first slice, then waits for
    // its next gather behind the all-reduce.
    double held_back_s = 0.0;
    if (with_last_reductions) {
      LaneLoads all_reduce = calls.dp_all_reduce;
      if (!first && j > 0) {
        const auto on_gather_lane = all_reduce.lane_s.find(gather_lane);
        if (on_gather_lane != all_reduce.lane_s.end()) {
          held_back_s = on_gather_lane->second + before.backward_slice_gather_s;
          all_reduce.lane_s.erase(on_gather_lane);
        }
      }
      reductions.add(all_reduce);
    }
    double beside_backward_s = backward_gathers_s;
    double own_lanes_s = 0.0;  // the busiest reduction lane apart from the gathers'
    if (first) {
      exposed(count * reductions.total_s());
    } else {
      // The gathers' lane carries the reductions too unless they have their own.
      LaneLoads own_lanes = reductions;
      own_lanes.add(before.reductions);
      if (with_last_reductions) {
        own_lanes.add(before.last_reductions);
        own_lanes.add(before.dp_all_reduce);
      }
      own_lanes.lane_s.erase(gather_lane);
      own_lanes_s = own_lanes.busiest_s() / 2;
      const auto shared = reductions.lane_s.find(gather_lane);
      beside_backward_s += shared == reductions.lane_s.end() ? 0.0 : shared->second;
    }
    exposed(count * refills_s);
    if (checkpointed) beside(recompute_hidden, recompute_gathers_s, count);
    beside(backward_hidden, beside_backward_s, count);
    beside(reduction_hidden, own_lanes_s, count);
    if (held_back_s > 0) beside(neighbour(previous, true), held_back_s, count);
  };
  backward_micro_batches(m - 1, false);
  backward_micro_batches(1, true);

  // After the backward: the bucketed DP all-reduce, the optimizer step, what follows it.
  exposed(calls.after_backward_s + calls.after_step_s);
  time.serial_s.fixed += optimizer_step_s(index, choice);
  return time;
}

OptionCost CostModel::option_cost(int index, const OperatorChoice& choice) const {
  if (!valid(index, choice)) {
    throw InputError("", fmt::format("operator {}", workload_->op(index).name), describe(choice),
                     "a choice this operator and cluster allow");
  }
  const Operator& op = workload_->op(index);
  const bool extended = settings_.kind == CostModelKind::extended;
  const int k = choice.slices;
  const int j = choice.sharded_slices;
  const double slice_bytes = op.parameter_bytes / k;
  const bool checkpointed = choice.checkpoint != Checkpoint::none;

  OptionCost cost;
  cost.persistent_bytes.fixed = model_state_bytes(index, choice) + op.extra_bytes;
  cost.persistent_bytes.per_sample =
      checkpointed ? *op.input_activation_bytes_per_sample : op.activation_bytes_per_sample;

  // The slices share the fixed part (what splitting adds is the slicing overhead below).
  // Each of the m micro-batches runs every compute and sharded collective again; the DP
  // gradients are all-reduced once, after the last micro-batch (DDP no_sync, Megatron).
  const int m = training_->accumulation_steps;
  const Linear forward = forward_compute_s(index);
  const Linear backward = backward_compute_s(index);
  const int forward_calls = checkpointed ? 2 : 1;
  if (extended) cost.compute_s.fixed = m * (forward_calls * forward.fixed + backward.fixed);
  cost.compute_s.per_sample = m * (forward_calls * forward.per_sample + backward.per_sample);
  cost.compute_s.floors = floors_of(forward, m * forward_calls);
  for (const HostFloor& floor : floors_of(backward, m)) cost.compute_s.floors.push_back(floor);

  // The DP slices' collectives run once for all of them (their gradients are all-reduced
  // together after the operator's backward); a sharded slice's run per slice. Each mode says
  // which run every micro-batch (model/mode: DP's all-reduce once, after the last one).
  double communication_s = 0.0;
  if (j < k) {
    communication_s +=
        sharded_communication_s(Mode::dp, op.parameter_bytes * (k - j) / k, choice.checkpoint);
  }
  if (j > 0) {
    communication_s +=
        j * sharded_communication_s(choice.mode, slice_bytes, choice.checkpoint, choice.offload);
  }
  cost.communication_s = communication_s;
  cost.host_bytes = host_state_bytes(index, choice);

  // What the extra slices add: measured on this hardware for the operator's kind (a recompute
  // repeats the forward's), or their partial sums into the output (forward, recompute) and the
  // input gradient (backward), reading two operands and writing one. Their kernel launches
  // count with every slice's in the overlapped time.
  Linear slicing;
  const std::optional<double> measured_forward = calibrated_extra_slice_s(index, false);
  const std::optional<double> measured_backward = calibrated_extra_slice_s(index, true);
  if (extended && k > 1 && (measured_forward || measured_backward)) {
    slicing.fixed = (k - 1) * (forward_calls * measured_forward.value_or(0.0) +
                               measured_backward.value_or(0.0));
  } else if (extended && k > 1 && cluster_->gpu.memory_bandwidth_Bps) {
    slicing.per_sample = (k - 1) * (forward_calls + 1) * 3.0 * op.output_bytes_per_sample /
                         *cluster_->gpu.memory_bandwidth_Bps;
  }
  slicing.fixed *= m;
  slicing.per_sample *= m;
  cost.slicing_overhead_s =
      slicing.fixed + (extended ? m * (k - 1) * (forward_calls + 2) * kernel_launch_s() : 0.0);

  if (extended) {
    cost.time_s = overlapped_time(index, choice, slicing);
  } else {
    // The paper's sum: compute plus every collective, nothing overlapped.
    cost.time_s.serial_s = {communication_s, cost.compute_s.per_sample};
    cost.time_s.serial_communication_s = communication_s;
  }

  if (extended) {
    const ModeDescription& mode = describe_mode(choice.mode);
    const bool gathers = j > 0 && mode.parameters == ParameterUse::gathered_each_use;
    const double gathered_bytes = gathers ? slice_bytes : 0.0;
    cost.gather_buffer_bytes = gathered_bytes;
    cost.next_slice_buffer_bytes = gathers && j > 1 ? slice_bytes : 0.0;
    // Modes that shard gradients hold a slice's full gradient until its reduce-scatter.
    const double full_gradient_bytes = j > 0 && mode.shards_gradients ? op.gradient_bytes / k : 0.0;
    // A fused recompute keeps every sharded slice it gathered until that slice's backward, and
    // all slices recompute before the first backward: all j are gathered at once then.
    const int gathered_at_once = choice.checkpoint == Checkpoint::fused ? j : 1;
    cost.transient_bytes.fixed = gathered_at_once * gathered_bytes + full_gradient_bytes;
    cost.transient_bytes.per_sample =
        op.workspace_bytes_per_sample +
        (checkpointed ? op.activation_bytes_per_sample - *op.input_activation_bytes_per_sample
                      : 0.0);
  }
  return cost;
}

double CostModel::prefetch_window_bytes(double largest_gather_buffer_bytes) const {
  return std::max(0, settings_.units_in_flight - 1) * largest_gather_buffer_bytes;
}

int CostModel::last_in_backward() const {
  const auto& order = workload_->execution_order();
  return order.empty() ? -1 : order.front();
}

int CostModel::beside_last_in_backward() const {
  const auto& order = workload_->execution_order();
  return order.size() > 1 ? order[1] : -1;
}

PeakTerms CostModel::add_peak_terms(PeakTerms terms, int op, const OptionCost& cost,
                                    int batch) const {
  const double transient = cost.transient_bytes.at(batch);
  terms.persistent_bytes += cost.persistent_bytes.at(batch);
  terms.resting_bytes += cost.persistent_bytes.fixed;
  if (op == last_in_backward()) {
    terms.last_bytes = batch * cost.persistent_bytes.per_sample + transient;
    terms.last_buffer_bytes = cost.gather_buffer_bytes;
    terms.last_next_slice_bytes = cost.next_slice_buffer_bytes;
    return terms;
  }
  terms.largest_buffer_bytes = std::max(terms.largest_buffer_bytes, cost.gather_buffer_bytes);
  if (op == beside_last_in_backward()) {
    terms.beside_transient_bytes = transient;
    terms.beside_buffer_bytes = cost.gather_buffer_bytes;
  } else {
    terms.others_transient_bytes = std::max(terms.others_transient_bytes, transient);
  }
  return terms;
}

double CostModel::others_moment_bytes(const PeakTerms& terms) const {
  if (workload_->size() <= 2) return terms.persistent_bytes;  // no third operator
  return terms.persistent_bytes + terms.others_transient_bytes +
         prefetch_window_bytes(terms.largest_buffer_bytes);
}

double CostModel::beside_moment_bytes(const PeakTerms& terms) const {
  if (workload_->size() <= 1) return terms.persistent_bytes;
  return terms.persistent_bytes + terms.beside_transient_bytes +
         prefetch_window_bytes(std::max(terms.last_buffer_bytes, terms.largest_buffer_bytes));
}

double CostModel::last_moment_bytes(const PeakTerms& terms) const {
  return terms.resting_bytes + terms.last_bytes +
         prefetch_window_bytes(std::max(terms.beside_buffer_bytes, terms.last_next_slice_bytes));
}

double CostModel::peak_bytes(const PeakTerms& terms) const {
  return std::max(
      {others_moment_bytes(terms), beside_moment_bytes(terms), last_moment_bytes(terms)});
}

PlanCost CostModel::plan_cost(const Plan& plan) const {
  if (static_cast<int>(plan.choices.size()) != workload_->size()) {
    // A plan of FSDP units is costed on the model of its units (Scenario::for_plan).
    throw InputError(
        "plan", "$.operators", fmt::format("{} choices", plan.choices.size()),
        fmt::format("one per operator of the model ({}){}", workload_->size(),
                    plan.unit_sizes.empty() ? "" : ", the model wrapped in its units"));
  }
  const int b = plan.batch_size;
  PlanCost result;
  result.batch_size = b;
  PeakTerms terms;
  double largest_other_transient = 0.0;
  int largest_other = -1;
  double activation_bytes = 0.0;
  double model_state_bytes_total = 0.0;
  double extra_bytes = 0.0;
  for (int i = 0; i < workload_->size(); ++i) {
    const OperatorChoice& choice = plan.choices.at(i);
    const OptionCost cost = option_cost(i, choice);
    result.iteration_time_s += cost.time_s.at(b);
    result.exposed_communication_s += cost.time_s.exposed_communication_s(b);
    result.compute_s += cost.compute_s.at(b);
    result.communication_s += cost.communication_s;
    result.optimizer_step_s += optimizer_step_s(i, choice);
    result.host_optimizer_step_s += host_optimizer_step_s(i, choice);
    if (choice.offload && choice.sharded_slices > 0) {
      const double slice_bytes = workload_->op(i).parameter_bytes / choice.slices;
      result.host_copy_s +=
          choice.sharded_slices *
          (sharded_communication_s(choice.mode, slice_bytes, choice.checkpoint, true) -
           sharded_communication_s(choice.mode, slice_bytes, choice.checkpoint));
    }
    result.host_memory_bytes += cluster_->gpus_per_node * cost.host_bytes;
    model_state_bytes_total += model_state_bytes(i, choice);
    extra_bytes += workload_->op(i).extra_bytes;
    activation_bytes += b * cost.persistent_bytes.per_sample;
    const double transient = cost.transient_bytes.at(b);
    if (i != last_in_backward() && i != beside_last_in_backward() &&
        transient > largest_other_transient) {
      largest_other_transient = transient;
      largest_other = i;
    }
    terms = add_peak_terms(terms, i, cost, b);
  }
  result.peak.model_state_bytes = model_state_bytes_total;
  result.peak.extra_bytes = extra_bytes;
  const int last = last_in_backward();
  const int beside = beside_last_in_backward();
  const double others_moment = others_moment_bytes(terms);
  const double beside_moment = beside_moment_bytes(terms);
  if (last >= 0 && last_moment_bytes(terms) > std::max(others_moment, beside_moment)) {
    // The peak comes while the last operator in backward runs: only its activations are live.
    const OptionCost cost = option_cost(last, plan.choices.at(last));
    result.peak.activation_bytes = b * cost.persistent_bytes.per_sample;
    result.peak.prefetch_bytes =
        prefetch_window_bytes(std::max(terms.beside_buffer_bytes, terms.last_next_slice_bytes));
    result.peak.transient_bytes = cost.transient_bytes.at(b) + result.peak.prefetch_bytes;
    result.peak.transient_operator = last;
  } else if (beside >= 0 && beside_moment > others_moment) {
    result.peak.activation_bytes = activation_bytes;
    result.peak.prefetch_bytes =
        prefetch_window_bytes(std::max(terms.last_buffer_bytes, terms.largest_buffer_bytes));
    result.peak.transient_bytes = terms.beside_transient_bytes + result.peak.prefetch_bytes;
    result.peak.transient_operator = beside;
  } else {
    result.peak.activation_bytes = activation_bytes;
    result.peak.prefetch_bytes =
        workload_->size() <= 2 ? 0.0 : prefetch_window_bytes(terms.largest_buffer_bytes);
    result.peak.transient_bytes = terms.others_transient_bytes + result.peak.prefetch_bytes;
    result.peak.transient_operator = largest_other;
  }
  result.peak_memory_bytes = result.peak.model_state_bytes + result.peak.extra_bytes +
                             result.peak.activation_bytes + result.peak.transient_bytes;
  result.throughput_samples_per_s =
      result.iteration_time_s > 0
          ? cluster_->ranks * training_->samples_per_rank(b) / result.iteration_time_s
          : 0.0;
  return result;
}

}  // namespace osdp
