// The GPT's operator maths on the parameters one rank computes with, shared by the runtimes:
// the sharded runtime computes an operator slice by slice (a slice is a part of the operator
// split along its reduction dimension: attention heads, MLP hidden units, LM-head input
// features), the tensor-parallel runtime computes its rank's heads and hidden units; both are
// compared with the reference GPT, which computes the whole model apart (reference_gpt.cpp).
//
// An operator of the sharded runtime is prologue -> slices -> epilogue: the prologue (the
// LayerNorm) is computed once, each slice gives a partial sum of the output, and slice 0 adds
// the epilogue (residual and output bias) once.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>

#include "model/workload.hpp"
#include "validate/gpt_shape.hpp"

namespace osdp::validate {

// A member operator's parameters by role ("ln.weight", "q.weight", "fc.weight", "token", ...).
using RoleParameters = std::map<std::string, at::Tensor>;

// The GPT's LayerNorm (epsilon 1e-5) over the last dimension.
at::Tensor gpt_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The MLP on some of its hidden units, without the output bias: GELU(u W_fc^T + b_fc) W_proj^T,
// the rows of W_fc and b_fc and the columns of W_proj those units'. With every unit it is the
// MLP's output less the bias; with a part of them, a partial sum of it.
at::Tensor mlp_partial_sum(const at::Tensor& u, const at::Tensor& fc_weight,
                           const at::Tensor& fc_bias, const at::Tensor& projection_weight);

// Mean cross-entropy of the next-token logits [B, s, V] against the targets [B, s].
at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& targets);

// What an operator of `kind` computes once before its slices: the LayerNorm of its input x
// (undefined for the embedding, whose slice reads the token ids).
at::Tensor operator_prologue(OperatorKind kind, const at::Tensor& x, const RoleParameters& p);

// Slice `slice` of `slices` of an operator of `kind`, from the prologue's output u (the
// embedding: from the token ids x): a partial sum of the operator's output.
at::Tensor operator_slice(const GptShape& shape, OperatorKind kind, int slice, int slices,
                          const at::Tensor& u, const at::Tensor& x, const RoleParameters& p);

// What slice 0 adds once: the residual x and the output bias (undefined for the embedding and
// the head, which have neither).
at::Tensor operator_epilogue(OperatorKind kind, const at::Tensor& x, const RoleParameters& p);

}  // namespace osdp::validate
