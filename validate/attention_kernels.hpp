// Causal self-attention as the runtime computes it, in the two memory behaviours osdp models
// (model/workload.hpp's AttentionKernel):
//   standard  softmax(QK^T / sqrt(d)) V with autograd saving the s x s probabilities for backward
//   flash     the same result, saving only Q, K, V, the output and a log-sum-exp per row; the
//             backward recomputes the scores, tile by tile of query rows (FlashAttention's memory
//             behaviour in plain libtorch: no fused kernel, so no speed claim, only what is kept)
#pragma once

#include <ATen/ATen.h>

#include "model/workload.hpp"

namespace osdp::validate {

// q, k, v: (batch, heads, tokens, head_dim). Returns (batch, tokens, heads x head_dim),
// contiguous: the output projection's input.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            AttentionKernel kernel);

}  // namespace osdp::validate
