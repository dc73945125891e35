// One training iteration of a GPT under tensor x pipeline x data parallelism (Megatron-LM's 3D
// parallelism with data-parallel replicas), costed from the same compute laws and link timings as
// the rest of the model:
//   - tensor parallel (Megatron): every operator is one rank's 1/t part (model/workload's
//     tensor_parallel); per layer two all-reduces of the b x s x h activations in forward, two in
//     backward and two more in a checkpointed layer's recompute, on the compute stream's critical
//     path; the vocabulary-parallel embedding all-reduces its output, the head its input's
//     gradient (sequence parallelism: each all-reduce becomes a reduce-scatter + all-gather);
//   - pipeline parallel: the layers split over p stages (v chunks each when interleaved), the
//     embedding on the first and the head and loss on the last; each micro-batch's activation
//     and its gradient cross between stages as point-to-point transfers (each tensor-parallel
//     rank its 1/t slice, re-gathered after, as Megatron's scatter-gather does; the sending stage
//     busy until it is out, as Megatron's blocking 1F1B sends are); the schedule's timeline
//     (model/pipeline_schedule) gives the bubble;
//   - data parallel: after its last backward each stage all-reduces its gradients in its
//     data-parallel group (ranks strided by the layout), the first and last stage all-reduce the
//     embedding's gradient (tied with the head, as Megatron ties them), then every stage steps
//     its optimizer after the slowest (the gradient norm is global).
// Groups are the layout's; their ring timing follows from how they fall on the nodes
// (group_ring_timing).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/parallel_layout.hpp"
#include "model/pipeline_schedule.hpp"
#include "model/workload.hpp"

