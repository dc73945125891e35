#pragma once
// Megatron-LM's tensor parallelism on the runtime's ranks: how each canonical GPT tensor is
// divided over a tensor-parallel group (column- and row-parallel linears, vocabulary-parallel
// embedding and head), the group's collectives on activations (sums, and sequence parallelism's
// gathers and scatters along the sequence), and the autograd functions that place them in
// forward and backward (Megatron's f and g, and their sequence-parallel variants).
// validate/parallel_gpt builds the layers from these.

#include <torch/torch.h>

#include <string>
#include <vector>

#include "validate/communicator.hpp"
#include "validate/wait_log.hpp"

namespace osdp::validate {

// How a canonical tensor is divided over the tensor-parallel ranks: whole, by rows (output
// features of a column-parallel layer, vocabulary entries) or by columns (input features of a
// row-parallel layer). QKV's rows are three blocks (Q, K, V), each divided by heads.
struct TensorSplit {
  enum class Kind { replicated, rows, columns } kind = Kind::replicated;
  int blocks = 1;
};

// The split of the GPT parameter `name` (gpt_parameters' names).
TensorSplit tensor_split_of(const std::string& name);
// The `rank`-th of `ranks` shards of the canonical tensor `full`.
at::Tensor tensor_shard_of(const at::Tensor& full, const TensorSplit& split, int rank, int ranks);
// The inverse of tensor_shard_of: the canonical tensor from every rank's shard, in rank order.
at::Tensor assemble_tensor_shards(const std::vector<at::Tensor>& shards, const TensorSplit& split);

// The sum over `group` of every rank's `value` (a copy; the ring buffer padded to a multiple of
// the group's size).
at::Tensor group_sum(Communicator& comm, const at::Tensor& value, const std::vector<int>& group);

// A tensor-parallel group's collectives on activations, each a wait in *waits: the compute
// thread waits for every one (they block, as Megatron's do).
struct TimedGroup {
  Communicator* comm = nullptr;
  std::vector<int> ranks;
  WaitLog* waits = nullptr;  // where the compute's waits for the group go
  int index = 0;             // this rank's in `ranks`

  // The sum over the group of every rank's value.
  at::Tensor sum(const at::Tensor& value) const;
  // Sequence parallelism, on b x s x h activations whose sequence is split in t contiguous
  // parts, the i-th rank of the group holding part i: every rank's part joined into the whole
  // sequence (all-gather).
  at::Tensor gather_sequence(const at::Tensor& part) const;
  // The sum over the group of every rank's whole-sequence partial sum, this rank's part of it
  // (reduce-scatter).
  at::Tensor scatter_sequence_sum(const at::Tensor& partial) const;
};

// The autograd functions (`group` must outlive the backward pass):
// Megatron's f: `x` unchanged in forward; its gradient, a partial sum on each rank, summed over
// the group in backward. Returns `x` itself where no gradient will flow.
at::Tensor copy_to_tensor_parallel(const at::Tensor& x, const TimedGroup* group);
// Megatron's g: the sum over the group in forward, the gradient passed through unchanged in
// backward (every rank's partial sum receives the whole output's gradient).
at::Tensor sum_from_tensor_parallel(const at::Tensor& partial, const TimedGroup* group);
// Megatron-SP's g: this rank's part of the sequence from every rank's partial sums
// (reduce-scatter) in forward; in backward the part's gradient from every rank's part
// (all-gather).
at::Tensor scatter_sum_to_sequence_parallel(const at::Tensor& partial, const TimedGroup* group);
// Megatron-SP's f fused with the column-parallel linear after it: x W^T on the whole sequence,
// gathered from every rank's part in forward and again in backward for the weight's gradient
// (only the part is saved); the input's gradient reduce-scattered to the parts.
at::Tensor gathered_column_linear(const at::Tensor& part, const at::Tensor& weight,
                                  const TimedGroup* group);

}  // namespace osdp::validate
