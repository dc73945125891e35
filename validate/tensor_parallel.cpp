#include "validate/tensor_parallel.hpp"

#include <chrono>
#include <cstdint>

namespace osdp::validate {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor sequence_all_gather(Communicator& comm, const at::Tensor& part,
                               const std::vector<int>& group, int index) {
  const int64_t t = static_cast<int64_t>(group.size());
  const int64_t b = part.size(0);
  const int64_t piece = part.size(1);
  const int64_t h = part.size(2);
  // The ring buffer holds the parts one after another (chunk i is rank i's).
  at::Tensor buffer = at::empty({t * part.numel()}, part.options());
  buffer.narrow(0, index * part.numel(), part.numel()).copy_(part.detach().reshape({-1}));
  comm.run(CollectiveKind::all_gather, buffer, group);
  return buffer.view({t, b, piece, h}).permute({1, 0, 2, 3}).reshape({b, t * piece, h});
}

at::Tensor sequence_reduce_scatter(Communicator& comm, const at::Tensor& partial,
                                   const std::vector<int>& group, int index) {
  const int64_t t = static_cast<int64_t>(group.size());
  const int64_t b = partial.size(0);
  const int64_t piece = partial.size(1) / t;
  const int64_t h = partial.size(2);
  // A copy in the ring's order (never a view of the partial, which autograd may hold).
  at::Tensor buffer = at::empty({t, b, piece, h}, partial.options());
  buffer.copy_(partial.detach().reshape({b, t, piece, h}).permute({1, 0, 2, 3}));
  at::Tensor flat = buffer.view({-1});
  comm.run(CollectiveKind::reduce_scatter, flat, group);
  return flat.narrow(0, index * b * piece * h, b * piece * h).view({b, piece, h}).clone();
}

// The group travels through autograd's saved data as an integer (it outlives the pass).
const TimedGroup* timed_group_of(AutogradContext* context) {
  return reinterpret_cast<const TimedGroup*>(context->saved_data["group"].toInt());
}
void keep_group(AutogradContext* context, const TimedGroup* group) {
  context->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(group));
}

struct ScatterSequenceSum : torch::autograd::Function<ScatterSequenceSum> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& partial,
                            const TimedGroup* group) {
    keep_group(context, group);
    return group->scatter_sequence_sum(partial);
  }
  static variable_list backward(AutogradContext* context, variable_list gradients) {
    // Each rank's partial sum fed the whole sequence: its gradient is every rank's part's.
    return {timed_group_of(context)->gather_sequence(gradients[0]), at::Tensor()};
  }
};

// Megatron's LinearWithGradAccumulationAndAsyncCommunication: b x s x h / t saved instead of
// b x s x h, one more all-gather per layer and pass.
struct GatheredLinear : torch::autograd::Function<GatheredLinear> {
  static at::Tensor forward(AutogradContext* context, const at::Tensor& part,
                            const at::Tensor& weight, const TimedGroup* group) {
    keep_group(context, group);
    context->save_for_backward({part, weight});
    return at::linear(group->gather_sequence(part), weight);
  }
  static variable_list backward(AutogradContext* context, variable_list gradients) {
    const TimedGroup* group = timed_group_of(context);
    const auto saved = context->get_saved_variables();
    const at::Tensor& part = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor whole = group->gather_sequence(part);
    const at::Tensor weight_gradient =
        gradients[0].reshape({-1, weight.size(0)}).t().mm(whole.reshape({-1, weight.size(1)}));
    // A partial sum over the whole sequence on each rank, reduce-scattered to the parts.
    const at::Tensor input_gradient = gradients[0].matmul(weight);
    return {group->scatter_sequence_sum(input_gradient), weight_gradient, at::Tensor()};
  }
};

struct SumInForward : torch::autograd::Function<SumInForward> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& partial, const TimedGroup* group) {
    return group->sum(partial);
  }
  static variable_list backward(AutogradContext*, variable_list gradients) {
    return {gradients[0], at::Tensor()};
  }
};

}  // namespace

