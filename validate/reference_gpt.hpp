// The single-process reference: the whole GPT in plain libtorch (whole tensors, one autograd
// graph, torch::optim::Adam) trained on the concatenated batch of all ranks. Whatever a plan
// does, its trained parameters must equal these within float tolerance.
#pragma once

#include "validate/gpt_parameters.hpp"

namespace osdp::validate {

struct ReferenceRun {
  NamedTensors parameters;
  std::vector<double> losses;  // per step
};

// `steps` optimizer steps from `initial` on make_token_batch(shape, global_batch, seed, step).
ReferenceRun train_reference_gpt(const GptShape& shape, const NamedTensors& initial,
                                 int global_batch, std::uint64_t data_seed, int steps,
                                 const AdamSettings& adam);

}  // namespace osdp::validate
