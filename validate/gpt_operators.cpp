#include "validate/gpt_operators.hpp"

#include "validate/attention_kernels.hpp"

namespace osdp::validate {

at::Tensor gpt_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return at::layer_norm(x, {x.size(-1)}, weight, bias, 1e-5);
}

at::Tensor mlp_partial_sum(const at::Tensor& u, const at::Tensor& fc_weight,
                           const at::Tensor& fc_bias, const at::Tensor& projection_weight) {
  return at::linear(at::gelu(at::linear(u, fc_weight, fc_bias), "tanh"), projection_weight);
}

at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

at::Tensor operator_prologue(OperatorKind kind, const at::Tensor& x, const RoleParameters& p) {
  if (kind == OperatorKind::embedding) return {};
  return gpt_layer_norm(x, p.at("ln.weight"), p.at("ln.bias"));
}

at::Tensor operator_slice(const GptShape& shape, OperatorKind kind, int slice, int slices,
                          const at::Tensor& u, const at::Tensor& x, const RoleParameters& p) {
  switch (kind) {
    case OperatorKind::embedding:
      return at::embedding(p.at("token"), x) + p.at("position").unsqueeze(0);
    case OperatorKind::attention: {
      const int64_t b = u.size(0);
      const int64_t t = shape.sequence_length;
      const int64_t heads = shape.heads / slices;
      const int64_t d = shape.hidden / shape.heads;
      auto project = [&](const char* name) {
        return at::linear(u, p.at(std::string(name) + ".weight"), p.at(std::string(name) + ".bias"))
            .view({b, t, heads, d})
            .transpose(1, 2);
      };
      // In this order (as the reference computes them): the order in which backward sums
      // their gradients into u is then the same, bit for bit.
      const at::Tensor q = project("q");
      const at::Tensor k = project("k");
      const at::Tensor v = project("v");
      const at::Tensor y = causal_attention(q, k, v, shape.attention);
      return at::linear(y, p.at("proj.weight"));
    }
    case OperatorKind::mlp:
      return mlp_partial_sum(u, p.at("fc.weight"), p.at("fc.bias"), p.at("proj.weight"));
    case OperatorKind::head: {
      const int64_t features = shape.hidden / slices;
      return at::linear(u.narrow(-1, slice * features, features), p.at("weight"));
    }
    case OperatorKind::generic:
      break;
  }
  return {};
}

at::Tensor operator_epilogue(OperatorKind kind, const at::Tensor& x, const RoleParameters& p) {
  if (kind == OperatorKind::attention || kind == OperatorKind::mlp) {
    return x + p.at("proj.bias");
  }
  return {};
}

}  // namespace osdp::validate
