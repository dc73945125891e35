#include "validate/parallel_gpt.hpp"

#include <c10/util/accumulate.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "model/input_error.hpp"
#include "validate/attention_kernels.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/gpt_operators.hpp"
#include "validate/optimizer_step.hpp"
#include "validate/stage_data_parallel.hpp"
#include "validate/stage_transfers.hpp"
#include "validate/tensor_parallel.hpp"
#include "validate/tensor_storage.hpp"
#include "validate/wait_log.hpp"

namespace osdp::validate {

bool tensor_degree_fits(const GptShape& shape, int tensor_degree) {
  return tensor_degree >= 1 && shape.heads % tensor_degree == 0 &&
         shape.vocabulary % tensor_degree == 0 && (4 * shape.hidden) % tensor_degree == 0;
}

std::vector<ChunkLayers> split_layers(const GptShape& shape, int chunks,
                                      const std::vector<int>& layers_per_chunk) {
  std::vector<ChunkLayers> split;
  if (layers_per_chunk.empty()) {
    int first = 0;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const int count = shape.layers / chunks + (chunk < shape.layers % chunks ? 1 : 0);
      split.push_back({first, count});
      first += count;
    }
  } else {
    if (static_cast<int>(layers_per_chunk.size()) != chunks) {
      throw InputError("plan", "$.layers_per_chunk", std::to_string(layers_per_chunk.size()),
                       fmt::format("one layer count per model chunk ({}: pipeline stages x "
                                   "chunks per stage)",
                                   chunks));
    }
    int first = 0;
    for (int count : layers_per_chunk) {
      if (count < 0) {
        throw InputError("plan", "$.layers_per_chunk", std::to_string(count),
                         "layer counts of at least 0");
      }
      split.push_back({first, count});
      first += count;
    }
    if (first != shape.layers) {
      throw InputError(
          "plan", "$.layers_per_chunk", std::to_string(first),
          fmt::format("layer counts that add up to the model's {} layers", shape.layers));
    }
  }
  for (int chunk = 1; chunk + 1 < chunks; ++chunk) {
    if (split[chunk].count == 0) {
      throw InputError("plan", "$.layers_per_chunk", "0",
                       fmt::format("at least one layer in model chunk {} (it holds neither the "
                                   "embedding nor the head)",
                                   chunk));
    }
  }
  return split;
}

namespace {

// A pass through one operator, kept from its forward to its backward: its input as a leaf (the
// gradient the previous operator's backward needs lands in it) and its output.
struct OperatorPass {
  int unit = 0;
  at::Tensor input;   // none for the embedding
  at::Tensor output;  // activations, or the loss
  // Checkpointed: the forward ran without a graph and keeps only its input; the backward
  // computes it again (its tensor-parallel sums and a ZDP unit's gathered parameters too).
  bool recompute = false;
};

}  // namespace

