#include "validate/parallel_gpt.hpp"

#include <fmt/format.h>
#include <torch/torch.h>

#include <chrono>
#include <map>

#include "model/input_error.hpp"
#include "validate/attention_kernels.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/gpt_operators.hpp"
#include "validate/optimizer_step.hpp"

namespace osdp::validate {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// How a canonical tensor is divided over the tensor-parallel ranks: whole, by rows (output
// features of a column-parallel layer, vocabulary entries) or by columns (input features of a
// row-parallel layer). QKV's rows are three blocks (Q, K, V), each divided by heads.
struct TensorSplit {
  enum class Kind { replicated, rows, columns } kind = Kind::replicated;
  int blocks = 1;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TensorSplit split_of(const std::string& name) {
  using Kind = TensorSplit::Kind;
  if (ends_with(name, "qkv.weight") || ends_with(name, "qkv.bias")) return {Kind::rows, 3};
  if (ends_with(name, "fc.weight") || ends_with(name, "fc.bias")) return {Kind::rows, 1};
  if (name == "embedding.token" || name == "head.weight") return {Kind::rows, 1};
  if (ends_with(name, "proj.weight")) return {Kind::columns, 1};
  return {};
}

at::Tensor shard_of(const at::Tensor& full, const TensorSplit& split, int rank, int ranks) {
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

// The inverse of shard_of: the canonical tensor from every rank's shard, in rank order.
at::Tensor assemble(const std::vector<at::Tensor>& shards, const TensorSplit& split) {
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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The sum over `group` of every rank's `value` (a copy; the ring buffer padded to a multiple of
// the group's size).
at::Tensor group_sum(Communicator& comm, const at::Tensor& value, const std::vector<int>& group) {
  const int64_t n = value.numel();
  const int64_t ranks = static_cast<int64_t>(group.size());
  at::Tensor buffer = at::zeros({(n + ranks - 1) / ranks * ranks}, value.options());
  buffer.narrow(0, 0, n).copy_(value.detach().reshape({-1}));
  comm.run(CollectiveKind::all_reduce, buffer, group);
  return buffer.narrow(0, 0, n).view(value.sizes()).clone();
}

// A group's sums, timed: the compute thread waits for each one.
struct TimedGroup {
  Communicator* comm = nullptr;
  std::vector<int> ranks;
  double* wait_s = nullptr;

  at::Tensor sum(const at::Tensor& value) const {
    const auto start = std::chrono::steady_clock::now();
    at::Tensor summed = group_sum(*comm, value, ranks);
    *wait_s += seconds_since(start);
    return summed;
  }
};

// Megatron's g: the sum over the tensor-parallel group in forward, the gradient passed through
// unchanged in backward (every rank's partial sum receives the whole output's gradient).
struct SumInForward : torch::autograd::Function<SumInForward> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& partial, const TimedGroup* group) {
    return group->sum(partial);
  }
  static variable_list backward(AutogradContext*, variable_list gradients) {
    return {gradients[0], at::Tensor()};
  }
};

}  // namespace

std::vector<StageLayers> split_layers(const GptShape& shape, int stages,
                                      const std::vector<int>& layers_per_stage) {
  std::vector<StageLayers> split;
  if (layers_per_stage.empty()) {
    int first = 0;
    for (int stage = 0; stage < stages; ++stage) {
      const int count = shape.layers / stages + (stage < shape.layers % stages ? 1 : 0);
      split.push_back({first, count});
      first += count;
    }
  } else {
    if (static_cast<int>(layers_per_stage.size()) != stages) {
      throw InputError("plan", "$.layers_per_stage", std::to_string(layers_per_stage.size()),
                       fmt::format("one layer count per pipeline stage ({})", stages));
    }
    int first = 0;
    for (int count : layers_per_stage) {
      if (count < 0) {
        throw InputError("plan", "$.layers_per_stage", std::to_string(count),
                         "layer counts of at least 0");
      }
      split.push_back({first, count});
      first += count;
    }
    if (first != shape.layers) {
      throw InputError(
          "plan", "$.layers_per_stage", std::to_string(first),
          fmt::format("layer counts that add up to the model's {} layers", shape.layers));
    }
  }
  for (int stage = 1; stage + 1 < stages; ++stage) {
    if (split[stage].count == 0) {
      throw InputError("plan", "$.layers_per_stage", "0",
                       fmt::format("at least one layer on stage {} (it holds neither the "
                                   "embedding nor the head)",
                                   stage));
    }
  }
  return split;
}

struct ParallelGpt::Impl {
  GptShape shape;
  ParallelLayout layout;
  Communicator& comm;
  ParallelRuntimeOptions options;
  RankCoordinates coordinates;
  int tensor_ranks = 1;
  int stages = 1;
  int stage = 0;
  std::vector<StageLayers> stage_layers;
  std::vector<int> tensor_group;
  std::vector<int> data_group;
  double communication_wait_s = 0;  // of the step running
  TimedGroup tensor_sums;
  std::vector<int> pipeline_group;  // one rank per stage, in stage order
  // The canonical parameters' names and shapes, in order; this rank's shards of its stage's.
  std::vector<std::pair<std::string, std::vector<int64_t>>> canonical;
  NamedTensors local;
  at::Tensor gradient_bucket;   // data parallel: every local gradient, flat
  at::Tensor parameter_buffer;  // z1: every local parameter, flat (the leaves are views of it)
  at::Tensor optimizer_shard;   // z1: this rank's chunk of it, what the optimizer updates
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  Impl(const GptShape& shape_in, const ParallelLayout& layout_in, Communicator& comm_in,
       const NamedTensors& initial, ParallelRuntimeOptions options_in)
      : shape(shape_in), layout(layout_in), comm(comm_in), options(std::move(options_in)) {
    check_fits();
    coordinates = layout.coordinates_of(comm.rank());
    tensor_ranks = layout.degrees().tensor;
    stages = layout.degrees().pipeline;
    stage = coordinates.pipeline;
    stage_layers = split_layers(shape, stages, options.layers_per_stage);
    tensor_group = layout.group_of(GroupAxis::tensor, comm.rank()).ranks;
    data_group = layout.group_of(GroupAxis::data, comm.rank()).ranks;
    pipeline_group = layout.group_of(GroupAxis::pipeline, comm.rank()).ranks;
    tensor_sums = {&comm, tensor_group, &communication_wait_s};
    std::vector<at::Tensor> leaves;
    for (const auto& [name, tensor] : initial) {
      canonical.emplace_back(name, tensor.sizes().vec());
      if (stage_of(name) != stage) continue;
      at::Tensor leaf = shard_of(tensor, split_of(name), coordinates.tensor, tensor_ranks)
                            .detach()
                            .clone()
                            .set_requires_grad(true);
      local.emplace_back(name, leaf);
      leaves.push_back(leaf);
    }
    if (sharded_optimizer()) {
      // The parameters live in one flat buffer (the bucket's layout), and the optimizer sees
      // only this rank's chunk of it: its update lands in the parameters, and the all-gather
      // of the chunks fills the buffer in place (no copy of the parameters).
      parameter_buffer = flat_parameters();
      int64_t offset = 0;
      for (auto& [name, tensor] : local) {
        tensor = parameter_buffer.narrow(0, offset, tensor.numel())
                     .view(tensor.sizes())
                     .set_requires_grad(true);
        offset += tensor.numel();
      }
      const int64_t chunk = parameter_buffer.numel() / static_cast<int64_t>(data_group.size());
      optimizer_shard =
          parameter_buffer.narrow(0, data_index() * chunk, chunk).set_requires_grad(true);
      optimizer = make_torch_optimizer({optimizer_shard}, options.adam);
    } else {
      optimizer = make_torch_optimizer(leaves, options.adam);
    }
  }

