#include "validate/optimizer_step.hpp"

#include <fmt/format.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "validate/counting_allocator.hpp"
#include "validate/parameter_shards.hpp"
#include "validate/step_collectives.hpp"
#include "validate/tensor_storage.hpp"

namespace osdp::validate {
namespace {

// torch::optim's update on `parameters`, the states the slice's.
void adam(OperatorSlice& slice, at::Tensor parameters, const at::Tensor& grad,
          const AdamSettings& a, int step) {
  if (a.kind == AdamSettings::Kind::sgd) {
    // torch::optim::SGD: the first step copies the gradient into the momentum buffer.
    if (step == 1) {
      slice.exp_avg.copy_(grad);
    } else {
      slice.exp_avg.mul_(a.beta1).add_(grad);
    }
    parameters.add_(slice.exp_avg, -a.learning_rate);
    return;
  }
  const double correction1 = 1.0 - std::pow(a.beta1, step);
  const double correction2 = 1.0 - std::pow(a.beta2, step);
  slice.exp_avg.mul_(a.beta1).add_(grad, 1.0 - a.beta1);
  slice.exp_avg_sq.mul_(a.beta2).addcmul_(grad, grad, 1.0 - a.beta2);
  const at::Tensor denominator = (slice.exp_avg_sq.sqrt() / std::sqrt(correction2)).add_(a.epsilon);
  parameters.addcdiv_(slice.exp_avg, denominator, -a.learning_rate / correction1);
}

// The update of a slice's parameters this rank owns; an offloaded slice's runs on the host,
// on a host copy of its shard when the parameters stay on the device (ZeRO-Offload), which
// is copied back after the step.
void update(OperatorSlice& slice, const at::Tensor& grad, const AdamSettings& settings, int step) {
  if (!slice.offloaded) {
    adam(slice, slice.local_parameters(), grad, settings, step);
    return;
  }
  HostArenaScope arena;
  if (slice.parameters_on_host) {
    adam(slice, slice.shard, grad, settings, step);
    return;
  }
  at::Tensor master = host_copy(slice.shard);
  adam(slice, master, grad.device().is_cpu() ? grad : host_copy(grad), settings, step);
  slice.shard.copy_(master);
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_torch_optimizer(std::vector<at::Tensor> leaves,
                                                              const AdamSettings& settings) {
  if (settings.kind == AdamSettings::Kind::adam) {
    return std::make_unique<torch::optim::Adam>(leaves,
                                                torch::optim::AdamOptions(settings.learning_rate)
                                                    .betas({settings.beta1, settings.beta2})
                                                    .eps(settings.epsilon)
                                                    .weight_decay(0));
  }
  return std::make_unique<torch::optim::SGD>(
      leaves, torch::optim::SGDOptions(settings.learning_rate).momentum(settings.beta1));
}

void allocate_optimizer_states(OperatorSlice& slice, AdamSettings::Kind kind) {
  const int64_t local_numel = slice.local_parameters().numel();
  slice.exp_avg =
      slice.offloaded ? host_zeros(local_numel) : at::zeros_like(slice.local_parameters());
  if (kind == AdamSettings::Kind::adam) {
    slice.exp_avg_sq =
        slice.offloaded ? host_zeros(local_numel) : at::zeros_like(slice.local_parameters());
  }
}

void step_optimizer(std::vector<RuntimeUnit>& units, StepCollectives& collectives,
                    const AdamSettings& settings, int step) {
  torch::autograd::AutoGradMode no_grad(false);
  for (RuntimeUnit& unit : units) {
    if (unit.dp_grad.defined()) collectives.wait(unit.dp_reduced, "all-reduce " + unit.name());
    for (OperatorSlice& slice : unit.slices) {
      if (slice.sharded) {
        collectives.wait(slice.reduced, fmt::format("{} {}", reduction_name(slice), unit.name()));
        update(slice, slice.shard_grad, settings, step);
      } else {
        update(slice, unit.dp_grad.narrow(0, slice.dp_offset, slice.numel), settings, step);
      }
    }
  }
  // ZeRO-1: every rank updated its chunk of the whole parameters; share them.
  std::vector<CommHandle> shared;
  for (int i = 0; i < static_cast<int>(units.size()); ++i) {
    for (int s = 0; s < static_cast<int>(units[i].slices.size()); ++s) {
      OperatorSlice& slice = units[i].slices[s];
      if (!slice.sharded || slice.gathers()) continue;
      collectives.record(ScheduleEntry::Action::gather, i, s);
      shared.push_back(collectives.communicator().start(CollectiveKind::all_gather,
                                                        slice.full.detach(), slice.shard_group));
    }
  }
  for (const CommHandle& handle : shared) collectives.wait(handle, "all-gather updated shards");
}

}  // namespace osdp::validate