struct ParallelGpt::Impl {
  GptShape shape;
  ParallelLayout layout;
  Communicator& comm;
  ParallelRuntimeOptions options;
  RankCoordinates coordinates;
  int tensor_ranks = 1;
  int stages = 1;
  int stage = 0;
  int chunks_per_stage = 1;               // v
  std::vector<ChunkLayers> chunk_layers;  // of every model chunk, in model order
  std::vector<int> tensor_group;
  WaitLog waits;  // the compute's waits for communication in the step running
  TimedGroup tensor_sums;
  std::vector<int> pipeline_group;  // one rank per stage, in stage order
  // The canonical parameters' names and shapes, in order; this rank's shards of its chunks'.
  std::vector<std::pair<std::string, std::vector<int64_t>>> canonical;
  StageParameters stage_parameters;              // this rank's, grouped by operator
  std::vector<std::vector<int>> units_of_chunk;  // per local chunk (c / p), in model order
  std::unique_ptr<StageDataParallel> data_parallel;
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  Impl(const GptShape& shape_in, const ParallelLayout& layout_in, Communicator& comm_in,
       const NamedTensors& initial, ParallelRuntimeOptions options_in)
      : shape(shape_in), layout(layout_in), comm(comm_in), options(std::move(options_in)) {
    check_fits();
    coordinates = layout.coordinates_of(comm.rank());
    tensor_ranks = layout.degrees().tensor;
    stages = layout.degrees().pipeline;
    stage = coordinates.pipeline;
    chunks_per_stage = options.chunks_per_stage;
    chunk_layers = split_layers(shape, chunks(), options.layers_per_chunk);
    tensor_group = layout.group_of(GroupAxis::tensor, comm.rank()).ranks;
    pipeline_group = layout.group_of(GroupAxis::pipeline, comm.rank()).ranks;
    tensor_sums = {&comm, tensor_group, &waits, group_index(tensor_group, comm.rank())};
    take_local_parameters(initial);
    data_parallel = std::make_unique<StageDataParallel>(
        stage_parameters, comm, layout.group_of(GroupAxis::data, comm.rank()).ranks,
        options.data_parallel_mode, options.zdp_layers, waits);
    const std::vector<at::Tensor> updated = data_parallel->optimizer_parameters();
    optimizer = make_torch_optimizer(updated, options.adam);
  }

  int chunks() const { return stages * chunks_per_stage; }

  // This rank's tensor-parallel shards of its chunks' parameters, grouped by operator.
  void take_local_parameters(const NamedTensors& initial) {
    units_of_chunk.resize(chunks_per_stage);
    for (const auto& [name, tensor] : initial) {
      canonical.emplace_back(name, tensor.sizes().vec());
      const int chunk = chunk_of(name);
      if (chunk % stages != stage) continue;
      at::Tensor leaf =
          tensor_shard_of(tensor, tensor_split_of(name), coordinates.tensor, tensor_ranks)
              .detach()
              .clone()
              .set_requires_grad(true);
      std::vector<StageOperator>& ops = stage_parameters.operators;
      StageOperator op = stage_operator_of(name);
      if (ops.empty() || ops.back().prefix != op.prefix) {
        units_of_chunk[chunk / stages].push_back(static_cast<int>(ops.size()));
        ops.push_back(std::move(op));
      }
      ops.back().leaves.push_back(static_cast<int>(stage_parameters.tensors.size()));
      stage_parameters.sizes.push_back(leaf.sizes().vec());
      stage_parameters.tensors.emplace_back(name, leaf);
    }
  }

  // The layout as an error message names it.
  std::string layout_description() const {
    const ParallelDegrees& degrees = layout.degrees();
    return fmt::format("tp {} x pp {} x dp {}, {}, {} chunk(s) per stage, {} micro-batches",
                       degrees.tensor, degrees.pipeline, degrees.data,
                       pipeline_schedule_name(options.schedule), options.chunks_per_stage,
                       options.micro_batches);
  }

  void check_fits() const {
    const ParallelDegrees& degrees = layout.degrees();
    if (degrees.world() != comm.size()) {
      throw InputError("plan", "$.layout", std::to_string(degrees.world()),
                       fmt::format("tensor x pipeline x data = the {} ranks", comm.size()));
    }
    const int t = degrees.tensor;
    if (!tensor_degree_fits(shape, t)) {
      throw InputError("plan", "$.layout.tensor", std::to_string(t),
                       fmt::format("a tensor-parallel degree that divides the {} heads, the "
                                   "vocabulary of {} and the MLP's {} hidden units",
                                   shape.heads, shape.vocabulary, 4 * shape.hidden));
    }
    if (options.sequence_parallel && shape.sequence_length % t != 0) {
      throw InputError("plan", "$.layout.tensor", std::to_string(t),
                       fmt::format("a tensor-parallel degree that divides the sequence of {} "
                                   "(sequence parallelism splits it over the tensor ranks)",
                                   shape.sequence_length));
    }
    const Mode mode = options.data_parallel_mode;
    if (mode != Mode::dp && mode != Mode::z1 && mode != Mode::z2) {
      throw InputError("plan", "$.layout.data_parallel_mode", std::string(mode_name(mode)),
                       "dp, z1 or z2 (the runtime shards nothing else inside a layout yet)");
    }
    for (int layer : options.zdp_layers) {
      if (layer < 0 || layer >= shape.layers) {
        throw InputError(
            "plan", "$.layout.zdp_layers", std::to_string(layer),
            fmt::format("a layer of the model's {} (0 to {})", shape.layers, shape.layers - 1));
      }
    }
    check_pipeline_fits();
  }