  void check_fits() const {
    const ParallelDegrees& degrees = layout.degrees();
    if (degrees.world() != comm.size()) {
      throw InputError("plan", "$.layout", std::to_string(degrees.world()),
                       fmt::format("tensor x pipeline x data = the {} ranks", comm.size()));
    }
    const int t = degrees.tensor;
    if (shape.heads % t != 0 || shape.vocabulary % t != 0 || (4 * shape.hidden) % t != 0) {
      throw InputError("plan", "$.layout.tensor", std::to_string(t),
                       fmt::format("a tensor-parallel degree that divides the {} heads, the "
                                   "vocabulary of {} and the MLP's {} hidden units",
                                   shape.heads, shape.vocabulary, 4 * shape.hidden));
    }
    if (options.data_parallel_mode != Mode::dp && options.data_parallel_mode != Mode::z1) {
      throw InputError("plan", "$.layout.data_parallel_mode",
                       std::string(mode_name(options.data_parallel_mode)),
                       "dp or z1 (the runtime shards nothing else inside a layout yet)");
    }
    if (options.schedule == PipelineSchedule::interleaved) {
      throw InputError("plan", "$.layout.schedule", "interleaved",
                       "gpipe or 1f1b (the runtime has no interleaved stages)");
    }
    if (degrees.pipeline > shape.layers + 2) {
      throw InputError(
          "plan", "$.layout.pipeline", std::to_string(degrees.pipeline),
          fmt::format("at most {} stages (layers + embedding + head)", shape.layers + 2));
    }
  }

