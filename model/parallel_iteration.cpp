#include "model/parallel_iteration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>

#include "model/input_error.hpp"
#include "model/pass_stream.hpp"

namespace osdp {

std::vector<int> even_layer_split(int layers, int chunks) {
  std::vector<int> split(chunks, layers / chunks);
  int extra = layers % chunks;
  // Middle chunks first: the first holds the embedding, the last the head and loss.
  for (int c = 1; c < chunks && extra > 0; ++c, --extra) ++split[c];
  for (int c = 0; extra > 0; ++c, --extra) ++split[c];
  return split;
}

namespace {

// Whether the run recomputes the operator's forward before its backward: its kind is
// checkpointed and it can keep just its input.
bool recomputes(const ParallelRun& run, const Operator& op) {
  return op.input_activation_bytes_per_sample &&
         std::find(run.checkpointed_kinds.begin(), run.checkpointed_kinds.end(), op.kind) !=
             run.checkpointed_kinds.end();
}

// `timing` of a ring over `group`, slowed to the bandwidth its edges get inside its first node
// while every group of its kind runs its ring at once (they share a PCIe tree's uplinks).
// A group that is not one of the layout's (the tied embedding's pair) keeps `timing`.
AlphaBeta sharing_node_links(const Topology& topology, const ParallelLayout& layout,
                             const RankGroup& group, int nodes, AlphaBeta timing) {
  const int gpus_per_node = topology.node.gpus;
  const int node = group.ranks.front() / gpus_per_node;
  std::vector<std::vector<int>> on_node;
  std::optional<std::size_t> which;
  for (const RankGroup& other :
       layout.groups(group.kind, node * gpus_per_node, (node + 1) * gpus_per_node)) {
    std::vector<int> local;
    for (int rank : other.ranks) {
      if (rank / gpus_per_node == node) local.push_back(rank % gpus_per_node);
    }
    if (local.empty()) continue;
    if (other.ranks == group.ranks) which = on_node.size();
    on_node.push_back(std::move(local));
  }
  if (!which) return timing;
  const double shared_Bps = shared_ring_bandwidth_Bps(topology, on_node, *which, nodes <= 1);
  if (!std::isfinite(shared_Bps)) return timing;
  // Inside one node the routes are the whole ring: their narrowest share is its bandwidth (not
  // the bottleneck of a ring over every GPU of the tree). Across nodes the NICs may be narrower.
  timing.beta_s_per_byte =
      nodes <= 1 ? 1.0 / shared_Bps : std::max(timing.beta_s_per_byte, 1.0 / shared_Bps);
  return timing;
}

// Ring timing of a layout group as it falls on the cluster's nodes, beside the other groups of
// its kind.
AlphaBeta timing_of(const Cluster& cluster, const ParallelLayout& layout, const RankGroup& group) {
  if (!cluster.topology) return cluster.group_timing(group.size()).all_reduce.alpha_beta;
  const int gpus_per_node = cluster.topology->node.gpus;
  const int nodes = group.nodes_spanned(gpus_per_node);
  return sharing_node_links(
      *cluster.topology, layout, group, nodes,
      group_ring_timing(*cluster.topology, group.most_ranks_on_one_node(gpus_per_node), nodes));
}

double ring_collective_s(CollectiveKind kind, double bytes, const RankGroup& group,
                         const AlphaBeta& timing) {
  return ring_time_s(kind, bytes, group.size(), timing);
}

}  // namespace

double expected_largest_normal(int count) {
  if (count <= 1) return 0.0;
  // E[max] = integral of x * count * phi(x) * Phi(x)^(count - 1) dx; the trapezoid rule over
  // [-8, 8] is exact to far below what the factor needs.
  const double pi = std::acos(-1.0);
  const int steps = 4000;
  const double low = -8.0;
  const double high = 8.0;
  const double dx = (high - low) / steps;
  double sum = 0;
  for (int i = 0; i <= steps; ++i) {
    const double x = low + i * dx;
    const double density = std::exp(-0.5 * x * x) / std::sqrt(2 * pi);
    const double below = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double term = x * count * density * std::pow(below, count - 1);
    sum += (i == 0 || i == steps) ? 0.5 * term : term;
  }
  return sum * dx;
}

double replicas_straggling(const Cluster& cluster, int tensor, int pipeline, int data) {
  if (!cluster.host_cores || cluster.host_cores->step_straggling <= 1.0) return 1.0;
  const int ranks_on_node = cluster.gpus_per_node;
  if (ranks_on_node <= cluster.host_cores->cores) return 1.0;
  const int replicas = std::min(data, std::max(1, ranks_on_node / std::max(1, tensor * pipeline)));
  if (replicas < 2) return 1.0;
  return 1.0 + (cluster.host_cores->step_straggling - 1.0) * expected_largest_normal(replicas) /
                   expected_largest_normal(ranks_on_node);
}

double desynchronised_compute_rate(const Cluster& cluster, int tensor, int pipeline,
                                   double compute_s, double sums_s) {
  if (!cluster.host_cores || pipeline != 1 || tensor <= 1 || compute_s <= 0 || sums_s <= 0) {
    return 1.0;
  }
  const int ranks = cluster.gpus_per_node;
  const int groups = ranks / tensor;
  if (ranks <= cluster.host_cores->cores || groups < 2) return 1.0;
  double rate = 1.0;
  for (int iteration = 0; iteration < 100; ++iteration) {
    const double busy_fraction = compute_s / rate / (compute_s / rate + sums_s);
    double next = 0;
    double ways = 1;  // binomial coefficient (groups - 1 choose k)
    for (int k = 0; k < groups; ++k) {
      next += ways * std::pow(busy_fraction, k) * std::pow(1 - busy_fraction, groups - 1 - k) *
              core_rate(cluster, tensor * (1 + k));
      ways = ways * (groups - 1 - k) / (k + 1);
    }
    if (std::abs(next - rate) < 1e-12) return next;
    rate = next;
  }
  return rate;
}

namespace {

// Megatron's tensor-parallel collectives on b x s x h activations of `bytes`. Without sequence
// parallelism: an all-reduce after each row-parallel layer (forward) and of each
// column-parallel layer's input gradient (backward). With it (Megatron-SP): a reduce-scatter
// after the row-parallel layer (its backward an all-gather), an all-gather before the
// column-parallel layer (its backward a reduce-scatter) and, in backward, the all-gather again
// for the weight's gradient: only the rank's part of the input is kept.
struct TensorParallelCollective {
  RankGroup group;
  AlphaBeta timing;
  bool sequence_parallel = false;
  // The ranks' arrival skew at a collective issued after a stretch of compute (the cluster's
  // blocking_sync_s): one per operator pass, at the collective that ends its compute. A
  // collective right after another, or after a LayerNorm (sequence parallelism's all-gathers),
  // pays none: measured on CPU ranks, sequence parallelism's twice as many collectives waited
  // about what tensor parallelism's sums did.
  double sync_s = 0.0;
  double collective_s(CollectiveKind kind, double bytes) const {
    return group.size() <= 1 ? 0.0 : ring_collective_s(kind, bytes, group, timing);
  }
  double after_compute_s(CollectiveKind kind, double bytes) const {
    return group.size() <= 1 ? 0.0 : collective_s(kind, bytes) + sync_s;
  }
  double row_output_s(double bytes) const {
    return after_compute_s(
        sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, bytes);
  }
  double row_output_backward_s(double bytes) const {
    return sequence_parallel ? collective_s(CollectiveKind::all_gather, bytes) : 0.0;
  }
  double column_input_s(double bytes) const {
    return sequence_parallel ? collective_s(CollectiveKind::all_gather, bytes) : 0.0;
  }
  double column_input_backward_s(double bytes) const {
    if (!sequence_parallel) return after_compute_s(CollectiveKind::all_reduce, bytes);
    return after_compute_s(CollectiveKind::reduce_scatter, bytes) +
           collective_s(CollectiveKind::all_gather, bytes);
  }
  // The vocabulary-parallel cross-entropy's three sums of one fp32 value a token (the logits'
  // max, the sum of exponentials, the target logits), the second and third right after the one
  // before.
  double cross_entropy_s(double bytes) const {
    return after_compute_s(CollectiveKind::all_reduce, bytes) +
           2 * collective_s(CollectiveKind::all_reduce, bytes);
  }
};

// What one sample of a forward keeps for backward. The head's loss as the pipeline runtimes
// compute it (Megatron's vocabulary-parallel cross-entropy, the validator's parallel GPT) keeps
// one fp32 vocabulary slice a token (its softmax, or exponentials), and the logits go once it
// has them; the operator's own figure also counts the logits, which a unit boundary (the
// sharded runtime's detached head output) holds. A fused loss needs its logits: kept.
double saved_bytes_per_sample(const GptSpec& spec, const Operator& op, bool recompute) {
  if (recompute) return *op.input_activation_bytes_per_sample;
  if (op.kind == OperatorKind::head && spec.loss != LossKernel::fused) {
    return op.activation_bytes_per_sample - op.output_bytes_per_sample;
  }
  return op.activation_bytes_per_sample;
}

void check_run(const GptSpec& spec, const Cluster& cluster, const ParallelRun& run,
               const ParallelLayout& layout, const std::string& source) {
  if (layout.world() != cluster.ranks) {
    throw InputError(source, "$.parallel",
                     fmt::format("tensor {} x pipeline {} x data {} = {} GPUs", run.degrees.tensor,
                                 run.degrees.pipeline, run.degrees.data, layout.world()),
                     fmt::format("the cluster's {} GPUs", cluster.ranks));
  }
  const int t = run.degrees.tensor;
  if (spec.heads % t != 0) {
    throw InputError(source, "$.parallel.tensor", std::to_string(t),
                     fmt::format("a divisor of the attention heads ({})", spec.heads));
  }
  const int chunks = run.degrees.pipeline * run.chunks_per_stage;
  if (spec.layers < chunks) {
    throw InputError(source, "$.parallel.pipeline", std::to_string(chunks),
                     fmt::format("at most the layers ({}) in pipeline chunks", spec.layers));
  }
  if (!run.layers_per_chunk.empty()) {
    int total = 0;
    for (int layers : run.layers_per_chunk) total += layers;
    if (static_cast<int>(run.layers_per_chunk.size()) != chunks || total != spec.layers) {
      throw InputError(
          source, "$.parallel.layers_per_chunk",
          fmt::format("{} chunks holding {} layers", run.layers_per_chunk.size(), total),
          fmt::format("{} chunks holding the {} layers", chunks, spec.layers));
    }
  }
  if (run.micro_batch < 1 || run.micro_batches < 1) {
    throw InputError(source, "$.parallel.micro_batches",
                     fmt::format("{} of {}", run.micro_batches, run.micro_batch),
                     "at least one micro-batch of at least one sample");
  }
}

// One operator's data-parallel collectives in its mode, by when they run.
// Collectives that run once an iteration go in one bucket per kind and group (Megatron's and
// DeepSpeed's contiguous gradient buffers): their bytes add up, their latency is paid once.
using OnceBuckets = std::map<std::pair<CollectiveKind, GroupAxis>, double>;

// A chunk's operators in the order each pass computes them, with the collectives each waits for
// or issues (model/pass_stream).
struct StreamedChunk {
  std::vector<StreamedOperator> forward;
  std::vector<StreamedOperator> backward;
};

struct DataParallelTimes {
  double forward_s = 0;          // every micro-batch, before its forward
  double backward_s = 0;         // every micro-batch: recompute and backward gathers, reductions
  double backward_gather_s = 0;  // of backward_s, the gathers (before the operator's backward)
  std::vector<PassCollective> forward;  // those collectives, in order
  std::vector<PassCollective> backward;
  OnceBuckets once_bytes;      // once an iteration, after the last backward
  OnceBuckets prologue_bytes;  // once an iteration, before the first forward (z2's gathers)
};

DataParallelTimes data_parallel_times(Mode mode, double parameter_bytes, bool recompute,
                                      const Cluster& group, double reduce_ratio) {
  DataParallelTimes times;
  const ModeDescription& description = describe_mode(mode);
  const bool kept = description.parameters == ParameterUse::gathered_once;
  for (const ModeCollective& collective : description.collectives) {
    // A recomputed operator gathers once before its recompute and keeps the parameters for its
    // backward (FSDP(checkpoint(op)), the runtime's order: validate/parallel_gpt).
    if (!collective_runs(collective, recompute ? Checkpoint::fused : Checkpoint::none)) continue;
    const double bytes = collective.kind == CollectiveKind::all_gather
                             ? parameter_bytes
                             : parameter_bytes * reduce_ratio;
    const double time_s = group_timing(collective.group, group)
                              .time_s(collective.kind, bytes, group_ranks(collective.group, group));
    // Kept parameters (z2) are gathered before the first micro-batch only: a pipeline holds
    // several micro-batches between a layer's forward and its backward.
    if (kept && collective.stage == Stage::forward) {
      times.prologue_bytes[{collective.kind, collective.group}] += bytes;
    } else if (!runs_every_micro_batch(description, collective)) {
      times.once_bytes[{collective.kind, collective.group}] += bytes;
    } else if (collective.stage == Stage::forward) {
      times.forward_s += time_s;
      times.forward.push_back({collective.kind, collective.group, bytes});
    } else {
      times.backward_s += time_s;
      if (collective.kind == CollectiveKind::all_gather) times.backward_gather_s += time_s;
      times.backward.push_back({collective.kind, collective.group, bytes});
    }
  }
  return times;
}

// What an MLP's backward allocates beside the activations it still holds: the gradients of its
// inner activation and of the activation function's input (b s f / t each in the activation
// dtype; SwiGLU's gate a third) and one weight matrix's gradient before it is added to the
// accumulated one. A stage with the head never peaks here (the loss's workspace is larger); a
// pipeline's other stages do: the validator's first stage peaked 1.95, 3.35 and 4.6 MiB above
// the model at micro-batch 1, 2 and 4 (local-cpu-3d, 2, 3 and 5 MiB of these).
double mlp_backward_temporary_bytes(const GptSpec& spec, const Operator& mlp, int layer, int t,
                                    double b, double e) {
  const double h = spec.hidden_of_layer(layer);
  const double f = spec.ffn_hidden > 0 ? spec.ffn_hidden : 4.0 * h;
  const double inner_gradients = spec.mlp == MlpKind::swiglu ? 3.0 : 2.0;
  const double gradient_bytes_per_parameter =
      mlp.parameter_count > 0 ? mlp.gradient_bytes / mlp.parameter_count : 0.0;
  return b * inner_gradients * spec.sequence_length * f / t * e +
         h * f / t * gradient_bytes_per_parameter;
}

}  // namespace

Cluster data_group_cluster(const Cluster& cluster, const ParallelLayout& layout,
                           const RankGroup& data) {
  Cluster group = cluster;
  group.ranks = data.size();
  if (!cluster.topology) {
    group.gpus_per_node = std::min(cluster.gpus_per_node, data.size());
    // A group smaller than the cluster: its own timings where measured (every such group of
    // the layout reduces at once, as they were timed).
    group.world = cluster.group_timing(data.size());
    group.intra_node = group.world;
    group.inter_node = group.world;
    group.timing_by_group_size.clear();
    return group;
  }
  const Topology& topology = *cluster.topology;
  const int per_node = data.most_ranks_on_one_node(topology.node.gpus);
  const int nodes = data.nodes_spanned(topology.node.gpus);
  group.gpus_per_node = per_node;
  // NCCL's choice (clusters that declare it) on the same rings: the nodes each spans and the
  // cross-node edges' part of its latency.
  const GroupRingTiming ring = group_ring(topology, per_node, nodes);
  group.world =
      group_timing_for(cluster, sharing_node_links(topology, layout, data, nodes, ring.alpha_beta),
                       nodes, ring.inter_alpha_share);
  group.intra_node = group_timing_for(
      cluster,
      sharing_node_links(topology, layout, data, 1, group_ring_timing(topology, per_node, 1)), 1,
      0.0);
  group.inter_node = group_timing_for(cluster, group_ring_timing(topology, 1, nodes), nodes,
                                      nodes > 1 ? 1.0 : 0.0);
  return group;
}

ParallelIterationCost parallel_iteration_cost(const GptSpec& spec, const Training& training,
                                              const Cluster& cluster, const CostSettings& settings,
                                              const ParallelRun& run, const std::string& source,
                                              PipelineRecord record) {
  std::optional<ParallelLayout> maybe_layout;
  try {
    maybe_layout.emplace(run.degrees, run.order);
  } catch (const std::invalid_argument& error) {
    throw InputError(source, "$.parallel", run.order, error.what());
  }
  const ParallelLayout& layout = *maybe_layout;
  check_run(spec, cluster, run, layout, source);
  const int t = run.degrees.tensor;
  const int p = run.degrees.pipeline;
  const int v = run.schedule == PipelineSchedule::interleaved ? run.chunks_per_stage : 1;
  const int chunks = p * v;

  GptSpec rank_spec = spec;
  rank_spec.tensor_parallel = t;
  rank_spec.sequence_parallel = run.sequence_parallel;
  ParallelIterationCost cost;
  cost.workload = std::make_shared<const Workload>(make_gpt(rank_spec, training));
  const Workload& workload = *cost.workload;
  if (!run.modes.empty() && static_cast<int>(run.modes.size()) != workload.size()) {
    throw InputError(source, "$.parallel.modes", fmt::format("{} modes", run.modes.size()),
                     fmt::format("one per operator ({})", workload.size()));
  }
  for (Mode mode : run.modes) {
    if (mode == Mode::hsdp) {
      throw InputError(source, "$.parallel.modes", "hsdp",
                       "dp, z1, z2 or zdp (hybrid sharding inside a 3D layout is not modelled)");
    }
  }
  auto mode_of = [&](int op) { return run.modes.empty() ? Mode::dp : run.modes[op]; };
  // The data-parallel group every stage's modes shard over (all stages' fall alike).
  const Cluster data_group =
      data_group_cluster(cluster, layout, layout.group_of(GroupAxis::data, 0));
  Training iteration_training = training;
  iteration_training.accumulation_steps = run.micro_batches;
  const CostModel model(workload, data_group, iteration_training, settings);
  const double b = run.micro_batch;
  const double e = activation_element_bytes(training.precision);
  const double s = spec.sequence_length;
  const int head_op = workload.size() - 1;

  const TensorParallelCollective tensor{
      layout.group_of(GroupAxis::tensor, 0),
      timing_of(cluster, layout, layout.group_of(GroupAxis::tensor, 0)), run.sequence_parallel,
      cluster.gpu.blocking_sync_s};

  const std::vector<int> split =
      run.layers_per_chunk.empty() ? even_layer_split(spec.layers, chunks) : run.layers_per_chunk;
  int first_layer = 0;
  // Each chunk's data-parallel collectives that run once an iteration (bucketed per stage below).
  std::vector<OnceBuckets> chunk_once;
  std::vector<OnceBuckets> chunk_prologue;     // and before the first micro-batch
  std::vector<StreamedChunk> streamed_chunks;  // each pass's operators as its stream sees them
  for (int c = 0; c < chunks; ++c) {
    ChunkCost chunk;
    chunk.stage = c % p;
    if (c == 0) chunk.ops.push_back(0);
    for (int layer = first_layer; layer < first_layer + split[c]; ++layer) {
      chunk.ops.push_back(1 + 2 * layer);
      chunk.ops.push_back(2 + 2 * layer);
    }
    chunk.layers = split[c];
    first_layer += split[c];
    if (c == chunks - 1) chunk.ops.push_back(head_op);

    StreamedChunk& streamed = streamed_chunks.emplace_back();
    // ZDP's gathered parameters of an operator, held while it computes (the runtime gathers
    // one operator ahead: the next in forward, the previous in backward, within the chunk).
    const auto gathered_bytes = [&](std::size_t k) {
      if (k >= chunk.ops.size()) return 0.0;
      const bool each_use =
          describe_mode(mode_of(chunk.ops[k])).parameters == ParameterUse::gathered_each_use;
      return each_use ? workload.op(chunk.ops[k]).parameter_bytes : 0.0;
    };
    std::vector<double> saved_bytes;  // each operator's saved activations, one micro-batch
    std::vector<double> forward_transient_bytes;
    std::vector<double> backward_transient_bytes;
    // The full gradient of an operator in a mode that shards gradients, held until its
    // reduce-scatter ends: during the backward of the operator before it (one in flight).
    const auto reducing_bytes = [&](std::size_t k) {
      if (k >= chunk.ops.size()) return 0.0;
      const bool shards = describe_mode(mode_of(chunk.ops[k])).shards_gradients;
      return shards ? workload.op(chunk.ops[k]).gradient_bytes : 0.0;
    };
    for (std::size_t k = 0; k < chunk.ops.size(); ++k) {
      const int op = chunk.ops[k];
      const Operator& o = workload.op(op);
      const bool recompute = recomputes(run, o);
      chunk.forward_calls.push_back({op, false});
      const double forward_compute_s = model.forward_compute_s(op).at_real(b);
      chunk.forward_s += forward_compute_s;
      streamed.forward.push_back({forward_compute_s, 0.0, 0.0});
      // Its backward: a recompute's activations, its workspace, an MLP's temporaries, in modes
      // that shard gradients (z2, zdp) its full gradient until the reduce-scatter has it (as the
      // cost model's per-operator transient) and the next operator's, still being reduced, and
      // the gathered parameters beside them: its own and the previous operator's, prefetched.
      // Its forward holds its own and the next one's.
      const double full_gradient_bytes =
          describe_mode(mode_of(op)).shards_gradients ? o.gradient_bytes : 0.0;
      const double backward_temporary_bytes =
          o.kind == OperatorKind::mlp ? mlp_backward_temporary_bytes(spec, o, (op - 1) / 2, t, b, e)
                                      : 0.0;
      backward_transient_bytes.push_back(
          b * ((recompute ? o.activation_bytes_per_sample : 0.0) + o.workspace_bytes_per_sample) +
          backward_temporary_bytes + full_gradient_bytes + reducing_bytes(k + 1) +
          gathered_bytes(k) + (k > 0 ? gathered_bytes(k - 1) : 0.0));
      forward_transient_bytes.push_back(gathered_bytes(k) + gathered_bytes(k + 1));
      saved_bytes.push_back(b * saved_bytes_per_sample(spec, o, recompute));
      const double layer_bytes = b * s * spec.hidden_of_layer(0) * e;
      switch (o.kind) {
        case OperatorKind::attention:
        case OperatorKind::mlp: {
          // The column-parallel input and the row-parallel output; a recompute repeats the
          // forward's in backward.
          const double bytes = b * o.output_bytes_per_sample;
          const double forward_s = tensor.column_input_s(bytes) + tensor.row_output_s(bytes);
          chunk.forward_communication_s += forward_s;
          chunk.backward_communication_s += tensor.column_input_backward_s(bytes) +
                                            tensor.row_output_backward_s(bytes) +
                                            (recompute ? forward_s : 0.0);
          break;
        }
        case OperatorKind::embedding:
          // The vocabulary-parallel lookup's partial sums, as a row-parallel output.
          chunk.forward_communication_s += tensor.row_output_s(layer_bytes);
          chunk.backward_communication_s += tensor.row_output_backward_s(layer_bytes);
          break;
        case OperatorKind::head:
          // A column-parallel product, then the vocabulary-parallel cross-entropy: the logits'
          // max, the sum of exponentials and the target logits, one fp32 value per token each.
          chunk.forward_communication_s +=
              tensor.column_input_s(layer_bytes) + tensor.cross_entropy_s(4.0 * b * s);
          chunk.backward_communication_s += tensor.column_input_backward_s(layer_bytes);
          break;
        case OperatorKind::generic:
          break;
      }
    }
    // The chunk's largest transient beyond its saved activations: an operator's forward runs
    // before the operators after it have saved theirs, its backward after they freed theirs.
    double saved_after_bytes = 0;
    for (std::size_t k = chunk.ops.size(); k-- > 0;) {
      chunk.largest_transient_bytes =
          std::max({chunk.largest_transient_bytes, backward_transient_bytes[k] - saved_after_bytes,
                    forward_transient_bytes[k] - saved_after_bytes - saved_bytes[k]});
      saved_after_bytes += saved_bytes[k];
    }
    chunk.saved_activation_bytes = saved_after_bytes;
    for (auto it = chunk.ops.rbegin(); it != chunk.ops.rend(); ++it) {
      const Operator& o = workload.op(*it);
      double compute_s = 0;
      if (recomputes(run, o)) {
        chunk.backward_calls.push_back({*it, false});
        compute_s += model.forward_compute_s(*it).at_real(b);
      }
      chunk.backward_calls.push_back({*it, true});
      compute_s += model.backward_compute_s(*it).at_real(b);
      chunk.backward_s += compute_s;
      streamed.backward.push_back({compute_s, 0.0, 0.0});
    }
    OnceBuckets& once = chunk_once.emplace_back();
    OnceBuckets& prologue = chunk_prologue.emplace_back();
    for (std::size_t k = 0; k < chunk.ops.size(); ++k) {
      const int op = chunk.ops[k];
      const Operator& o = workload.op(op);
      const DataParallelTimes times =
          data_parallel_times(mode_of(op), o.parameter_bytes, recomputes(run, o), data_group,
                              model.gradient_reduce_ratio());
      streamed.forward[k].gather_s = times.forward_s;
      StreamedOperator& backward = streamed.backward[chunk.ops.size() - 1 - k];
      backward.gather_s = times.backward_gather_s;
      backward.reduce_s = times.backward_s - times.backward_gather_s;
      chunk.forward_data_parallel_s += times.forward_s;
      chunk.backward_data_parallel_s += times.backward_s;
      chunk.forward_collectives.insert(chunk.forward_collectives.end(), times.forward.begin(),
                                       times.forward.end());
      chunk.backward_collectives.insert(chunk.backward_collectives.end(), times.backward.begin(),
                                        times.backward.end());
      for (const auto& [key, bytes] : times.once_bytes) once[key] += bytes;
      for (const auto& [key, bytes] : times.prologue_bytes) prologue[key] += bytes;
    }
    chunk.forward_compute_s = chunk.forward_s;
    chunk.backward_compute_s = chunk.backward_s;
    cost.chunks.push_back(std::move(chunk));
  }
  // The data-parallel stream beside the compute, operator by operator (model/pass_stream): a
  // pass lasts its compute, slowed where the two share cores (on the CPU testbed a z2
  // backward's reduce-scatters stretched the runtime's 2-rank backward by about their own time,
  // 10 ms of 12), and its waits for the stream (a gather not yet done, the previous reduction).
  // Each chunk runs a forward and a backward, then (m > 1) another pair on the stream the first
  // left: the first pair counts once, the second m - 1 times (exact for one stage under 1F1B,
  // whose passes alternate so; a longer schedule would cost a layout search m passes a stage).
  // What the stream holds after the stage's first chunk's backward, which ends the stage's
  // schedule, delays its gradient reduction.
  cost.stages.resize(p);
  {
    const double m = run.micro_batches;
    const double arrival_s = data_group.ranks > 1 ? cluster.gpu.blocking_sync_s : 0.0;
    // The slowest of the node's data-parallel replicas sets the step (CPU ranks only).
    const double straggling = replicas_straggling(cluster, t, p, data_group.ranks);
    for (int c = 0; c < chunks; ++c) {
      ChunkCost& chunk = cost.chunks[c];
      const StreamedChunk& streamed = streamed_chunks[c];
      PassStream stream(model.overlap_slowdown(), model.overlap_communication_slowdown(),
                        arrival_s);
      const StreamedPassTime first_forward = stream.run(streamed.forward);
      const StreamedPassTime first_backward = stream.run(streamed.backward);
      StreamedPassTime forward = first_forward;
      StreamedPassTime backward = first_backward;
      if (run.micro_batches > 1) {
        forward = stream.run(streamed.forward);
        backward = stream.run(streamed.backward);
      }
      const auto mean = [m](double first, double rest) { return (first + (m - 1) * rest) / m; };
      chunk.forward_s = mean(first_forward.length_s, forward.length_s);
      chunk.forward_stream_wait_s = mean(first_forward.wait_s, forward.wait_s);
      chunk.backward_s = mean(first_backward.length_s, backward.length_s);
      chunk.backward_stream_wait_s = mean(first_backward.wait_s, backward.wait_s);
      const double drain_s = stream.drain_s();
      if (c == chunk.stage) cost.stages[chunk.stage].stream_drain_s = drain_s;
      const double rate = desynchronised_compute_rate(
                              cluster, t, p, chunk.forward_s + chunk.backward_s,
                              chunk.forward_communication_s + chunk.backward_communication_s) /
                          straggling;
      chunk.forward_s /= rate;
      chunk.backward_s /= rate;
      chunk.forward_s += chunk.forward_communication_s;
      chunk.backward_s += chunk.backward_communication_s;
      if (p > 1) {
        chunk.forward_s += cluster.gpu.pipeline_pass_s;
        chunk.backward_s += cluster.gpu.pipeline_pass_s;
      }
    }
  }

  // Point-to-point transfers between neighbouring stages (of the first pipeline group: every
  // group falls on the nodes alike).
  const RankGroup pipeline = layout.group_of(GroupAxis::pipeline, 0);
  // Megatron's scatter-gather: each tensor-parallel rank sends its 1/t slice, and the receiving
  // group all-gathers it (the activation is replicated across the group without sequence
  // parallelism; with it, each rank's slice is all it needs).
  const double activation_bytes = b * s * spec.hidden_of_layer(spec.layers - 1) * e;
  const bool sliced = run.sequence_parallel || (run.scatter_gather_transfers && t > 1);
  const double transfer_bytes = sliced ? activation_bytes / t : activation_bytes;
  const double regather_s = run.scatter_gather_transfers && !run.sequence_parallel && t > 1
                                ? ring_collective_s(CollectiveKind::all_gather, activation_bytes,
                                                    tensor.group, tensor.timing)
                                : 0.0;
  cost.work.stages = p;
  cost.work.chunks_per_stage = v;
  cost.work.micro_batches = run.micro_batches;
  cost.work.blocking_transfers = run.blocking_transfers;
  // A boundary's transfer depends only on the stages it joins: chunk c's is stage c mod p's.
  std::vector<std::optional<double>> stage_transfer_s(p);
  for (int c = 0; c < chunks; ++c) {
    cost.work.forward_s.push_back(cost.chunks[c].forward_s);
    cost.work.backward_s.push_back(cost.chunks[c].backward_s);
    if (c + 1 == chunks) break;
    if (stage_transfer_s[c % p]) {
      cost.work.transfer_s.push_back(*stage_transfer_s[c % p]);
      continue;
    }
    const int from = pipeline.ranks[c % p];
    const int to = pipeline.ranks[(c + 1) % p];
    AlphaBeta link = cluster.world.all_gather.alpha_beta;
    if (cluster.topology) {
      const int gpus_per_node = cluster.topology->node.gpus;
      // Every rank of the sending stage on `from`'s node sends its slice at once.
      int senders = 0;
      for (int rank : layout.stage_ranks(c % p))
        senders += rank / gpus_per_node == from / gpus_per_node;
      const bool across_nodes = from / gpus_per_node != to / gpus_per_node;
      link = point_to_point_timing(*cluster.topology, across_nodes, senders);
      if (!across_nodes) {
        // Inside the node the stage's sends share the links their routes cross (a PCIe tree's
        // uplinks and sockets): each send as a one-edge route.
        std::vector<std::vector<int>> sends;
        std::size_t which = 0;
        for (int rank : layout.stage_ranks(c % p)) {
          const int partner = layout.group_of(GroupAxis::pipeline, rank).ranks[(c + 1) % p];
          if (rank / gpus_per_node != from / gpus_per_node ||
              partner / gpus_per_node != from / gpus_per_node) {
            continue;
          }
          if (rank == from) which = sends.size();
          sends.push_back({rank % gpus_per_node, partner % gpus_per_node});
        }
        const double shared_Bps = shared_ring_bandwidth_Bps(*cluster.topology, sends, which, false);
        if (std::isfinite(shared_Bps)) link.beta_s_per_byte = 1.0 / shared_Bps;
      }
    }
    stage_transfer_s[c % p] = link.step_time_s(transfer_bytes) + regather_s;
    cost.work.transfer_s.push_back(*stage_transfer_s[c % p]);
  }
  cost.transfer_s = cost.work.transfer_s.empty() ? 0.0 : cost.work.transfer_s.front();
  cost.transfer_bytes = transfer_bytes;
  cost.regather_s = regather_s;
  // Parameters kept whole across micro-batches (z2) are gathered before the stage's first
  // micro-batch: the stage's passes start once its gathers are done (a later stage's gathers
  // run while it waits for its first input).
  cost.work.stage_ready_s.assign(p, 0.0);
  for (int c = 0; c < chunks; ++c) {
    for (const auto& [key, bytes] : chunk_prologue[c]) {
      const auto [kind, group] = key;
      StageCost& stage = cost.stages[c % p];
      stage.prologue_s +=
          group_timing(group, data_group).time_s(kind, bytes, group_ranks(group, data_group));
      stage.prologue.push_back({kind, group, bytes});
    }
  }
  for (int r = 0; r < p; ++r) cost.work.stage_ready_s[r] = cost.stages[r].prologue_s;
  // CPU ranks sharing their node's cores: the passes' times hold every rank computing; while
  // only some stages are in passes (the pipeline's fill and drain, its bubbles), the busy ranks
  // get the idle ones' cores. The node's ranks taken as spread evenly over the stages.
  if (cluster.host_cores && p > 1) {
    for (int busy = 1; busy <= p; ++busy) {
      const int threads = std::max(
          1, static_cast<int>(std::lround(static_cast<double>(busy) * cluster.gpus_per_node / p)));
      cost.work.rate_by_busy_stages.push_back(core_rate(cluster, threads));
    }
  }
  try {
    cost.timeline = run_pipeline(run.schedule, cost.work, record);
  } catch (const std::invalid_argument& error) {
    throw InputError(source, "$.parallel.schedule",
                     std::string(pipeline_schedule_name(run.schedule)), error.what());
  }
  cost.pipeline_s = cost.timeline.makespan_s;

  // Each stage's gradient reduction and optimizer step, after its last backward.
  const double reduce_bytes_per_parameter =
      reduce_element_bytes(training.precision, training.gradient_reduce);
  double synchronised_s = 0;
  double optimizer_s = 0;
  for (int r = 0; r < p; ++r) {
    StageCost& stage = cost.stages[r];
    double activation_bytes = 0;
    double transient_bytes = 0;
    int chunks_here = 0;
    OnceBuckets once;
    for (std::size_t c = 0; c < cost.chunks.size(); ++c) {
      const ChunkCost& chunk = cost.chunks[c];
      if (chunk.stage != r) continue;
      ++chunks_here;
      activation_bytes += chunk.saved_activation_bytes;
      transient_bytes = std::max(transient_bytes, chunk.largest_transient_bytes);
      for (int op : chunk.ops) {
        const Operator& o = workload.op(op);
        const Mode mode = mode_of(op);
        const OperatorChoice choice = OperatorChoice::whole(mode);
        stage.parameters += o.parameter_count;
        const double resting = resting_state_bytes(mode, data_group, o.parameter_bytes,
                                                   o.gradient_bytes, o.optimizer_bytes);
        stage.resting_state_bytes += resting;
        stage.model_state_bytes += resting;
        const ModeDescription& description = describe_mode(mode);
        if (description.parameters == ParameterUse::gathered_once) {
          // Kept whole from the first forward to the last backward.
          stage.model_state_bytes += o.parameter_bytes * (1.0 - 1.0 / data_group.ranks);
        }
        stage.optimizer_step_s += model.optimizer_step_s(op, choice);
      }
      for (const auto& [key, bytes] : chunk_once[c]) once[key] += bytes;
    }
    for (const auto& [key, bytes] : once) {
      const auto [kind, group] = key;
      stage.gradient_reduce_s +=
          group_timing(group, data_group).time_s(kind, bytes, group_ranks(group, data_group));
      stage.reductions.push_back({kind, group, bytes});
    }
    if (p > 1 && (r == 0 || r == p - 1)) {
      // The word embedding and the head share one matrix in Megatron's GPT: its two copies'
      // gradients are all-reduced between the first and the last stage.
      const RankGroup ends{GroupAxis::pipeline, {pipeline.ranks.front(), pipeline.ranks.back()}};
      const double table = spec.padded_vocabulary() * spec.hidden_of_layer(0) / t;
      stage.tied_embedding_bytes = table * reduce_bytes_per_parameter;
      // Every rank of the first stage runs its pair's all-reduce at once: across nodes they
      // share the NICs of the node (not every GPU of it does).
      AlphaBeta ends_timing = timing_of(cluster, layout, ends);
      if (cluster.topology && ends.nodes_spanned(cluster.topology->node.gpus) > 1) {
        const int gpus_per_node = cluster.topology->node.gpus;
        int senders = 0;
        for (int rank : layout.stage_ranks(0)) {
          senders += rank / gpus_per_node == ends.ranks.front() / gpus_per_node;
        }
        ends_timing = point_to_point_timing(*cluster.topology, true, senders);
      }
      stage.gradient_reduce_s += ring_collective_s(CollectiveKind::all_reduce,
                                                   stage.tied_embedding_bytes, ends, ends_timing);
    }
    stage.peak_in_flight = cost.timeline.peak_in_flight[r];
    stage.activation_bytes = stage.peak_in_flight * activation_bytes / chunks_here;
    stage.transient_bytes = transient_bytes;
    stage.peak_memory_bytes =
        stage.model_state_bytes + stage.activation_bytes + stage.transient_bytes;
    cost.peak_memory_bytes = std::max(cost.peak_memory_bytes, stage.peak_memory_bytes);
    synchronised_s = std::max(
        synchronised_s, cost.timeline.finish_s[r] + stage.stream_drain_s + stage.gradient_reduce_s);
    optimizer_s = std::max(optimizer_s, stage.optimizer_step_s);
  }
  cost.iteration_time_s = synchronised_s + optimizer_s;
  cost.samples_per_iteration =
      static_cast<double>(run.micro_batch) * run.micro_batches * run.degrees.data;
  return cost;
}

}  // namespace osdp
