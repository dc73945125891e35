#include "validate/sharded_gpt.hpp"

#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>

#include "model/input_error.hpp"
#include "validate/gather_schedule.hpp"
#include "validate/gpt_operators.hpp"
#include "validate/gradient_reduction.hpp"
#include "validate/optimizer_step.hpp"
#include "validate/parameter_shards.hpp"
#include "validate/tensor_storage.hpp"

namespace osdp::validate {
namespace {

using Clock = std::chrono::steady_clock;

// What a unit's forward keeps for its backward.
struct SavedActivations {
  at::Tensor input;   // unit input (a leaf), or token ids for the embedding
  at::Tensor y0;      // slice-0 output: residual + bias + first partial sum
  at::Tensor u;       // prologue output (LayerNorm), k > 1
  at::Tensor u_leaf;  // what slices 1.. compute from, k > 1
  std::vector<at::Tensor> partials;
  at::Tensor logits_leaf, loss;  // the unit ending in the head only
};

// The plan's units on this rank, after the checks that make the plan runnable.
std::vector<RuntimeUnit> runnable_units(const GptShape& shape, const Plan& plan,
                                        const NamedTensors& initial, const RuntimeOptions& options,
                                        const ShardPlacement& placement,
                                        const at::TensorOptions& float_options) {
  if (options.accumulation_steps < 1) {
    throw InputError("options", "accumulation_steps", std::to_string(options.accumulation_steps),
                     "at least 1 micro-batch per optimizer step");
  }
  check_runnable(shape, plan, placement.world, options.gpus_per_node);
  return build_units(shape, plan, initial, placement, float_options);
}

}  // namespace

struct ShardedGpt::Impl {
  GptShape shape;
  Communicator& comm;
  std::unique_ptr<RankDevice> owned_device;  // the CPU when the caller gave no device
  RankDevice& device;
  at::TensorOptions float_options;
  RuntimeOptions options;
  int micro_batches = 1;  // per optimizer step
  StepCollectives collectives;
  std::vector<RuntimeUnit> units;
  std::vector<SavedActivations> saved;  // per unit, between its forward and backward
  GradientReduction reductions;
  GatherSchedule gathers;
  int adam_step = 0;

  Impl(const GptShape& s, const Plan& plan, Communicator& c, const NamedTensors& initial,
       RuntimeOptions o, RankDevice* given_device)
      : shape(s),
        comm(c),
        owned_device(given_device ? nullptr : make_rank_device(DeviceKind::cpu, 0)),
        device(given_device ? *given_device : *owned_device),
        float_options(at::TensorOptions().dtype(at::kFloat).device(device.device())),
        options(o),
        micro_batches(o.accumulation_steps),
        collectives(c, device),
        units(runnable_units(shape, plan, initial, options,
                             {c.size(), c.rank(), options.gpus_per_node}, float_options)),
        saved(units.size()),
        reductions(units, collectives, c.size(), micro_batches,
                   options.dp_all_reduce_after_backward, float_options),
        gathers(units, collectives, options.prefetch_depth, options.backward_prefetch,
                micro_batches) {
    for (RuntimeUnit& unit : units) {
      for (OperatorSlice& slice : unit.slices) allocate_optimizer_states(slice, options.adam.kind);
    }
  }

