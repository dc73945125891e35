// The search over 3D layouts: tensor x pipeline x data degrees, micro-batch, pipeline schedule
// and activation checkpointing, with the data-parallel modes inside each stage, under the GPU's
// memory limit, for the highest throughput (model/parallel_iteration costs every candidate).
//
// Strategies, each at its best configuration under the same model:
//   3d_osdp       OSDP inside 3D: per stage, a base mode for its operators (dp, z1, or z2: kept
//                 gathered across micro-batches) and the layers in zdp (gathered every pass);
//                 any schedule; the layers split evenly, balanced against the embedding's and
//                 the head's compute, or by parameters (layer_splits). Its space holds every other
//                 strategy's, so it is never slower than any of them.
//   megatron_tp   Megatron-LM tensor parallelism (degree > 1) with data parallelism, no
//                 pipeline, DDP
//   gpipe         pipeline parallelism (degree > 1) with GPipe's schedule and data
//                 parallelism, no tensor split, DDP
//   deepspeed_3d  tensor x pipeline x data, 1F1B, ZeRO-1 at most (DeepSpeed's pipeline engine
//                 refuses ZeRO-2 and 3), layers partitioned by parameters (its default)
//   fsdp_pp       torchtitan's FSDP + PP (with TP): every operator z2, parameters kept gathered
//                 across micro-batches (no resharding after forward); 1F1B or interleaved
//
// Within a layout, schedule, micro-batch and checkpointing, each stage's memory falls with its
// count of zdp layers from one layer on (the first adds its gather buffers to the transient
// peak): the fewest that fit are found by binary search per stage. Its pass times only rise with
// the count, but the base mode's reduction after the pipeline (dp, z1) shrinks, so more zdp
// layers can be faster: from the fewest, each stage's count is improved in turn while the
// iteration gets faster (coordinate descent), where a bound (the pipeline alone at the fewest)
// says the layout could beat the best found. A stage tries every count when it has few layers
// above the fewest (8), else the ends and the knee where its zdp traffic stops hiding behind its
// compute. Not proven optimal: the tests compare it with brute force over every vector of
// counts on small instances.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/parallel_iteration.hpp"
#include "model/scenario.hpp"

namespace osdp {

// Micro-batches tried: every one in the training's range that divides the global batch (with
// the data-parallel degree) when one is fixed; else 1, 2, 3, 4, 6, 8, 12, 16, 24, ... up to the
// range's end, with the training's accumulation steps.
struct LayoutSearchOptions {
  std::optional<int> tensor;    // fix the tensor-parallel degree
  std::optional<int> pipeline;  // fix the pipeline degree
  std::optional<PipelineSchedule> schedule;
  std::optional<double> memory_limit_bytes;  // default: the training's, else the GPU's memory
  int interleaved_chunks = 2;                // v tried for the interleaved schedule
};

struct LayoutPlan {
  std::string strategy;
  ParallelRun run;
  double iteration_time_s = 0;
  double throughput_samples_per_s = 0;
  double peak_memory_bytes = 0;
  double bubble_fraction = 0;
  std::vector<int> zdp_layers_per_stage;  // 3d_osdp: layers gathered every pass, per stage
  Mode base_mode = Mode::dp;
};

struct LayoutSearchResult {
  // One entry per strategy, 3d_osdp first; nullopt: no configuration of it fits.
  std::vector<std::pair<std::string, std::optional<LayoutPlan>>> strategies;
  long long evaluations = 0;  // iterations costed
  // When nothing fits at all: the least peak memory seen over every candidate.
  double least_memory_needed_bytes = 0;
};

// The strategies' names, in the order the result lists them.
const std::vector<std::string>& layout_strategy_names();

// Throws InputError when the scenario has no GPT generator or a fixed axis does not divide the
// GPUs (or the heads, or exceeds the layers).
LayoutSearchResult search_layouts(const Scenario& scenario, const LayoutSearchOptions& options);

// The work of search_layouts before it runs, for a work estimate: over every layout and
// micro-batch it may cost (as if all fit), the micro-batches x stages its pipelines' timelines
// hold. A global batch of millions at micro-batch 1 is millions of them for every layout.
double layout_search_passes(const Scenario& scenario, const LayoutSearchOptions& options);

// A layer split that balances the chunks' work: the first chunk also runs the embedding and
// the last the head and loss, `embedding_layers` and `head_layers` layers' worth of time each;
// every chunk keeps at least one layer. (Megatron splits evenly; 3d_osdp tries both.)
std::vector<int> balanced_layer_split(int layers, int chunks, double embedding_layers,
                                      double head_layers);

// DeepSpeed's pipeline partition by parameters (its default): the embedding and the head count
// as the layers' worth of their parameters.
std::vector<int> parameter_layer_split(const Scenario& scenario, const ParallelRun& run);
// The layer splits 3d_osdp tries for a run's chunks, each once: even (Megatron's), balanced
// against the embedding's and the head's compute at the run's micro-batch, and DeepSpeed's.
std::vector<std::vector<int>> layer_splits(const Scenario& scenario, const ParallelRun& run);

// The modes of every operator for a stage assignment: `base` for all, zdp for the first
// `zdp_layers[r]` layers of stage r (both the attention and the MLP of each).
std::vector<Mode> stage_modes(const ParallelIterationCost& shape, Mode base,
                              const std::vector<int>& zdp_layers);

}  // namespace osdp