namespace osdp {

struct ParallelRun {
  ParallelDegrees degrees;
  std::string order = "tp-dp-pp";
  int micro_batch = 1;    // samples per micro-batch per data-parallel rank
  int micro_batches = 1;  // m: micro-batches per iteration per pipeline (accumulation)
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int chunks_per_stage = 1;           // v, interleaved only
  std::vector<int> layers_per_chunk;  // empty: as even as possible (extra layers in the middle)
  std::vector<OperatorKind> checkpointed_kinds;  // recompute their forward before backward
  bool sequence_parallel = false;
  // Megatron's scatter_gather_tensors_in_pipeline (its default): a stage's tensor-parallel ranks
  // each send 1/t of the activation, and the next stage's group all-gathers it.
  bool scatter_gather_transfers = true;
  // Megatron's 1F1B sends and receives block: a stage is busy while its activation or gradient
  // goes out (PipelineWork::blocking_transfers).
  bool blocking_transfers = true;
  // The data-parallel mode of each operator of the tensor-parallel workload (model/mode): dp
  // (Megatron's DDP: gradients all-reduced after the last micro-batch), z1 (DeepSpeed's ZeRO-1),
  // z2 (parameters gathered before the first micro-batch and kept to the last, gradients
  // reduce-scattered every micro-batch: torchtitan's FSDP + PP without resharding), zdp
  // (gathered for every pass, ZeRO-3). Empty: all dp. Per-pass collectives run on their own
  // stream beside the compute, operator by operator (model/pass_stream): a pass waits for a
  // gather not done in time and for the previous reduction before the next.
  std::vector<Mode> modes;
};

// One compute call of a pass: an operator of the tensor-parallel workload, forward (also a
// recompute) or backward.
struct PassCall {
  int op = 0;
  bool backward = false;
};

// A data-parallel collective of one pass (zdp's gathers and reduce-scatters, z2's
// reduce-scatters): its kind, group and bytes on one rank.
struct PassCollective {
  CollectiveKind kind = CollectiveKind::all_gather;
  GroupAxis group = GroupAxis::data;
  double bytes = 0;
};

struct ChunkCost {
  int stage = 0;
  std::vector<int> ops;  // operator indices (embedding, layers' attention and MLP, head)
  int layers = 0;        // transformer layers it holds
  std::vector<PassCall> forward_calls;
  std::vector<PassCall> backward_calls;  // recompute forwards first
  double forward_communication_s = 0;    // tensor-parallel collectives of one forward
  double backward_communication_s = 0;   // of one backward (its recompute's included)
  double forward_data_parallel_s = 0;    // sharded modes' gathers of one forward
  double backward_data_parallel_s = 0;   // gathers and reductions of one backward
  // Those collectives one by one, in the order the data-parallel stream runs them (the
  // simulator runs them as flows beside the pass's compute).
  std::vector<PassCollective> forward_collectives;
  std::vector<PassCollective> backward_collectives;
  double forward_compute_s = 0;  // the operators' compute of one forward, which the stream hides
  double backward_compute_s = 0;
  // Of forward_s and backward_s, the time the compute waited for the data-parallel stream
  // (the rest of what the stream adds is the compute slowed beside it, on shared cores).
  double forward_stream_wait_s = 0;
  double backward_stream_wait_s = 0;
  // One micro-batch (the mean of the chunk's passes): compute, slowed beside the data-parallel
  // stream on shared cores, the compute's waits for the stream (model/pass_stream),
  // tensor-parallel collectives, pass overhead.
  double forward_s = 0;
  double backward_s = 0;
  double saved_activation_bytes = 0;  // kept from a forward to its backward, one micro-batch
  // Its largest transient (a recompute's activations, a workspace, gathered parameters, a full
  // gradient) less the activations not yet saved or already freed when it peaks.
  double largest_transient_bytes = 0;
};

struct StageCost {
  double parameters = 0;  // per rank
  double model_state_bytes = 0;
  double resting_state_bytes = 0;  // of which at rest (sharded as the modes say)
  // Data-parallel communication once an iteration: the gradient all-reduce (and the tied
  // embedding's), ZeRO-1's reduce-scatter and all-gather, the kept parameters' gather.
  double gradient_reduce_s = 0;
  // The per-pass data-parallel stream's work still queued after the stage's last pass (the
  // last reduce-scatters), before the gradient reduction (model/pass_stream).
  double stream_drain_s = 0;
  // What it reduces, one collective per kind and data-parallel group (the simulator runs them):
  // their bytes on one rank, in order; and the tied embedding's all-reduce between the first and
  // last stage (0: none).
  struct Reduction {
    CollectiveKind kind = CollectiveKind::all_reduce;
    GroupAxis group = GroupAxis::data;
    double bytes = 0;
  };
  std::vector<Reduction> reductions;
  // Before its first pass: the gathers of the parameters it keeps whole across micro-batches
  // (z2), which delay its first pass (PipelineWork::stage_ready_s) and are not in
  // gradient_reduce_s.
  std::vector<Reduction> prologue;
  double prologue_s = 0;
  double tied_embedding_bytes = 0;
  double optimizer_step_s = 0;
  int peak_in_flight = 0;
  // The peak's parts: model states, the activations of the micro-batches in flight, the
  // largest transient buffer (a recompute's activations, a workspace, zdp's gathers).
  double activation_bytes = 0;
  double transient_bytes = 0;
  double peak_memory_bytes = 0;
};

struct ParallelIterationCost {
  std::shared_ptr<const Workload> workload;  // one tensor-parallel rank's operators
  std::vector<ChunkCost> chunks;
  std::vector<StageCost> stages;
  PipelineWork work;
  PipelineTimeline timeline;
  double transfer_s = 0;         // one activation (or gradient) between neighbouring stages
  double transfer_bytes = 0;     // what one tensor-parallel rank sends in it
  double regather_s = 0;         // the receiving group's all-gather of the slices (in transfer_s)
  double pipeline_s = 0;         // the schedule's makespan
  double iteration_time_s = 0;   // with the gradient reductions and optimizer steps
  double peak_memory_bytes = 0;  // the largest stage's
  double samples_per_iteration = 0;
};

// Throws InputError (file: `source`) when the run does not fit the model or the cluster: degrees
// whose product is not the GPUs, heads or layers not divisible as the layout needs, modes that
// do not match the operators or cannot run in a data-parallel group (hsdp). `record`: whether
// the timeline keeps every pass and the critical path (a search needs only the figures).
ParallelIterationCost parallel_iteration_cost(const GptSpec& spec, const Training& training,
                                              const Cluster& cluster, const CostSettings& settings,
                                              const ParallelRun& run, const std::string& source,
                                              PipelineRecord record = PipelineRecord::passes);

// CPU ranks outnumbering their node's cores: the node's data-parallel replicas (groups of
// tensor x pipeline ranks that meet only at the step's end) each compute a whole step on their
// own, and the step waits for the slowest. HostCores::step_straggling is that slowest rank's
// compute over the mean for the node's ranks all on their own (`osdp calibrate`); with fewer
// replicas on the node it is scaled as the expected largest of that many independent, alike
// normal deviations: 1 + (step_straggling - 1) x E[max of g] / E[max of ranks on the node].
// 1 for one replica on the node (every rank meets every other in the step), for GPUs and for
// cores enough for every rank. Multiply the passes' compute by it.
double replicas_straggling(const Cluster& cluster, int tensor, int pipeline, int data);

// The expected largest of `count` independent standard normal deviates (0 for one).
double expected_largest_normal(int count);

// CPU ranks outnumbering their node's cores, one pipeline stage, several tensor groups on the
// node (the data-parallel replicas): each group waits at its own sums while the others compute,
// and a waiting rank leaves its core to them, so a group computes faster than the laws (timed
// with every rank computing) whenever another waits. The groups taken as independent, each
// computing a fraction f of a pass, f = compute / rate / (compute / rate + sums): the rate is
// the mean core_rate over how many other groups compute with it (binomial in f), solved for
// its fixed point. 1 elsewhere (a pipeline's stages: PipelineWork::rate_by_busy_stages).
// `compute_s` and `sums_s`: a pass's compute at the laws' rate and its tensor group's
// collectives (a forward and a backward together). Divide the compute by it.
double desynchronised_compute_rate(const Cluster& cluster, int tensor, int pipeline,
                                   double compute_s, double sums_s);

// The layer split of `chunks` chunks: `layers` as even as possible, the extra layers on the
// chunks after the first (which holds the embedding) and before the last (the head).
std::vector<int> even_layer_split(int layers, int chunks);

// A data-parallel group of the layout as a cluster of its own: its ranks, its ring timing on
// the topology (beside the layout's other data-parallel groups, which run their rings at the
// same time), the ranks it has on one node. What the data-parallel modes shard over.
Cluster data_group_cluster(const Cluster& cluster, const ParallelLayout& layout,
                           const RankGroup& data);

}  // namespace osdp