  // Runs unit i's forward (phase forward or recompute) of micro-batch `micro` from its saved
  // input; with grad, keeps what backward needs. Returns the output (detached).
  at::Tensor run_forward(int i, Phase phase, bool with_grad, const at::Tensor& targets, int micro) {
    RuntimeUnit& unit = units[i];
    SavedActivations& kept = saved[i];
    const int k = unit.choice.slices;
    torch::autograd::AutoGradMode grad_mode(with_grad);
    const at::Tensor& x = kept.input;
    gathers.acquire(i, 0, phase, micro);
    at::Tensor y0;
    at::Tensor u;
    at::Tensor u_leaf;
    {
      // A unit's members in turn (an operator split into slices is a unit of one).
      at::Tensor h = x;
      const int members = static_cast<int>(unit.members.size());
      const std::vector<RoleParameters> views = member_parameters(unit.slices[0], members);
      for (int m = 0; m < members; ++m) {
        const OperatorKind kind = unit.members[m].kind;
        const RoleParameters& p = views[m];
        u = operator_prologue(kind, h, p);
        u_leaf = (k > 1 && with_grad) ? u.detach().requires_grad_() : u;
        at::Tensor y = operator_slice(shape, kind, 0, k, u, h, p);
        if (at::Tensor e = operator_epilogue(kind, h, p); e.defined()) y = y + e;
        h = y;
      }
      y0 = h;
    }
    gathers.release(i, 0, phase, micro);
    at::Tensor output = y0.detach();
    std::vector<at::Tensor> partials;
    for (int s = 1; s < k; ++s) {
      gathers.acquire(i, s, phase, micro);
      at::Tensor partial = operator_slice(shape, unit.first_kind(), s, k, u_leaf, x,
                                          member_parameters(unit.slices[s], 1)[0]);
      gathers.release(i, s, phase, micro);
      // Partial sums are added into one output; autograd keeps each partial only as the root of
      // its slice's backward, which reads its shape, not its data (a slice ends in a Linear,
      // whose backward saves inputs only), so the partial's memory is freed here.
      if (s == 1) {
        output = output + partial.detach();
      } else {
        output.add_(partial.detach());
      }
      if (with_grad) {
        at::Tensor root = partial;
        free_storage(root);
        partials.push_back(std::move(partial));
      }
    }
    if (with_grad && k > 1) {
      at::Tensor root = y0;
      free_storage(root);  // its sum is in `output`; an Add's backward saves nothing
    }
    if (with_grad) {
      kept.y0 = y0;
      kept.u = k > 1 ? u : at::Tensor();
      kept.u_leaf = k > 1 ? u_leaf : at::Tensor();
      kept.partials = std::move(partials);
    }
    if (unit.last_kind() == OperatorKind::head) {
      kept.logits_leaf = with_grad ? output.detach().requires_grad_() : output;
      kept.loss = next_token_loss(kept.logits_leaf, targets);
    }
    return output;
  }

  // Backward of unit i in micro-batch `micro` given the gradient of its output; returns the
  // input's gradient.
  at::Tensor run_backward(int i, at::Tensor grad_output, const at::Tensor& targets, int micro) {
    RuntimeUnit& unit = units[i];
    SavedActivations& kept = saved[i];
    const int k = unit.choice.slices;
    if (is_checkpointed(unit.choice)) run_forward(i, Phase::recompute, true, targets, micro);
    if (unit.last_kind() == OperatorKind::head) {
      // m micro-batches of b are one batch of m x b: each micro-batch's mean loss counts 1/m.
      const at::Tensor loss = micro_batches > 1 ? kept.loss / micro_batches : kept.loss;
      grad_output = torch::autograd::grad({loss}, {kept.logits_leaf})[0];
      kept.loss = kept.loss.detach();
      kept.logits_leaf = at::Tensor();
    }
    at::Tensor grad_u;
    for (int s = k - 1; s >= 1; --s) {
      gathers.acquire(i, s, Phase::backward, micro);
      auto grads = torch::autograd::grad({kept.partials[s - 1]}, {kept.u_leaf, unit.slices[s].full},
                                         {grad_output}, false, false, true);
      kept.partials[s - 1] = at::Tensor();
      gathers.release(i, s, Phase::backward, micro);
      grad_u = grad_u.defined() ? grad_u + grads[0] : grads[0];
      reductions.reduce_slice(i, s, grads[1], micro);
    }
    gathers.acquire(i, 0, Phase::backward, micro);
    torch::autograd::variable_list outputs{kept.y0};
    torch::autograd::variable_list grad_outputs{grad_output};
    if (k > 1) {
      outputs.push_back(kept.u);
      grad_outputs.push_back(grad_u);
    }
    torch::autograd::variable_list inputs{unit.slices[0].full};
    const bool input_grad = unit.first_kind() != OperatorKind::embedding;
    if (input_grad) inputs.push_back(kept.input);
    auto grads = torch::autograd::grad(outputs, inputs, grad_outputs, false, false, true);
    kept.y0 = kept.u = kept.u_leaf = kept.input = at::Tensor();
    kept.partials.clear();
    gathers.release(i, 0, Phase::backward, micro);
    reductions.reduce_slice(i, 0, grads[0], micro);
    reductions.reduce_unit_dp_gradients(i, micro);
    return input_grad ? grads[1] : at::Tensor();
  }

  // Clocks are read with the device synchronised, so that a phase's time is its work's.
  Clock::time_point synchronized_now() const {
    device.synchronize();
    return Clock::now();
  }

