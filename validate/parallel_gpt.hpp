// The GPT trained with tensor, pipeline and data parallelism on real ranks (Megatron-LM's
// scheme), its ranks arranged by model/parallel_layout:
//   tensor    attention split by heads and the MLP by hidden units (column-parallel QKV and
//             first MLP layer, row-parallel projections; an all-reduce of the b x s x h
//             activations after each row-parallel layer in forward, and of the input's gradient
//             before each column-parallel layer in backward); the embedding table and the LM
//             head split by vocabulary, with a vocabulary-parallel cross-entropy (the logits are
//             never gathered). LayerNorms, biases after a reduction and the position table are
//             replicated and receive identical gradients on every tensor rank.
//   pipeline  stages as ranks: the first holds the embedding, the last the head and the loss,
//             each a run of transformer layers; activations go forward and their gradients back
//             by point-to-point transfers, per micro-batch, in GPipe order (every forward, then
//             every backward) or 1F1B (p - s - 1 warm-up forwards on stage s, then one forward
//             and one backward in turn).
//   data      every parameter's gradient all-reduced over the data-parallel group after the
//             last micro-batch (replicated states: DDP), then averaged.
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
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;  // gpipe or 1f1b (not interleaved)
  int micro_batches = 1;  // per optimizer step, on every data-parallel rank
  // Transformer layers per stage, first stage first; empty: as even as possible, earlier stages
  // taking the remainder.
  std::vector<int> layers_per_stage;
  // What the data-parallel group shards: nothing (dp, DDP), or the optimizer states (z1,
  // DeepSpeed's ZeRO-1 as its 3D runs it: gradients reduce-scattered after the last
  // micro-batch, each rank updating its 1/d of the parameters, which are then all-gathered).
  Mode data_parallel_mode = Mode::dp;
};

// What one optimizer step did on this rank.
struct ParallelStepMetrics {
  double iteration_time_s = 0;
  // Time the compute thread waited for communication: tensor-parallel reductions, receives
  // from the neighbouring stages, the data-parallel reduction and the sends still in flight.
  double communication_wait_s = 0;
  // High-water mark of the counting allocator during the step (0 when it is not installed).
  std::int64_t peak_memory_bytes = 0;
  double loss = 0;  // the data-parallel rank's mean loss (on the last stage; 0 elsewhere)
  // Micro-batches whose activations this stage held at once: m under GPipe, at most p - s under
  // 1F1B.
  int most_micro_batches_in_flight = 0;
  // The stage's compute, in order: "F3" a forward of micro-batch 3, "B3" its backward.
  std::vector<std::string> schedule;
};

// Stage s's transformer layers [first, first + count).
struct StageLayers {
  int first = 0;
  int count = 0;
};
// The layers of every stage; throws InputError (file "plan") when the stated split does not
// cover the layers once, or a stage would be empty of everything.
std::vector<StageLayers> split_layers(const GptShape& shape, int stages,
                                      const std::vector<int>& layers_per_stage);

class ParallelGpt {
 public:
  // Throws InputError (file "plan") when the layout does not fit the model or the communicator:
  // a tensor degree that does not divide the heads, the vocabulary or the MLP's hidden units, a
  // world of another size, a bad split of layers.
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