  void check_pipeline_fits() const {
    const int p = layout.degrees().pipeline;
    const int v = options.chunks_per_stage;
    const bool interleaved = options.schedule == PipelineSchedule::interleaved;
    if (v < 1 || (!interleaved && v != 1)) {
      throw InputError(
          "plan", "$.layout.chunks_per_stage", std::to_string(v),
          fmt::format("{} (layout {})",
                      interleaved ? std::string("at least 1")
                                  : fmt::format("1 under {}: more chunks per stage only under the "
                                                "interleaved schedule",
                                                pipeline_schedule_name(options.schedule)),
                      layout_description()));
    }
    if (options.micro_batches < 1 || (interleaved && options.micro_batches % p != 0)) {
      throw InputError(
          "plan", "$.layout.micro_batches", std::to_string(options.micro_batches),
          fmt::format("{} (layout {})",
                      interleaved ? fmt::format("a multiple of the {} pipeline stages: Megatron's "
                                                "interleaved schedule runs them in groups of p",
                                                p)
                                  : std::string("at least 1 micro-batch"),
                      layout_description()));
    }
    if (p * v > shape.layers + 2) {
      throw InputError("plan", "$.layout.pipeline", std::to_string(p * v),
                       fmt::format("at most {} model chunks, pipeline stages x chunks per stage "
                                   "(layers + embedding + head; layout {})",
                                   shape.layers + 2, layout_description()));
    }
  }

  // The model chunk (virtual stage) that holds a canonical parameter.
  int chunk_of(const std::string& name) const {
    if (name.rfind("embedding.", 0) == 0) return 0;
    if (name.rfind("head.", 0) == 0) return chunks() - 1;
    const int layer = std::stoi(name.substr(5, name.find('.') - 5));  // "layer<L>."
    for (int c = 0; c < chunks(); ++c) {
      if (layer >= chunk_layers[c].first && layer < chunk_layers[c].first + chunk_layers[c].count)
        return c;
    }
    return chunks() - 1;
  }
  int stage_of(const std::string& name) const { return chunk_of(name) % stages; }

  const std::vector<StageOperator>& operators() const { return stage_parameters.operators; }
  const at::Tensor& parameter(const std::string& name) const {
    return find_tensor(stage_parameters.tensors, name);
  }

  // Megatron's f: the input passes unchanged in forward; its gradient, a partial sum on each
  // tensor rank, is summed over the group in backward.
  at::Tensor into_tensor_parallel(const at::Tensor& x) {
    if (tensor_ranks == 1) return x;
    return copy_to_tensor_parallel(x, &tensor_sums);
  }

  // A column-parallel linear (QKV, the MLP's first, the head) on the activation x: under
  // sequence parallelism x holds 1/t of the sequence, gathered in forward and again in
  // backward (GatheredLinear); otherwise Megatron's f, then the rank's columns.
  at::Tensor column_linear(const at::Tensor& x, const at::Tensor& weight,
                           const at::Tensor& bias = {}) {
    if (sequence_parallel()) {
      const at::Tensor product = gathered_column_linear(x, weight, &tensor_sums);
      return bias.defined() ? product + bias : product;
    }
    return at::linear(into_tensor_parallel(x), weight, bias);
  }

