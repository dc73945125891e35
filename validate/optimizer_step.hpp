// The optimizer: torch::optim's (the tensor/pipeline runtime and the reference GPT), and the
// sharded runtime's own elementwise Adam or SGD with momentum on the parameters each rank
// updates, with CPU offload (FSDP's CPUOffload, ZeRO-Offload): an offloaded slice's states live
// in host memory and its step runs there.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include "validate/gpt_parameters.hpp"

namespace osdp::validate {

struct OperatorSlice;
struct RuntimeUnit;
class StepCollectives;

// torch::optim's Adam (no weight decay) or SGD with momentum, as `settings` says.
std::unique_ptr<torch::optim::Optimizer> make_torch_optimizer(std::vector<at::Tensor> leaves,
                                                              const AdamSettings& settings);

// Zeroed optimizer states for the slice's parameters this rank updates (its shard, or all of
// them where replicated), in host memory when the slice is offloaded.
void allocate_optimizer_states(OperatorSlice& slice, AdamSettings::Kind kind);

// Optimizer step `step` (counting from 1) of the sharded runtime: waits for each unit's reduced
// gradients and updates its slices, unit by unit (the updates overlap the later units'
// reductions still in flight); then z1's updated chunks are all-gathered into the whole
// parameters.
void step_optimizer(std::vector<RuntimeUnit>& units, StepCollectives& collectives,
                    const AdamSettings& settings, int step);

}  // namespace osdp::validate