  // The stage that holds a canonical parameter.
  int stage_of(const std::string& name) const {
    if (name.rfind("embedding.", 0) == 0) return 0;
    if (name.rfind("head.", 0) == 0) return stages - 1;
    const int layer = std::stoi(name.substr(5, name.find('.') - 5));  // "layer<L>."
    for (int s = 0; s < stages; ++s) {
      if (layer >= stage_layers[s].first && layer < stage_layers[s].first + stage_layers[s].count)
        return s;
    }
    return stages - 1;
  }

  const at::Tensor& parameter(const std::string& name) const { return find_tensor(local, name); }

  // Megatron's f: the input passes unchanged in forward; its gradient, a partial sum on each
  // tensor rank, is summed over the group in backward.
  at::Tensor into_tensor_parallel(const at::Tensor& x) {
    if (tensor_ranks == 1) return x;
    at::Tensor copy = x.clone();
    copy.register_hook([this](at::Tensor gradient) { return tensor_sums.sum(gradient); });
    return copy;
  }

  at::Tensor sum_over_tensor_parallel(const at::Tensor& partial) {
    if (tensor_ranks == 1) return partial;
    return SumInForward::apply(partial, &tensor_sums);
  }

  at::Tensor layer_norm(const at::Tensor& x, const std::string& prefix) const {
    return gpt_layer_norm(x, parameter(prefix + "ln.weight"), parameter(prefix + "ln.bias"));
  }

  // This rank's vocabulary entries [first, first + count).
  int64_t vocabulary_share() const { return shape.vocabulary / tensor_ranks; }
  int64_t vocabulary_first() const { return coordinates.tensor * vocabulary_share(); }

  at::Tensor embed(const at::Tensor& tokens) {
    const at::Tensor& table = parameter("embedding.token");
    at::Tensor embedded;
    if (tensor_ranks == 1) {
      embedded = at::embedding(table, tokens);
    } else {
      const at::Tensor local_ids = tokens - vocabulary_first();
      const at::Tensor mine = (local_ids >= 0) & (local_ids < vocabulary_share());
      embedded = sum_over_tensor_parallel(
          at::embedding(table, local_ids.clamp(0, vocabulary_share() - 1)) *
          mine.unsqueeze(-1).to(table.scalar_type()));
    }
    return embedded + parameter("embedding.position").unsqueeze(0);
  }

  at::Tensor attention(const at::Tensor& x, int layer) {
    const std::string a = "layer" + std::to_string(layer) + ".attention.";
    const int64_t b = x.size(0);
    const int64_t s = x.size(1);
    const int64_t heads = shape.heads / tensor_ranks;
    const int64_t d = shape.hidden / shape.heads;
    const at::Tensor qkv = at::linear(into_tensor_parallel(layer_norm(x, a)),
                                      parameter(a + "qkv.weight"), parameter(a + "qkv.bias"));
    auto split = qkv.split(heads * d, -1);
    auto heads_of = [&](const at::Tensor& t) { return t.view({b, s, heads, d}).transpose(1, 2); };
    // Standard attention (the probabilities kept for backward), whatever the shape's kernel.
    const at::Tensor y = causal_attention(heads_of(split[0]), heads_of(split[1]),
                                          heads_of(split[2]), AttentionKernel::standard);
    const at::Tensor projected = at::linear(y, parameter(a + "proj.weight"));
    return x + sum_over_tensor_parallel(projected) + parameter(a + "proj.bias");
  }