  at::Tensor sum_over_tensor_parallel(const at::Tensor& partial) {
    if (tensor_ranks == 1) return partial;
    return sum_from_tensor_parallel(partial, &tensor_sums);
  }

  // After a row-parallel layer (and the vocabulary-parallel embedding): the partial sums'
  // total, whole (all-reduce), or under sequence parallelism this rank's part of the sequence
  // (reduce-scatter).
  at::Tensor sum_into_activation(const at::Tensor& partial) {
    if (sequence_parallel()) return scatter_sum_to_sequence_parallel(partial, &tensor_sums);
    return sum_over_tensor_parallel(partial);
  }

  // Megatron-SP: activations between the tensor-parallel regions (LayerNorms, residuals,
  // biases after a reduction, transfers) hold 1/t of the sequence.
  bool sequence_parallel() const { return options.sequence_parallel && tensor_ranks > 1; }
  int64_t sequence_part() const {
    return sequence_parallel() ? shape.sequence_length / tensor_ranks : shape.sequence_length;
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
      embedded =
          sum_into_activation(at::embedding(table, local_ids.clamp(0, vocabulary_share() - 1)) *
                              mine.unsqueeze(-1).to(table.scalar_type()));
    }
    at::Tensor position = parameter("embedding.position");
    if (sequence_parallel()) {
      position = position.narrow(0, tensor_sums.index * sequence_part(), sequence_part());
    }
    return embedded + position.unsqueeze(0);
  }

  at::Tensor attention(const at::Tensor& x, int layer) {
    const std::string a = "layer" + std::to_string(layer) + ".attention.";
    const int64_t heads = shape.heads / tensor_ranks;
    const int64_t d = shape.hidden / shape.heads;
    const at::Tensor qkv =
        column_linear(layer_norm(x, a), parameter(a + "qkv.weight"), parameter(a + "qkv.bias"));
    const int64_t b = qkv.size(0);
    const int64_t s = qkv.size(1);  // the whole sequence (x holds 1/t of it under SP)
    auto split = qkv.split(heads * d, -1);
    auto heads_of = [&](const at::Tensor& t) { return t.view({b, s, heads, d}).transpose(1, 2); };
    // Standard attention (the probabilities kept for backward), whatever the shape's kernel.
    const at::Tensor y = causal_attention(heads_of(split[0]), heads_of(split[1]),
                                          heads_of(split[2]), AttentionKernel::standard);
    const at::Tensor projected = at::linear(y, parameter(a + "proj.weight"));
    return x + sum_into_activation(projected) + parameter(a + "proj.bias");
  }

  at::Tensor mlp(const at::Tensor& x, int layer) {
    const std::string m = "layer" + std::to_string(layer) + ".mlp.";
    // mlp_partial_sum's operations, with its first linear column_linear's.
    const at::Tensor hidden =
        column_linear(layer_norm(x, m), parameter(m + "fc.weight"), parameter(m + "fc.bias"));
    const at::Tensor projected = at::linear(at::gelu(hidden, "tanh"), parameter(m + "proj.weight"));
    return x + sum_into_activation(projected) + parameter(m + "proj.bias");
  }

  // Mean cross-entropy over the tokens, the logits split by vocabulary: each rank's part of the
  // softmax's normaliser and of the target's logit are summed over the group (a shared shift,
  // the largest logit of every rank, keeps the exponentials finite).
  at::Tensor loss(const at::Tensor& x, const at::Tensor& targets) {
    const at::Tensor logits = column_linear(layer_norm(x, "head."), parameter("head.weight"));
    if (tensor_ranks == 1) return next_token_loss(logits, targets);
    const at::Tensor flat = logits.reshape({-1, logits.size(-1)});
    const at::Tensor labels = targets.reshape({-1});
    const int64_t tokens = flat.size(0);
    at::Tensor maxima = at::zeros({tensor_ranks * tokens}, flat.options());
    maxima.narrow(0, coordinates.tensor * tokens, tokens).copy_(std::get<0>(flat.detach().max(-1)));
    waits.timed(WaitCause::tensor_parallel,
                [&] { comm.run(CollectiveKind::all_gather, maxima, tensor_group); });
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

  // Activation checkpointing: a layer's attention and MLP recompute their forward in backward
  // (Megatron's full recompute); the embedding and the head with the loss keep theirs.
  bool checkpointed(const StageOperator& unit) const {
    return options.checkpoint_layers &&
           (unit.kind == StageOperator::Kind::attention || unit.kind == StageOperator::Kind::mlp);
  }
  at::Tensor layer_forward(const StageOperator& unit, const at::Tensor& x) {
    return unit.kind == StageOperator::Kind::attention ? attention(x, unit.layer)
                                                       : mlp(x, unit.layer);
  }

  // One operator's forward on one micro-batch: the embedding from the tokens, a layer's
  // attention or MLP from the activations, the head to the loss.
  at::Tensor operator_forward(const StageOperator& unit, const TokenBatch& batch,
                              const at::Tensor& x) {
    switch (unit.kind) {
      case StageOperator::Kind::embedding:
        return embed(batch.inputs);
      case StageOperator::Kind::attention:
        return attention(x, unit.layer);
      case StageOperator::Kind::mlp:
        return mlp(x, unit.layer);
      case StageOperator::Kind::head:
        return loss(x, batch.targets);
    }
    return x;
  }

  // A chunk's forward on one micro-batch, operator by operator: each operator's input is a leaf
  // of its own, so that its backward ends where its parameters' gradients are complete (z2
  // reduce-scatters them there); the chain rule across the cut is the backward's loop.
  std::vector<OperatorPass> chunk_forward(int chunk, const TokenBatch& batch,
                                          const at::Tensor& received) {
    std::vector<OperatorPass> passes;
    at::Tensor x = received;
    const std::vector<int>& chunk_units = units_of_chunk[chunk / stages];
    for (std::size_t k = 0; k < chunk_units.size(); ++k) {
      const int u = chunk_units[k];
      OperatorPass pass;
      pass.unit = u;
      if (x.defined()) pass.input = x.detach().set_requires_grad(true);
      data_parallel->before_pass(u, k + 1 < chunk_units.size() ? chunk_units[k + 1] : -1);
      pass.recompute = checkpointed(operators()[u]);
      {
        const c10::AutoGradMode graph(/*enabled=*/!pass.recompute);
        pass.output = operator_forward(operators()[u], batch, pass.input);
      }
      data_parallel->after_pass(u);
      x = pass.output;
      passes.push_back(std::move(pass));
    }
    return passes;
  }

  std::string pass_label(const PipelineStep& step) const {
    const char pass = step.pass == Pass::forward ? 'F' : 'B';
    if (chunks_per_stage == 1) return fmt::format("{}{}", pass, step.micro_batch);
    return fmt::format("{}{}:{}", pass, step.micro_batch, step.chunk / stages);
  }

  // The chunk's micro-batches between their forward and their backward.
  using InFlight = std::map<std::pair<int, int>, std::vector<OperatorPass>>;

  void forward(const PipelineStep& step, const TokenBatch& batch, StageTransfers& transfers,
               InFlight& in_flight, ParallelStepMetrics& metrics) {
    const at::Tensor received = step.chunk > 0 ? transfers.receive(step) : at::Tensor();
    const double begin_s = steady_seconds();
    std::vector<OperatorPass> passes = chunk_forward(step.chunk, batch, received);
    metrics.passes.push_back(
        {pass_label(step), begin_s - metrics.start_s, steady_seconds() - begin_s});
    transfers.send(step, passes.back().output);
    in_flight.emplace(std::pair{step.chunk, step.micro_batch}, std::move(passes));
    metrics.most_micro_batches_in_flight =
        std::max(metrics.most_micro_batches_in_flight, static_cast<int>(in_flight.size()));
    metrics.schedule.push_back(pass_label(step));
  }

  void backward(const PipelineStep& step, StageTransfers& transfers, InFlight& in_flight,
                ParallelStepMetrics& metrics) {
    const auto held = in_flight.find({step.chunk, step.micro_batch});
    std::vector<OperatorPass> passes = std::move(held->second);
    in_flight.erase(held);
    // The gradient of the chunk's output: received from the next chunk, or (the last chunk)
    // none: its output is the loss.
    at::Tensor gradient = step.chunk + 1 < chunks() ? transfers.receive(step) : at::Tensor();
    const double begin_s = steady_seconds();
    for (auto pass = passes.rbegin(); pass != passes.rend(); ++pass) {
      data_parallel->before_pass(pass->unit, pass + 1 != passes.rend() ? (pass + 1)->unit : -1);
      data_parallel->begin_backward(pass->unit);
      if (pass->recompute) pass->output = layer_forward(operators()[pass->unit], pass->input);
      if (gradient.defined()) {
        torch::autograd::backward({pass->output}, {gradient});
      } else {
        metrics.loss += pass->output.item<double>() / options.micro_batches;
        (pass->output / options.micro_batches).backward();
      }
      data_parallel->end_backward(pass->unit);
      data_parallel->after_pass(pass->unit);
      gradient = pass->input.defined() ? pass->input.grad() : at::Tensor();
      *pass = {};  // its activations are no longer needed
    }
    metrics.passes.push_back(
        {pass_label(step), begin_s - metrics.start_s, steady_seconds() - begin_s});
    if (step.chunk > 0) transfers.send(step, gradient);
    metrics.schedule.push_back(pass_label(step));
  }

  // The micro-batches' forwards and backwards in the order model/pipeline_schedule gives.
  void run_schedule(const std::vector<TokenBatch>& micro, ParallelStepMetrics& metrics) {
    const int m = static_cast<int>(micro.size());
    StageTransferSetup setup;
    setup.schedule = options.schedule;
    setup.stages = stages;
    setup.chunks_per_stage = chunks_per_stage;
    setup.micro_batches = m;
    setup.stage = stage;
    setup.pipeline_group = pipeline_group;
    setup.message_shape = {micro.front().inputs.size(0), sequence_part(), shape.hidden};
    StageTransfers transfers(comm, setup, waits);
    InFlight in_flight;
    for (const PipelineStep& step :
         stage_order(options.schedule, stages, chunks_per_stage, m, stage)) {
      if (step.pass == Pass::forward) {
        forward(step, micro[step.micro_batch], transfers, in_flight, metrics);
      } else {
        backward(step, transfers, in_flight, metrics);
      }
    }
    transfers.wait_for_sends();
    metrics.most_sends_in_flight = transfers.most_sends_in_flight();
  }

  // Sequence parallelism: the replicated parameters (LayerNorms, biases after a reduction, the
  // position table) saw 1/t of the sequence on each tensor-parallel rank, so their gradients
  // are partial sums: summed over the group once a step, in one buffer (Megatron all-reduces
  // its sequence-parallel parameters' gradients likewise). Of a sharded unit only this rank's
  // shard of them: every tensor-parallel rank of a data-parallel position shards alike.
  void sum_replicated_gradients_over_tensor_parallel() {
    std::vector<at::Tensor> parts;
    const NamedTensors& tensors = stage_parameters.tensors;
    const int64_t ranks = data_parallel->ranks();
    for (StageOperator& op : stage_parameters.operators) {
      const int64_t chunk = op.padded_numel / ranks;
      const int64_t first = data_parallel->data_index() * chunk;
      int64_t offset = 0;
      for (int leaf : op.leaves) {
        const bool replicated =
            tensor_split_of(tensors[leaf].first).kind == TensorSplit::Kind::replicated;
        const int64_t numel = c10::multiply_integers(stage_parameters.sizes[leaf]);
        const int64_t begin = std::max(offset, first);
        const int64_t end = std::min(offset + numel, first + chunk);
        if (replicated && !op.sharded) {
          parts.push_back(tensors[leaf].second.mutable_grad().view({-1}));
        } else if (replicated && begin < end) {
          parts.push_back(op.shard.mutable_grad().narrow(0, begin - first, end - begin));
        }
        offset += numel;
      }
    }
    int64_t total = 0;
    for (const at::Tensor& part : parts) total += part.numel();
    if (total == 0) return;
    at::Tensor buffer = at::empty({total});
    int64_t offset = 0;
    for (const at::Tensor& part : parts) {
      buffer.narrow(0, offset, part.numel()).copy_(part);
      offset += part.numel();
    }
    const at::Tensor summed = tensor_sums.sum(buffer);
    offset = 0;
    for (at::Tensor& part : parts) {
      part.copy_(summed.narrow(0, offset, part.numel()));
      offset += part.numel();
    }
  }

  ParallelStepMetrics train_step(const TokenBatch& batch) {
    const auto start = std::chrono::steady_clock::now();
    const int64_t rows = batch.inputs.size(0);
    const int m = options.micro_batches;
    if (rows % m != 0) {
      throw InputError("plan", "$.micro_batches", std::to_string(m),
                       fmt::format("a count of micro-batches that divides the {} rows", rows));
    }
    waits.clear();
    if (counting_allocator_installed()) reset_peak_memory();
    data_parallel->start_step();
    std::vector<TokenBatch> micro;
    for (int i = 0; i < m; ++i) micro.push_back(batch.rows(i * (rows / m), rows / m));
    ParallelStepMetrics metrics;
    metrics.start_s = steady_seconds() - seconds_since(start);
    run_schedule(micro, metrics);
    data_parallel->end_micro_batches();
    // The replicated parameters' partial sums over the tensor ranks: before the data-parallel
    // reduction where every gradient is whole, after it where some are shards.
    const bool sharded = data_parallel->shards_parameters();
    if (sequence_parallel() && !sharded) sum_replicated_gradients_over_tensor_parallel();
    data_parallel->reduce_gradients();
    if (sequence_parallel() && sharded) sum_replicated_gradients_over_tensor_parallel();
    const double step_begin_s = steady_seconds();
    optimizer->step();
    metrics.optimizer_step = {"optimizer step", step_begin_s - metrics.start_s,
                              steady_seconds() - step_begin_s};
    data_parallel->after_optimizer_step();
    metrics.iteration_time_s = seconds_since(start);
    metrics.communication_wait_s = waits.total_s();
    metrics.pipeline_wait_s = waits.total_s(WaitCause::receive);
    metrics.tensor_wait_s = waits.total_s(WaitCause::tensor_parallel);
    for (const CausedWait& wait : waits.waits()) {
      metrics.waits.push_back({std::string(wait_cause_name(wait.cause)),
                               wait.start_s - metrics.start_s, wait.duration_s});
    }
    if (counting_allocator_installed()) metrics.peak_memory_bytes = memory_counts().peak_bytes;
    return metrics;
  }

  NamedTensors full_parameters() {
    data_parallel->gather_whole_parameters();
    NamedTensors full;
    for (const auto& [name, sizes] : canonical) {
      const int owner = stage_of(name);
      at::Tensor whole = at::zeros(sizes);
      if (owner == stage) {
        const at::Tensor shard = parameter(name).detach();
        const TensorSplit split = tensor_split_of(name);
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
          whole = assemble_tensor_shards(shards, split);
        }
      }
      // The owning stage's value reaches the others (they add zeros: exact).
      if (stages > 1) whole = group_sum(comm, whole, pipeline_group);
      full.emplace_back(name, whole);
    }
    data_parallel->release_whole_parameters();
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
