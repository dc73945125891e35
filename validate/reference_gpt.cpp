#include "validate/reference_gpt.hpp"

#include <torch/torch.h>

#include <cmath>

#include "validate/optimizer_step.hpp"

namespace osdp::validate {
namespace {

at::Tensor layer_norm(const at::Tensor& x, const NamedTensors& p, const std::string& prefix) {
  return at::layer_norm(x, {x.size(-1)}, find_tensor(p, prefix + "ln.weight"),
                        find_tensor(p, prefix + "ln.bias"), 1e-5);
}

at::Tensor linear(const at::Tensor& x, const NamedTensors& p, const std::string& weight,
                  const std::string& bias) {
  return at::linear(x, find_tensor(p, weight), bias.empty() ? at::Tensor() : find_tensor(p, bias));
}

at::Tensor forward_loss(const GptShape& shape, const NamedTensors& p, const TokenBatch& batch) {
  const int64_t b = batch.inputs.size(0);
  const int64_t s = shape.sequence_length;
  const int64_t h = shape.hidden;
  const int64_t heads = shape.heads;
  const int64_t d = h / heads;
  at::Tensor x = at::embedding(find_tensor(p, "embedding.token"), batch.inputs) +
                 find_tensor(p, "embedding.position").unsqueeze(0);
  const at::Tensor mask = at::ones({s, s}, at::kBool).triu(1);
  for (int layer = 0; layer < shape.layers; ++layer) {
    const std::string a = "layer" + std::to_string(layer) + ".attention.";
    const at::Tensor qkv = linear(layer_norm(x, p, a), p, a + "qkv.weight", a + "qkv.bias");
    auto split = qkv.split(h, -1);
    auto heads_of = [&](const at::Tensor& t) { return t.view({b, s, heads, d}).transpose(1, 2); };
    at::Tensor scores = at::matmul(heads_of(split[0]), heads_of(split[1]).transpose(-2, -1)) /
                        std::sqrt(static_cast<double>(d));
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    const at::Tensor y =
        at::matmul(at::softmax(scores, -1), heads_of(split[2])).transpose(1, 2).reshape({b, s, h});
    x = x + linear(y, p, a + "proj.weight", a + "proj.bias");
    const std::string m = "layer" + std::to_string(layer) + ".mlp.";
    const at::Tensor hidden =
        at::gelu(linear(layer_norm(x, p, m), p, m + "fc.weight", m + "fc.bias"), "tanh");
    x = x + linear(hidden, p, m + "proj.weight", m + "proj.bias");
  }
  const at::Tensor logits = linear(layer_norm(x, p, "head."), p, "head.weight", "");
  return at::cross_entropy_loss(logits.reshape({-1, shape.vocabulary}),
                                batch.targets.reshape({-1}));
}

}  // namespace

ReferenceRun train_reference_gpt(const GptShape& shape, const NamedTensors& initial,
                                 int global_batch, std::uint64_t data_seed, int steps,
                                 const AdamSettings& adam) {
  ReferenceRun run;
  std::vector<torch::Tensor> leaves;
  for (const auto& [name, tensor] : initial) {
    at::Tensor leaf = tensor.detach().clone().set_requires_grad(true);
    run.parameters.emplace_back(name, leaf);
    leaves.push_back(leaf);
  }
  const std::unique_ptr<torch::optim::Optimizer> optimizer = make_torch_optimizer(leaves, adam);
  for (int step = 0; step < steps; ++step) {
    optimizer->zero_grad();
    const at::Tensor loss =
        forward_loss(shape, run.parameters, make_token_batch(shape, global_batch, data_seed, step));
    loss.backward();
    optimizer->step();
    run.losses.push_back(loss.item<double>());
  }
  for (auto& [name, tensor] : run.parameters) tensor = tensor.detach();
  return run;
}

}  // namespace osdp::validate