  at::Tensor mlp(const at::Tensor& x, int layer) {
    const std::string m = "layer" + std::to_string(layer) + ".mlp.";
    const at::Tensor projected =
        mlp_partial_sum(into_tensor_parallel(layer_norm(x, m)), parameter(m + "fc.weight"),
                        parameter(m + "fc.bias"), parameter(m + "proj.weight"));
    return x + sum_over_tensor_parallel(projected) + parameter(m + "proj.bias");
  }

  // Mean cross-entropy over the tokens, the logits split by vocabulary: each rank's part of the
  // softmax's normaliser and of the target's logit are summed over the group (a shared shift,
  // the largest logit of every rank, keeps the exponentials finite).
  at::Tensor loss(const at::Tensor& x, const at::Tensor& targets) {
    const at::Tensor logits =
        at::linear(into_tensor_parallel(layer_norm(x, "head.")), parameter("head.weight"));
    if (tensor_ranks == 1) return next_token_loss(logits, targets);
    const at::Tensor flat = logits.reshape({-1, logits.size(-1)});
    const at::Tensor labels = targets.reshape({-1});
    const int64_t tokens = flat.size(0);
    at::Tensor maxima = at::zeros({tensor_ranks * tokens}, flat.options());
    maxima.narrow(0, coordinates.tensor * tokens, tokens).copy_(std::get<0>(flat.detach().max(-1)));
    const auto gather_start = std::chrono::steady_clock::now();
    comm.run(CollectiveKind::all_gather, maxima, tensor_group);
    communication_wait_s += seconds_since(gather_start);
    const at::Tensor shift = std::get<0>(maxima.view({tensor_ranks, tokens}).max(0));
    const at::Tensor shifted = flat - shift.unsqueeze(1);
    const at::Tensor normaliser = sum_over_tensor_parallel(shifted.exp().sum(-1));
    const at::Tensor local_labels = labels - vocabulary_first();
    const at::Tensor mine = (local_labels >= 0) & (local_labels < vocabulary_share());
    const at::Tensor target_logit = sum_over_tensor_parallel(
        shifted.gather(1, local_labels.clamp(0, vocabulary_share() - 1).unsqueeze(1)).squeeze(1) *
        mine.to(flat.scalar_type()));
    return (normaliser.log() - target_logit).mean();
  }

  // The stage's part of the model on one micro-batch: from tokens (first stage) or the previous
  // stage's activations, to activations or (last stage) the loss.
  at::Tensor stage_forward(const TokenBatch& batch, const at::Tensor& input) {
    at::Tensor x = stage == 0 ? embed(batch.inputs) : input;
    const StageLayers& layers = stage_layers[stage];
    for (int layer = layers.first; layer < layers.first + layers.count; ++layer) {
      x = mlp(attention(x, layer), layer);
    }
    return stage == stages - 1 ? loss(x, batch.targets) : x;
  }

  struct InFlight {
    at::Tensor input;   // received activations (a leaf whose gradient goes back); stage 0: none
    at::Tensor output;  // activations sent on, or the loss
  };

  int previous_rank() const { return pipeline_group[stage - 1]; }
  int next_rank() const { return pipeline_group[stage + 1]; }

  void forward(int micro, const TokenBatch& batch, std::map<int, InFlight>& in_flight,
               std::vector<CommHandle>& sends, ParallelStepMetrics& metrics) {
    InFlight held;
    if (stage > 0) {
      held.input = at::empty({batch.inputs.size(0), shape.sequence_length, shape.hidden});
      const auto start = std::chrono::steady_clock::now();
      comm.receive(held.input, previous_rank());
      communication_wait_s += seconds_since(start);
      held.input.set_requires_grad(true);
    }
    held.output = stage_forward(batch, held.input);
    if (stage < stages - 1)
      sends.push_back(comm.send(held.output.detach().contiguous(), next_rank()));
    in_flight.emplace(micro, std::move(held));
    metrics.most_micro_batches_in_flight =
        std::max(metrics.most_micro_batches_in_flight, static_cast<int>(in_flight.size()));
    metrics.schedule.push_back(fmt::format("F{}", micro));
  }