TensorSplit tensor_split_of(const std::string& name) {
  using Kind = TensorSplit::Kind;
  if (name.ends_with("qkv.weight") || name.ends_with("qkv.bias")) return {Kind::rows, 3};
  if (name.ends_with("fc.weight") || name.ends_with("fc.bias")) return {Kind::rows, 1};
  if (name == "embedding.token" || name == "head.weight") return {Kind::rows, 1};
  if (name.ends_with("proj.weight")) return {Kind::columns, 1};
  return {};
}

at::Tensor tensor_shard_of(const at::Tensor& full, const TensorSplit& split, int rank, int ranks) {
  switch (split.kind) {
    case TensorSplit::Kind::replicated:
      return full;
    case TensorSplit::Kind::columns:
      return full.chunk(ranks, 1)[rank];
    case TensorSplit::Kind::rows: {
      std::vector<at::Tensor> parts;
      for (const at::Tensor& block : full.chunk(split.blocks, 0)) {
        parts.push_back(block.chunk(ranks, 0)[rank]);
      }
      return at::cat(parts, 0);
    }
  }
  return full;
}

at::Tensor assemble_tensor_shards(const std::vector<at::Tensor>& shards, const TensorSplit& split) {
  switch (split.kind) {
    case TensorSplit::Kind::replicated:
      return shards.front();
    case TensorSplit::Kind::columns:
      return at::cat(shards, 1);
    case TensorSplit::Kind::rows: {
      std::vector<at::Tensor> blocks;
      for (int block = 0; block < split.blocks; ++block) {
        for (const at::Tensor& shard : shards)
          blocks.push_back(shard.chunk(split.blocks, 0)[block]);
      }
      return at::cat(blocks, 0);
    }
  }
  return shards.front();
}

at::Tensor group_sum(Communicator& comm, const at::Tensor& value, const std::vector<int>& group) {
  const int64_t n = value.numel();
  const int64_t ranks = static_cast<int64_t>(group.size());
  at::Tensor buffer = at::zeros({(n + ranks - 1) / ranks * ranks}, value.options());
  buffer.narrow(0, 0, n).copy_(value.detach().reshape({-1}));
  comm.run(CollectiveKind::all_reduce, buffer, group);
  return buffer.narrow(0, 0, n).view(value.sizes()).clone();
}

at::Tensor TimedGroup::sum(const at::Tensor& value) const {
  return waits->timed(WaitCause::tensor_parallel, [&] { return group_sum(*comm, value, ranks); });
}

at::Tensor TimedGroup::gather_sequence(const at::Tensor& part) const {
  return waits->timed(WaitCause::tensor_parallel,
                      [&] { return sequence_all_gather(*comm, part, ranks, index); });
}

at::Tensor TimedGroup::scatter_sequence_sum(const at::Tensor& partial) const {
  return waits->timed(WaitCause::tensor_parallel,
                      [&] { return sequence_reduce_scatter(*comm, partial, ranks, index); });
}

at::Tensor copy_to_tensor_parallel(const at::Tensor& x, const TimedGroup* group) {
  // A checkpointed forward runs without a graph: no gradient to sum.
  if (!x.requires_grad() || !at::GradMode::is_enabled()) return x;
  at::Tensor copy = x.clone();
  copy.register_hook([group](at::Tensor gradient) { return group->sum(gradient); });
  return copy;
}

at::Tensor sum_from_tensor_parallel(const at::Tensor& partial, const TimedGroup* group) {
  return SumInForward::apply(partial, group);
}

at::Tensor scatter_sum_to_sequence_parallel(const at::Tensor& partial, const TimedGroup* group) {
  return ScatterSequenceSum::apply(partial, group);
}

at::Tensor gathered_column_linear(const at::Tensor& part, const at::Tensor& weight,
                                  const TimedGroup* group) {
  return GatheredLinear::apply(part, weight, group);
}

}  // namespace osdp::validate
