#include "validate/gpt_parameters.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace osdp::validate {

NamedTensors initial_gpt_parameters(const GptShape& shape, std::uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  const int64_t h = shape.hidden;
  const int64_t v = shape.vocabulary;
  const int64_t s = shape.sequence_length;
  NamedTensors tensors;
  auto normal = [&](const std::string& name, std::vector<int64_t> sizes) {
    tensors.emplace_back(name, at::normal(0.0, 0.02, sizes, generator, at::kFloat));
  };
  auto constant = [&](const std::string& name, int64_t size, double value) {
    tensors.emplace_back(name, at::full({size}, value, at::kFloat));
  };
  normal("embedding.token", {v, h});
  normal("embedding.position", {s, h});
  for (int layer = 0; layer < shape.layers; ++layer) {
    const std::string a = fmt::format("layer{}.attention.", layer);
    constant(a + "ln.weight", h, 1.0);
    constant(a + "ln.bias", h, 0.0);
    normal(a + "qkv.weight", {3 * h, h});
    constant(a + "qkv.bias", 3 * h, 0.0);
    normal(a + "proj.weight", {h, h});
    constant(a + "proj.bias", h, 0.0);
    const std::string m = fmt::format("layer{}.mlp.", layer);
    constant(m + "ln.weight", h, 1.0);
    constant(m + "ln.bias", h, 0.0);
    normal(m + "fc.weight", {4 * h, h});
    constant(m + "fc.bias", 4 * h, 0.0);
    normal(m + "proj.weight", {h, 4 * h});
    constant(m + "proj.bias", h, 0.0);
  }
  constant("head.ln.weight", h, 1.0);
  constant("head.ln.bias", h, 0.0);
  normal("head.weight", {v, h});
  return tensors;
}

const at::Tensor& find_tensor(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [key, tensor] : tensors) {
    if (key == name) return tensor;
  }
  throw std::out_of_range("no tensor named " + name);
}

TokenBatch TokenBatch::rows(int64_t begin, int64_t count) const {
  return {inputs.narrow(0, begin, count), targets.narrow(0, begin, count)};
}

TokenBatch make_token_batch(const GptShape& shape, int global_batch, std::uint64_t seed, int step) {
  at::Generator generator = at::detail::createCPUGenerator(seed * 1000003ULL + 7919ULL * step + 1);
  const at::Tensor tokens = at::randint(shape.vocabulary, {global_batch, shape.sequence_length + 1},
                                        generator, at::kLong);
  return {tokens.narrow(1, 0, shape.sequence_length).contiguous(),
          tokens.narrow(1, 1, shape.sequence_length).contiguous()};
}

double max_relative_difference(const NamedTensors& a, const NamedTensors& b) {
  if (a.size() != b.size()) throw std::invalid_argument("different parameter sets");
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !a[i].second.sizes().equals(b[i].second.sizes())) {
      throw std::invalid_argument("parameter " + a[i].first + " differs in name or shape");
    }
    const double difference = (a[i].second - b[i].second).norm().item<double>();
    const double scale = std::max(b[i].second.norm().item<double>(), 1e-30);
    worst = std::max(worst, difference / scale);
  }
  return worst;
}

double parity_difference(const NamedTensors& a, const NamedTensors& b, const GptShape& shape) {
  auto without_key_bias = [&](const NamedTensors& tensors) {
    NamedTensors copy;
    for (const auto& [name, tensor] : tensors) {
      at::Tensor value = tensor.detach().clone();
      if (name.size() > 8 && name.ends_with("qkv.bias"))
        value.narrow(0, shape.hidden, shape.hidden).zero_();
      copy.emplace_back(name, value);
    }
    return copy;
  };
  return max_relative_difference(without_key_bias(a), without_key_bias(b));
}

}  // namespace osdp::validate
