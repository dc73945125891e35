#include "model/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

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
  const Operator& op = workload_->op(index);
  if (op.compute_s_per_sample) return nullptr;  // profiled per operator: no kind law
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
  const ComputeLaw* law = kind_law(index, backward);
  const std::optional<double> rate =
      law && law->flops_per_s ? law->flops_per_s : cluster_->gpu.compute_flops_per_s;
  if (!rate && flops > 0) {
    throw InputError("", fmt::format("$.model.operators[{}].compute_s_per_sample", index),
                     "nothing", "compute seconds per sample, or a GPU compute rate in the cluster");
  }
  Linear call{(law ? law->fixed_s : 0.0) * straggling,
              flops > 0 ? flops / *rate * straggling : 0.0};
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
  if (choice.checkpoint != Checkpoint::none && !op.input_activation_bytes_per_sample) return false;
  return mode_fits_cluster(choice.mode, *cluster_);
}

double CostModel::owned_state_bytes(int index, const OperatorChoice& choice) const {
  const double all_states = workload_->op(index).model_state_bytes();
  const double sharded_fraction = static_cast<double>(choice.sharded_slices) / choice.slices;
  return (1.0 - sharded_fraction) * all_states +
         sharded_fraction * (all_states / shard_degree(choice.mode, *cluster_));
}

double CostModel::model_state_bytes(int index, const OperatorChoice& choice) const {
  const Operator& op = workload_->op(index);
  const double sharded_fraction = static_cast<double>(choice.sharded_slices) / choice.slices;
  double sharded_slice_states = resting_state_bytes(choice.mode, *cluster_, op.parameter_bytes,
                                                    op.gradient_bytes, op.optimizer_bytes);
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

double CostModel::sharded_communication_s(Mode mode, double slice_bytes,
                                          Checkpoint checkpoint) const {
  const ModeDescription& description = describe_mode(mode);
  double time_s = 0.0;
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
  if (settings_.kind == CostModelKind::paper || !bandwidth) return 0.0;
  // The update reads and writes every state this rank owns once (memory bound): the shard of
  // a sharded slice (for Z2 not the gathered copy it holds through the step), all of a DP one.
  return 2.0 * owned_state_bytes(index, choice) / *bandwidth * straggler_slowdown();
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
    communication_s += j * sharded_communication_s(choice.mode, slice_bytes, choice.checkpoint);
  }
  cost.communication_s = communication_s;

  Linear slicing;
  const std::optional<double> measured_forward = calibrated_extra_slice_s(index, false);
  const std::optional<double> measured_backward = calibrated_extra_slice_s(index, true);
  if (extended && k > 1 && (measured_forward || measured_backward)) {
    // Measured on this hardware for the operator's kind (a recompute repeats the forward's).
    slicing.fixed = (k - 1) * (forward_calls * measured_forward.value_or(0.0) +
                               measured_backward.value_or(0.0));
  } else if (extended && k > 1) {
    // Each extra slice launches its forward, backward-data and backward-weight kernels again
    // and adds its partial sums into the output (forward) and input gradient (backward):
    // read two operands, write one.
    slicing.fixed = (k - 1) * 3.0 * cluster_->gpu.kernel_launch_s;
    if (cluster_->gpu.memory_bandwidth_Bps) {
      slicing.per_sample =
          (k - 1) * 2.0 * 3.0 * op.output_bytes_per_sample / *cluster_->gpu.memory_bandwidth_Bps;
    }
  }
  slicing.fixed *= m;
  slicing.per_sample *= m;
  cost.slicing_overhead_s = slicing.fixed;

  cost.time_s.fixed =
      cost.compute_s.fixed + communication_s + slicing.fixed + optimizer_step_s(index, choice);
  cost.time_s.per_sample = cost.compute_s.per_sample + slicing.per_sample;
  cost.time_s.floors = cost.compute_s.floors;

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
    result.compute_s += cost.compute_s.at(b);
    result.communication_s += cost.communication_s;
    result.optimizer_step_s += optimizer_step_s(i, choice);
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