  void backward(int micro, std::map<int, InFlight>& in_flight, std::vector<CommHandle>& sends,
                ParallelStepMetrics& metrics) {
    InFlight held = std::move(in_flight.at(micro));
    in_flight.erase(micro);
    if (stage == stages - 1) {
      metrics.loss += held.output.item<double>() / options.micro_batches;
      (held.output / options.micro_batches).backward();
    } else {
      at::Tensor gradient = at::empty_like(held.output);
      const auto start = std::chrono::steady_clock::now();
      comm.receive(gradient, next_rank());
      communication_wait_s += seconds_since(start);
      torch::autograd::backward({held.output}, {gradient});
    }
    if (stage > 0) sends.push_back(comm.send(held.input.grad().contiguous(), previous_rank()));
    metrics.schedule.push_back(fmt::format("B{}", micro));
  }

  // The micro-batches' forwards and backwards in the schedule's order.
  void run_schedule(const std::vector<TokenBatch>& micro, ParallelStepMetrics& metrics) {
    const int m = static_cast<int>(micro.size());
    std::map<int, InFlight> in_flight;
    std::vector<CommHandle> sends;
    if (options.schedule == PipelineSchedule::gpipe) {
      for (int i = 0; i < m; ++i) forward(i, micro[i], in_flight, sends, metrics);
      for (int i = 0; i < m; ++i) backward(i, in_flight, sends, metrics);
    } else {
      const int warm_up = std::min(stages - stage - 1, m);
      int next_forward = 0;
      int next_backward = 0;
      for (; next_forward < warm_up; ++next_forward) {
        forward(next_forward, micro[next_forward], in_flight, sends, metrics);
      }
      while (next_forward < m) {
        forward(next_forward, micro[next_forward], in_flight, sends, metrics);
        ++next_forward;
        backward(next_backward++, in_flight, sends, metrics);
      }
      while (next_backward < m) backward(next_backward++, in_flight, sends, metrics);
    }
    const auto start = std::chrono::steady_clock::now();
    for (const CommHandle& send : sends) send.wait();
    communication_wait_s += seconds_since(start);
  }

  // DDP's reduction: every local gradient summed over the data-parallel group in one bucket,
  // then averaged.
  // Every local gradient, zeroed for the step: with data parallelism, views of one flat bucket
  // (DDP's, larger than the model) that the backward accumulates into and the reduction sums
  // in place, so that no gradient is copied.
  void fresh_gradients() {
    const int ranks = static_cast<int>(data_group.size());
    if (ranks == 1) {
      for (auto& [name, tensor] : local) {
        if (tensor.grad().defined()) {
          tensor.mutable_grad().zero_();
        } else {
          tensor.mutable_grad() = at::zeros_like(tensor);
        }
      }
      return;
    }
    // The bucket is zeroed in place from the second step on: a new one beside the old (which
    // the gradients still view) would hold the gradients twice.
    if (gradient_bucket.defined()) {
      gradient_bucket.zero_();
      return;
    }
    gradient_bucket = at::zeros({padded_parameter_count()});
    int64_t offset = 0;
    for (auto& [name, tensor] : local) {
      tensor.mutable_grad() =
          gradient_bucket.narrow(0, offset, tensor.numel()).view(tensor.sizes());
      offset += tensor.numel();
    }
  }

  bool sharded_optimizer() const {
    return options.data_parallel_mode == Mode::z1 && data_group.size() > 1;
  }
  int data_index() const { return group_index(data_group, comm.rank()); }
  int64_t padded_parameter_count() const {
    const int64_t ranks = static_cast<int64_t>(data_group.size());
    int64_t total = 0;
    for (const auto& [name, tensor] : local) total += tensor.numel();
    return (total + ranks - 1) / ranks * ranks;
  }
  // The local parameters flat, in the bucket's order, padded as it is.
  at::Tensor flat_parameters() const {
    at::Tensor flat = at::zeros({padded_parameter_count()});
    int64_t offset = 0;
    for (const auto& [name, tensor] : local) {
      flat.narrow(0, offset, tensor.numel()).copy_(tensor.detach().reshape({-1}));
      offset += tensor.numel();
    }
    return flat;
  }