  StepMetrics train_step(const TokenBatch& host_batch) {
    const int64_t rows = host_batch.inputs.size(0);
    if (rows % micro_batches != 0) {
      throw InputError("batch", "rows", std::to_string(rows),
                       fmt::format("a multiple of the {} micro-batches per step", micro_batches));
    }
    const int64_t micro_rows = rows / micro_batches;
    const TokenBatch batch{host_batch.inputs.to(device.device()),
                           host_batch.targets.to(device.device())};
    const auto start = synchronized_now();
    device.reset_peak_memory();
    collectives.start_step();
    gathers.start_step();
    const int n = static_cast<int>(units.size());
    StepMetrics metrics;
    metrics.start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
    metrics.operators.resize(static_cast<std::size_t>(n) * micro_batches);
    // The step's high-water mark is the highest of its phases' (each phase restarts the mark
    // at the bytes live then, so nothing allocated in the step escapes).
    std::int64_t step_peak_bytes = device.memory_counts().peak_bytes;
    // Compute time of a phase: its wall time less the waits for collectives inside it.
    auto timed = [&](double& start_s, double& duration_s, std::int64_t& end_live_bytes,
                     std::int64_t& peak_bytes, auto&& body) {
      step_peak_bytes = std::max(step_peak_bytes, device.memory_counts().peak_bytes);
      device.reset_peak_memory();
      const auto begin = synchronized_now();
      const double exposed_before = collectives.exposed_s();
      start_s = std::chrono::duration<double>(begin - start).count();
      body();
      duration_s = std::chrono::duration<double>(synchronized_now() - begin).count() -
                   (collectives.exposed_s() - exposed_before);
      const MemoryCounts counts = device.memory_counts();
      end_live_bytes = counts.live_bytes;
      peak_bytes = counts.peak_bytes;
    };
    // Each micro-batch: the whole forward and backward on its rows, its activations freed
    // before the next one starts.
    double loss_sum = 0;
    for (int micro = 0; micro < micro_batches; ++micro) {
      const TokenBatch rows_of_micro =
          micro_batches == 1 ? batch : batch.rows(micro * micro_rows, micro_rows);
      StepMetrics::OperatorTiming* timing = metrics.operators.data() + micro * n;
      at::Tensor x = rows_of_micro.inputs;
      for (int i = 0; i < n; ++i) {
        const bool checkpointed = is_checkpointed(units[i].choice);
        saved[i].input = i == 0 ? x : x.detach().requires_grad_(!checkpointed);
        timed(timing[i].forward_start_s, timing[i].forward_s, timing[i].forward_end_live_bytes,
              timing[i].forward_peak_bytes, [&] {
                x = run_forward(i, Phase::forward, !checkpointed, rows_of_micro.targets, micro);
              });
      }
      loss_sum += saved.back().loss.item<double>();
      at::Tensor grad;
      for (int i = n - 1; i >= 0; --i) {
        if (is_checkpointed(units[i].choice) && i > 0) saved[i].input.requires_grad_(true);
        timed(timing[i].backward_start_s, timing[i].backward_s, timing[i].backward_end_live_bytes,
              timing[i].backward_peak_bytes,
              [&] { grad = run_backward(i, grad, rows_of_micro.targets, micro); });
      }
      reductions.reduce_dp_bucket(micro);
    }
    metrics.loss = loss_sum / micro_batches;
    const auto optimizer_start = synchronized_now();
    const double exposed_before_step = collectives.exposed_s();
    gathers.check_step_consumed();
    step_optimizer(units, collectives, options.adam, ++adam_step);
    const auto end = synchronized_now();
    metrics.optimizer_step_s = std::chrono::duration<double>(end - optimizer_start).count() -
                               (collectives.exposed_s() - exposed_before_step);
    metrics.iteration_time_s = std::chrono::duration<double>(end - start).count();
    metrics.exposed_communication_s = collectives.exposed_s();
    for (const CollectiveWait& wait : collectives.waits()) {
      metrics.waits.push_back({wait.start_s - metrics.start_s, wait.duration_s, wait.collective});
    }
    metrics.peak_memory_bytes = std::max(step_peak_bytes, device.memory_counts().peak_bytes);
    metrics.schedule = collectives.take_schedule();
    return metrics;
  }
};

ShardedGpt::ShardedGpt(const GptShape& shape, const Plan& plan, Communicator& communicator,
                       const NamedTensors& initial, RuntimeOptions options)
    : impl_(std::make_unique<Impl>(shape, plan, communicator, initial, options, nullptr)) {}

ShardedGpt::ShardedGpt(const GptShape& shape, const Plan& plan, Communicator& communicator,
                       const NamedTensors& initial, RuntimeOptions options, RankDevice& device)
    : impl_(std::make_unique<Impl>(shape, plan, communicator, initial, options, &device)) {}

ShardedGpt::~ShardedGpt() = default;

StepMetrics ShardedGpt::train_step(const TokenBatch& local_batch) {
  return impl_->train_step(local_batch);
}

NamedTensors ShardedGpt::full_parameters() {
  return gather_full_parameters(impl_->shape, impl_->units, impl_->comm, impl_->float_options);
}

std::int64_t ShardedGpt::persistent_bytes() const {
  return validate::persistent_bytes(impl_->units);
}

}  // namespace osdp::validate
