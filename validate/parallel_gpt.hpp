// The GPT trained with tensor, pipeline and data parallelism on real ranks (Megatron-LM's
// scheme), its ranks arranged by model/parallel_layout:
//   tensor    attention split by heads and the MLP by hidden units (column-parallel QKV and
//             first MLP layer, row-parallel projections; an all-reduce of the b x s x h
//             activations after each row-parallel layer in forward, and of the input's gradient
//             before each column-parallel layer in backward); the embedding table and the LM
//             head split by vocabulary, with a vocabulary-parallel cross-entropy (the logits are
//             never gathered). LayerNorms, biases after a reduction and the position table are
//             replicated and receive identical gradients on every tensor rank. Sequence
//             parallelism (Megatron-SP): between those regions each tensor rank holds 1/t of
//             the sequence; reduce-scatter after a row-parallel layer, all-gather before a
//             column-parallel one, and the replicated parameters' gradients (partial sums)
//             all-reduced over the tensor group once a step.
//   pipeline  the layers split into p v model chunks (virtual stages, in model order): chunk c
//             runs on stage c mod p, so stage r holds chunks r, p + r, ... (v of them; v = 1
//             unless interleaved). The first chunk holds the embedding, the last the head and
//             the loss. Activations go forward and their gradients back between neighbouring
//             chunks point to point, per micro-batch (validate/stage_transfers); each stage runs
//             its passes in the order model/pipeline_schedule's stage_order gives: GPipe (every
//             forward, then every backward), 1F1B (p - s - 1 warm-up forwards on stage s, then
//             one forward and one backward in turn) or Megatron's interleaved 1F1B (m a
//             multiple of p).
//   data      (validate/stage_data_parallel) dp: every parameter's gradient all-reduced over the
//             data-parallel group after the last micro-batch (replicated states: DDP), then
//             averaged. z1 (DeepSpeed's ZeRO-1
//             in 3D): the gradients reduce-scattered after the last micro-batch, each rank
//             updating its 1/d of the flat parameters, then all-gathered in place. z2 (FSDP's
//             SHARD_GRAD_OP under a pipeline, as torchtitan runs it): each operator's parameters
//             (embedding, a layer's attention, its MLP, the head) stored as this rank's 1/d of a
//             flat buffer; all-gathered once before the first micro-batch and kept to the last
//             backward; each micro-batch's gradients of an operator reduce-scattered as soon as
//             its backward is done, into a 1/d gradient accumulator; the optimizer updates the
//             shard, and the whole copy is freed after the last backward.
//             OSDP inside 3D: under any of the three, the layers listed in zdp_layers are ZDP
//             instead (ZeRO-3): their attention's and MLP's parameters sharded as z2's,
//             all-gathered before every pass (each micro-batch's forward and backward) and freed
//             after it, their gradients reduce-scattered per micro-batch as z2's; under dp and
//             z1 the other operators' parameters form the bucket, and its reduction waits for
//             the ZDP layers' last reduce-scatters.
// The optimizer is torch::optim's, elementwise, so its step on a shard is its step on the whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/mode.hpp"
#include "model/parallel_layout.hpp"
#include "model/pipeline_schedule.hpp"
#include "validate/communicator.hpp"
#include "validate/gpt_parameters.hpp"

