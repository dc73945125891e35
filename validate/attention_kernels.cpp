#include "validate/attention_kernels.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace osdp::validate {
namespace {

at::Tensor masked_scores(const at::Tensor& q, const at::Tensor& k) {
  const int64_t t = q.size(2);
  // Divided (not multiplied by the reciprocal), as the reference GPT computes it bit for bit.
  at::Tensor scores =
      at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(3)));
  const at::Tensor mask = at::ones({t, t}, q.options().dtype(at::kBool)).triu(1);
  return scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
}

// (batch, heads, tokens, d) -> (batch, tokens, heads x d), contiguous.
at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)});
}

// Query rows per tile: a tile's scores are rows x tokens, never the whole s x s (FlashAttention
// tiles the keys too; tiling the queries is enough to keep no s x s tensor).
constexpr int64_t tile_rows = 16;

// Scores of query rows [r0, r0 + n) against every key, causally masked.
at::Tensor tile_scores(const at::Tensor& q_tile, const at::Tensor& k, int64_t r0) {
  const int64_t n = q_tile.size(2);
  const int64_t t = k.size(2);
  at::Tensor scores =
      at::matmul(q_tile, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q_tile.size(3)));
  const at::Tensor rows = at::arange(r0, r0 + n, q_tile.options().dtype(at::kLong)).unsqueeze(1);
  const at::Tensor cols = at::arange(0, t, q_tile.options().dtype(at::kLong)).unsqueeze(0);
  return scores.masked_fill(cols > rows, -std::numeric_limits<float>::infinity());
}

// The attention whose backward recomputes P = exp(S - lse) from Q and K, tile by tile.
struct RecomputedAttention : torch::autograd::Function<RecomputedAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v) {
    const int64_t t = q.size(2);
    std::vector<at::Tensor> outs, lses;
    for (int64_t r0 = 0; r0 < t; r0 += tile_rows) {
      const int64_t n = std::min(tile_rows, t - r0);
      const at::Tensor scores = tile_scores(q.narrow(2, r0, n), k, r0);
      const at::Tensor lse = at::logsumexp(scores, -1, true);
      outs.push_back(at::matmul(at::exp(scores - lse), v));
      lses.push_back(lse);
    }
    const at::Tensor y = merge_heads(at::cat(outs, 2));
    const at::Tensor lse = at::cat(lses, 2);
    ctx->save_for_backward({q, k, v, y, lse});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &y = saved[3], &lse = saved[4];
    const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    auto split = [&](const at::Tensor& x) { return x.view({b, t, heads, d}).transpose(1, 2); };
    const at::Tensor dout = split(grads[0].contiguous());
    const at::Tensor out = split(y);
    at::Tensor dk = at::zeros_like(k);
    at::Tensor dv = at::zeros_like(v);
    std::vector<at::Tensor> dqs;
    for (int64_t r0 = 0; r0 < t; r0 += tile_rows) {
      const int64_t n = std::min(tile_rows, t - r0);
      const at::Tensor q_tile = q.narrow(2, r0, n);
      const at::Tensor dout_tile = dout.narrow(2, r0, n);
      const at::Tensor p = at::exp(tile_scores(q_tile, k, r0) - lse.narrow(2, r0, n));
      dv += at::matmul(p.transpose(-2, -1), dout_tile);
      const at::Tensor row = (dout_tile * out.narrow(2, r0, n)).sum(-1, true);
      const at::Tensor ds = p * (at::matmul(dout_tile, v.transpose(-2, -1)) - row);
      dqs.push_back(at::matmul(ds, k) * scale);
      dk += at::matmul(ds.transpose(-2, -1), q_tile) * scale;
    }
    return {at::cat(dqs, 2), dk, dv};
  }
};

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            AttentionKernel kernel) {
  if (kernel == AttentionKernel::flash) return RecomputedAttention::apply(q, k, v);
  return merge_heads(at::matmul(at::softmax(masked_scores(q, k), -1), v));
}

}  // namespace osdp::validate
