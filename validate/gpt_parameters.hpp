// The GPT's parameters in their canonical (minGPT) layout, deterministic initial values, the
// training data and the optimizer settings: what the sharded runtime and the single-process
// reference share, so that their trained parameters can be compared.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "validate/gpt_shape.hpp"

namespace osdp::validate {

// Name -> tensor in a fixed order:
//   embedding.token [V,h], embedding.position [s,h]
//   layer{i}.attention.{ln.weight, ln.bias [h], qkv.weight [3h,h], qkv.bias [3h],
//                       proj.weight [h,h], proj.bias [h]}
//   layer{i}.mlp.{ln.weight, ln.bias [h], fc.weight [4h,h], fc.bias [4h],
//                 proj.weight [h,4h], proj.bias [h]}
//   head.{ln.weight, ln.bias [h], weight [V,h]}
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// minGPT initialisation: weights and tables N(0, 0.02), biases 0, LayerNorm weights 1.
NamedTensors initial_gpt_parameters(const GptShape& shape, std::uint64_t seed);

const at::Tensor& find_tensor(const NamedTensors& tensors, const std::string& name);

// Next-token data: `inputs` [B,s] and `targets` [B,s] (the inputs shifted by one), int64.
struct TokenBatch {
  at::Tensor inputs;
  at::Tensor targets;
  TokenBatch rows(int64_t begin, int64_t count) const;
};
// The global batch of optimizer step `step`; rank r trains on rows [r*b, (r+1)*b).
TokenBatch make_token_batch(const GptShape& shape, int global_batch, std::uint64_t seed, int step);

// The optimizer as torch::optim computes it: Adam (no weight decay, no amsgrad) or SGD with
// momentum (what model/ calls sgd: one momentum buffer). Adam is invariant to the gradients'
// scale, SGD is not: parity under both checks the averaging of gradients too.
struct AdamSettings {
  enum class Kind { adam, sgd } kind = Kind::adam;
  double learning_rate = 1e-3;
  double beta1 = 0.9;  // sgd: the momentum
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// Largest over tensors of |a - b| / |b| (Frobenius norms); throws if names or shapes differ.
double max_relative_difference(const NamedTensors& a, const NamedTensors& b);

// The same for training parity, leaving out the attention key biases: their exact gradient is
// zero (softmax is invariant to adding q.b_k to every score of a row), so what they receive is
// rounding noise that Adam normalises to steps of the learning rate's size, different for any
// two summation orders.
double parity_difference(const NamedTensors& a, const NamedTensors& b, const GptShape& shape);

}  // namespace osdp::validate