namespace osdp::validate {

struct ParallelRuntimeOptions {
  AdamSettings adam;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  // v: model chunks per stage; more than 1 only under the interleaved schedule.
  int chunks_per_stage = 1;
  int micro_batches = 1;  // per optimizer step, on every data-parallel rank
  // Transformer layers per model chunk (p v of them, in model order: chunk c runs on stage
  // c mod p); empty: as even as possible, earlier chunks taking the remainder.
  std::vector<int> layers_per_chunk;
  // Megatron's sequence parallelism (tensor degree above 1): between the tensor-parallel
  // regions each tensor rank holds 1/t of the sequence (LayerNorms, residuals, transfers); the
  // all-reduce after a row-parallel layer becomes a reduce-scatter over the sequence and the
  // copy before a column-parallel layer an all-gather (their gradients the other way round).
  bool sequence_parallel = false;
  // Activation checkpointing of every layer's attention and MLP: their forward keeps only its
  // input, and their backward runs the forward again first (with its tensor-parallel sums and,
  // for a ZDP layer, on the parameters gathered for the backward).
  bool checkpoint_layers = false;
  // What the data-parallel group shards: nothing (dp, DDP), the optimizer states (z1) or the
  // parameters, gradients and optimizer states between steps (z2); see above.
  Mode data_parallel_mode = Mode::dp;
  // The transformer layers (indices into the model's) whose attention and MLP are ZDP, gathered
  // for every pass (3D + OSDP), beside any of the three modes; with one data-parallel rank none.
  std::vector<int> zdp_layers;
};

// What one optimizer step did on this rank.
struct ParallelStepMetrics {
  double iteration_time_s = 0;
  // Time the compute thread waited for communication: tensor-parallel reductions, receives
  // from the neighbouring stages, the data-parallel collectives and the sends still in flight.
  double communication_wait_s = 0;
  // Of that, the receives from the neighbouring stages: the pipeline's bubble on this stage.
  double pipeline_wait_s = 0;
  // Of that, the tensor-parallel group's sums (and sequence parallelism's gathers and scatters,
  // and the vocabulary-parallel loss's gather of each token's largest logit).
  double tensor_wait_s = 0;
  // High-water mark of the counting allocator during the step (0 when it is not installed).
  std::int64_t peak_memory_bytes = 0;
  double loss = 0;  // the data-parallel rank's mean loss (on the last stage; 0 elsewhere)
  // Model chunks' micro-batches whose activations this stage held at once (each one chunk's
  // activations of one micro-batch), as the 3D model's StageCost::peak_in_flight counts them: m
  // under GPipe, min(m, p - s) under 1F1B, interleaved min(m v, 2 (p - s - 1) + (v - 1) p + 1)
  // with m > p (all m v when m = p: Megatron's schedule then runs every forward first).
  int most_micro_batches_in_flight = 0;
  // Point-to-point sends whose tensors this stage held at once (each let go once the receiver
  // is known to have it): at most about p, whatever m.
  int most_sends_in_flight = 0;
  // The stage's compute, in order: "F3" a forward of micro-batch 3, "B3" its backward; with
  // v > 1 chunks the stage's chunk follows ("F3:1": micro-batch 3's forward through the stage's
  // second chunk).
  std::vector<std::string> schedule;
  // For traces: steady_seconds() at the step's start; each pass's compute (after its receive,
  // before its send) and the optimizer step, in seconds from it.
  struct Span {
    std::string label;  // as in `schedule`
    double start_s = 0;
    double duration_s = 0;
  };
  double start_s = 0;
  std::vector<Span> passes;
  Span optimizer_step;
  // Each time the compute thread blocked on communication, in order, labelled by what it
  // waited for ("receive", "send", "tensor-parallel", "data-parallel"; validate/wait_log): they
  // add up to communication_wait_s. A tensor-parallel or data-parallel wait lies inside the
  // pass that waited; a receive comes before its pass.
  std::vector<Span> waits;
};

// Chunk c's transformer layers [first, first + count).
struct ChunkLayers {
  int first = 0;
  int count = 0;
};
// The layers of every model chunk; throws InputError (file "plan") when the stated split does
// not cover the layers once, or a chunk would be empty of everything (a chunk between the
// first, which holds the embedding, and the last, which holds the head, without a layer).
std::vector<ChunkLayers> split_layers(const GptShape& shape, int chunks,
                                      const std::vector<int>& layers_per_chunk);

// Whether Megatron's splits take a tensor-parallel degree: it divides the attention heads, the
// vocabulary and the MLP's 4 h hidden units.
bool tensor_degree_fits(const GptShape& shape, int tensor_degree);

class ParallelGpt {
 public:
  // Throws InputError (file "plan") when the layout does not fit the model or the communicator:
  // a tensor degree that does not divide the heads, the vocabulary or the MLP's hidden units, a
  // world of another size, a bad split of layers, chunks per stage other than 1 outside the
  // interleaved schedule, interleaving with micro-batches that are not a multiple of the stages,
  // a data-parallel mode other than dp, z1 or z2, ZDP layers not among the model's.
  ParallelGpt(const GptShape& shape, const ParallelLayout& layout, Communicator& communicator,
              const NamedTensors& initial, ParallelRuntimeOptions options);
  ~ParallelGpt();
  ParallelGpt(const ParallelGpt&) = delete;
  ParallelGpt& operator=(const ParallelGpt&) = delete;

  // Forward, backward and optimizer step on this data-parallel rank's rows of the global batch
  // (every tensor and pipeline rank of it passes the same rows): its micro-batches one after
  // another (their count must divide the rows).
  ParallelStepMetrics train_step(const TokenBatch& data_parallel_batch);
  // The full parameters in canonical layout, on every rank (a collective of all ranks).
  NamedTensors full_parameters();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace osdp::validate