  void average_gradients_over_data_parallel() {
    const int ranks = static_cast<int>(data_group.size());
    if (ranks == 1) return;
    const auto start = std::chrono::steady_clock::now();
    if (sharded_optimizer()) {
      // Only this rank's chunk is summed: the optimizer updates that chunk alone.
      comm.run(CollectiveKind::reduce_scatter, gradient_bucket, data_group);
      communication_wait_s += seconds_since(start);
      const int64_t chunk = gradient_bucket.numel() / ranks;
      optimizer_shard.mutable_grad() =
          gradient_bucket.narrow(0, data_index() * chunk, chunk).div_(ranks);
      return;
    }
    comm.run(CollectiveKind::all_reduce, gradient_bucket, data_group);
    communication_wait_s += seconds_since(start);
    gradient_bucket.div_(ranks);
  }

  // z1: every rank's updated chunk gathered into the parameters, in place.
  void gather_updated_parameters() {
    const auto start = std::chrono::steady_clock::now();
    comm.run(CollectiveKind::all_gather, parameter_buffer, data_group);
    communication_wait_s += seconds_since(start);
  }

  ParallelStepMetrics train_step(const TokenBatch& batch) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t rows = batch.inputs.size(0);
    const int m = options.micro_batches;
    if (m < 1 || rows % m != 0) {
      throw InputError("plan", "$.micro_batches", std::to_string(m),
                       fmt::format("a count of micro-batches that divides the {} rows", rows));
    }
    communication_wait_s = 0;
    if (counting_allocator_installed()) reset_peak_memory();
    fresh_gradients();
    std::vector<TokenBatch> micro;
    for (int i = 0; i < m; ++i) micro.push_back(batch.rows(i * (rows / m), rows / m));
    ParallelStepMetrics metrics;
    run_schedule(micro, metrics);
    average_gradients_over_data_parallel();
    optimizer->step();
    if (sharded_optimizer()) gather_updated_parameters();
    metrics.iteration_time_s = seconds_since(start);
    metrics.communication_wait_s = communication_wait_s;
    if (counting_allocator_installed()) metrics.peak_memory_bytes = memory_counts().peak_bytes;
    return metrics;
  }

  NamedTensors full_parameters() {
    NamedTensors full;
    for (const auto& [name, sizes] : canonical) {
      const int owner = stage_of(name);
      at::Tensor whole = at::zeros(sizes);
      if (owner == stage) {
        const at::Tensor shard = parameter(name).detach();
        const TensorSplit split = split_of(name);
        if (tensor_ranks == 1 || split.kind == TensorSplit::Kind::replicated) {
          whole = shard.clone();
        } else {
          const int64_t n = shard.numel();
          at::Tensor gathered = at::zeros({tensor_ranks * n});
          gathered.narrow(0, coordinates.tensor * n, n).copy_(shard.reshape({-1}));
          comm.run(CollectiveKind::all_gather, gathered, tensor_group);
          std::vector<at::Tensor> shards;
          for (int t = 0; t < tensor_ranks; ++t) {
            shards.push_back(gathered.narrow(0, t * n, n).view(shard.sizes()));
          }
          whole = assemble(shards, split);
        }
      }
      // The owning stage's value reaches the others (they add zeros: exact).
      if (stages > 1) whole = group_sum(comm, whole, pipeline_group);
      full.emplace_back(name, whole);
    }
    return full;
  }
};

ParallelGpt::ParallelGpt(const GptShape& shape, const ParallelLayout& layout,
                         Communicator& communicator, const NamedTensors& initial,
                         ParallelRuntimeOptions options)
    : impl_(std::make_unique<Impl>(shape, layout, communicator, initial, std::move(options))) {}

ParallelGpt::~ParallelGpt() = default;

ParallelStepMetrics ParallelGpt::train_step(const TokenBatch& data_parallel_batch) {
  return impl_->train_step(data_parallel_batch);
}

NamedTensors ParallelGpt::full_parameters() { return impl_->full_parameters(); }

}  // namespace osdp::validate
