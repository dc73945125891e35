#include "search/layout_search.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "model/input_error.hpp"

namespace osdp {

const std::vector<std::string>& layout_strategy_names() {
  static const std::vector<std::string> names = {"3d_osdp", "megatron_tp", "gpipe", "deepspeed_3d",
                                                 "fsdp_pp"};
  return names;
}

std::vector<int> balanced_layer_split(int layers, int chunks, double embedding_layers,
                                      double head_layers) {
  if (chunks <= 1) return {layers};
  // Water-filling: the chunks' loads (their layers plus the edge work) as level as whole layers
  // allow, one layer each at least.
  std::vector<int> split(chunks, 1);
  std::vector<double> load(chunks, 1.0);
  load.front() += embedding_layers;
  load.back() += head_layers;
  for (int left = layers - chunks; left > 0; --left) {
    const auto lightest = std::min_element(load.begin(), load.end()) - load.begin();
    ++split[lightest];
    load[lightest] += 1.0;
  }
  return split;
}

namespace {

// The run's shape with its default split (every operator of one tensor-parallel rank).
ParallelIterationCost run_shape(const Scenario& scenario, const ParallelRun& run) {
  ParallelRun one = run;
  one.modes.clear();
  one.layers_per_chunk.clear();
  return parallel_iteration_cost(*scenario.gpt, scenario.training, scenario.cluster, scenario.cost,
                                 one, scenario.file, PipelineRecord::summary);
}

}  // namespace

std::vector<int> parameter_layer_split(const Scenario& scenario, const ParallelRun& run) {
  const int chunks = run.degrees.pipeline * run.chunks_per_stage;
  if (chunks == 1) return {scenario.gpt->layers};
  const ParallelIterationCost shape = run_shape(scenario, run);
  const Workload& workload = *shape.workload;
  const double layer = workload.op(1).parameter_count + workload.op(2).parameter_count;
  return balanced_layer_split(scenario.gpt->layers, chunks, workload.op(0).parameter_count / layer,
                              workload.op(workload.size() - 1).parameter_count / layer);
}

std::vector<std::vector<int>> layer_splits(const Scenario& scenario, const ParallelRun& run) {
  const int chunks = run.degrees.pipeline * run.chunks_per_stage;
  const std::vector<int> even = even_layer_split(scenario.gpt->layers, chunks);
  if (chunks == 1) return {even};
  const ParallelIterationCost shape = run_shape(scenario, run);
  const CostModel model(*shape.workload, scenario.cluster, scenario.training, scenario.cost);
  auto work_s = [&](int op) {
    return model.forward_compute_s(op).at_real(run.micro_batch) +
           model.backward_compute_s(op).at_real(run.micro_batch);
  };
  const double layer_s = work_s(1) + work_s(2);
  const int head = shape.workload->size() - 1;
  std::vector<std::vector<int>> splits = {even};
  for (const std::vector<int>& split :
       {balanced_layer_split(scenario.gpt->layers, chunks, work_s(0) / layer_s,
                             work_s(head) / layer_s),
        parameter_layer_split(scenario, run)}) {
    if (std::find(splits.begin(), splits.end(), split) == splits.end()) splits.push_back(split);
  }
  return splits;
}

std::vector<Mode> stage_modes(const ParallelIterationCost& shape, Mode base,
                              const std::vector<int>& zdp_layers) {
  std::vector<Mode> modes(shape.workload->size(), base);
  std::vector<int> left = zdp_layers;
  for (const ChunkCost& chunk : shape.chunks) {
    int& remaining = left[chunk.stage];
    for (int op : chunk.ops) {
      const OperatorKind kind = shape.workload->op(op).kind;
      if (kind == OperatorKind::attention) {
        if (remaining <= 0) break;
        --remaining;
        modes[op] = Mode::zdp;
      } else if (kind == OperatorKind::mlp && modes[op - 1] == Mode::zdp) {
        modes[op] = Mode::zdp;
      }
    }
  }
  return modes;
}

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

std::vector<int> divisors(int n) {
  std::vector<int> result;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) result.push_back(d);
  }
  return result;
}

// The micro-batch after `batch`: every one under a fixed global batch (only its divisors count),
// else 1, 2, 3, 4, 6, 8, 12, 16, ... (doubling, with the midpoints), so that a range up to 1024
// costs 19 micro-batches, not 1024.
int next_micro_batch(int batch, bool global_batch) {
  if (global_batch || batch < 4) return batch + 1;
  int power = 1;
  while (power * 2 <= batch) power *= 2;
  return batch == power ? power + power / 2 : 2 * power;
}

// Calls visit(tensor, pipeline) for each tensor x pipeline degree the search tries.
template <typename Visit>
void for_each_axes(const Scenario& scenario, const LayoutSearchOptions& options, Visit visit) {
  const GptSpec& spec = *scenario.gpt;
  const int gpus = scenario.cluster.ranks;
  const int node_gpus = scenario.cluster.topology ? scenario.cluster.topology->node.gpus
                                                  : scenario.cluster.gpus_per_node;
  for (int tensor : divisors(gpus)) {
    if (options.tensor && tensor != *options.tensor) continue;
    if (!options.tensor && (tensor > node_gpus || spec.heads % tensor != 0)) continue;
    for (int pipeline : divisors(gpus / tensor)) {
      if (options.pipeline && pipeline != *options.pipeline) continue;
      if (pipeline > spec.layers) continue;
      visit(tensor, pipeline);
    }
  }
}

// Calls visit(micro_batch, micro_batches) for each micro-batch the search tries on `data`
// data-parallel ranks, in increasing order, while it returns true.
template <typename Visit>
void for_each_micro_batch(const Training& training, int data, Visit visit) {
  for (int batch = training.min_batch_size; batch <= training.max_batch_size;
       batch = next_micro_batch(batch, training.global_batch_size.has_value())) {
    int micro_batches = training.accumulation_steps;
    if (training.global_batch_size) {
      const long long per_step = static_cast<long long>(batch) * data;
      if (*training.global_batch_size % per_step != 0) continue;
      micro_batches = static_cast<int>(*training.global_batch_size / per_step);
    }
    if (!visit(batch, micro_batches)) return;
  }
}

class LayoutSearch {
 public:
  LayoutSearch(const Scenario& scenario, const LayoutSearchOptions& options)
      : scenario_(scenario), options_(options) {
    limit_bytes_ = options.memory_limit_bytes
                       ? *options.memory_limit_bytes
                       : scenario.training.memory_limit_bytes.value_or(
                             scenario.cluster.gpu.memory_bytes.value_or(infinity));
    for (const std::string& name : layout_strategy_names())
      result_.strategies.push_back({name, {}});
    result_.least_memory_needed_bytes = infinity;
  }

  LayoutSearchResult run() {
    for_each_axes(scenario_, options_, [&](int tensor, int pipeline) {
      for (bool checkpoint : {false, true}) search_batches(tensor, pipeline, checkpoint);
    });
    if (result_.least_memory_needed_bytes == infinity) result_.least_memory_needed_bytes = 0;
    return std::move(result_);
  }

 private:
  void search_batches(int tensor, int pipeline, bool checkpoint) {
    const int data = scenario_.cluster.ranks / (tensor * pipeline);
    for_each_micro_batch(scenario_.training, data, [&](int batch, int micro_batches) {
      ParallelRun run;
      run.degrees = {tensor, pipeline, data, 0};
      run.micro_batch = batch;
      run.micro_batches = micro_batches;
      if (checkpoint) run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
      bool any_fits = false;
      for (PipelineSchedule schedule : schedules(pipeline, micro_batches)) {
        run.schedule = schedule;
        run.chunks_per_stage =
            schedule == PipelineSchedule::interleaved ? options_.interleaved_chunks : 1;
        any_fits = search_run(run) || any_fits;
      }
      // Memory grows with the micro-batch: once nothing fits, no larger one will.
      return any_fits;
    });
  }

  std::vector<PipelineSchedule> schedules(int pipeline, int micro_batches) const {
    std::vector<PipelineSchedule> result;
    if (pipeline == 1) return {PipelineSchedule::one_f_one_b};
    for (PipelineSchedule schedule :
         {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe, PipelineSchedule::interleaved}) {
      if (options_.schedule && schedule != *options_.schedule) continue;
      if (schedule == PipelineSchedule::interleaved &&
          (micro_batches % pipeline != 0 ||
           scenario_.gpt->layers < pipeline * options_.interleaved_chunks)) {
        continue;
      }
      result.push_back(schedule);
    }
    return result;
  }

  ParallelIterationCost cost_of(const ParallelRun& run) {
    ++result_.evaluations;
    // Only the figures a plan keeps (time, memory, bubble): no per-pass timeline.
    return parallel_iteration_cost(*scenario_.gpt, scenario_.training, scenario_.cluster,
                                   scenario_.cost, run, scenario_.file, PipelineRecord::summary);
  }

  bool stage_fits(const ParallelIterationCost& cost, int stage) const {
    return cost.stages[stage].peak_memory_bytes <= limit_bytes_;
  }

  bool fits(const ParallelIterationCost& cost) {
    result_.least_memory_needed_bytes =
        std::min(result_.least_memory_needed_bytes, cost.peak_memory_bytes);
    return cost.peak_memory_bytes <= limit_bytes_;
  }

  void offer(const std::string& strategy, const ParallelRun& run, const ParallelIterationCost& cost,
             Mode base, std::vector<int> zdp_layers) {
    const double throughput = cost.samples_per_iteration / cost.iteration_time_s;
    for (auto& [name, best] : result_.strategies) {
      if (name != strategy) continue;
      if (best && best->throughput_samples_per_s >= throughput) return;
      best = LayoutPlan{strategy,
                        run,
                        cost.iteration_time_s,
                        throughput,
                        cost.peak_memory_bytes,
                        cost.timeline.bubble_fraction(),
                        std::move(zdp_layers),
                        base};
    }
  }

  // Every strategy that can run `run` (degrees, batch, schedule, checkpointing set); whether any
  // configuration fitted.
  bool search_run(ParallelRun run) {
    const bool pipelined = run.degrees.pipeline > 1;
    const PipelineSchedule schedule = run.schedule;
    bool any = false;
    const std::vector<int> none(run.degrees.pipeline, 0);
    auto uniform = [&](const std::string& strategy, Mode mode,
                       std::vector<int> split = std::vector<int>{}) {
      run.modes.clear();
      run.layers_per_chunk = std::move(split);
      const ParallelIterationCost shape = cost_of(run);
      run.modes.assign(shape.workload->size(), mode);
      const ParallelIterationCost cost = mode == Mode::dp ? shape : cost_of(run);
      run.layers_per_chunk.clear();
      if (!fits(cost)) return false;
      ParallelRun offered = run;
      offered.layers_per_chunk = shape.chunks.size() > 1 ? layers_of(shape) : std::vector<int>{};
      offer(strategy, offered, cost, mode, none);
      return true;
    };
    // The baselines as their papers run them: Megatron-LM splits tensors (no pipeline), GPipe
    // pipelines (no tensor split); with neither they would be plain DDP.
    if (!pipelined && run.degrees.tensor > 1) any = uniform("megatron_tp", Mode::dp) || any;
    if (run.degrees.tensor == 1 && pipelined && schedule == PipelineSchedule::gpipe) {
      any = uniform("gpipe", Mode::dp) || any;
    }
    if (schedule == PipelineSchedule::one_f_one_b) {
      // DeepSpeed's pipeline engine partitions layers by parameters (its default): the
      // embedding and the head count as the layers' worth of their parameters.
      const std::vector<int> split = parameter_layer_split(scenario_, run);
      any = uniform("deepspeed_3d", Mode::dp, split) || any;
      any = uniform("deepspeed_3d", Mode::z1, split) || any;
    }
    if (schedule != PipelineSchedule::gpipe) any = uniform("fsdp_pp", Mode::z2) || any;
    for (const std::vector<int>& split : layer_splits(scenario_, run)) {
      ParallelRun with_split = run;
      with_split.layers_per_chunk = split;
      for (Mode base : {Mode::dp, Mode::z1, Mode::z2}) any = osdp_stages(with_split, base) || any;
    }
    return any;
  }

  static std::vector<int> layers_of(const ParallelIterationCost& cost) {
    std::vector<int> layers;
    for (const ChunkCost& chunk : cost.chunks) layers.push_back(chunk.layers);
    return layers;
  }

  // 3D + OSDP for one base mode: the fewest zdp layers per stage that make each stage fit.
  bool osdp_stages(ParallelRun run, Mode base) {
    run.modes.clear();
    const ParallelIterationCost shape = cost_of(run);
    const int stages = run.degrees.pipeline;
    std::vector<int> layers(stages, 0);
    for (const ChunkCost& chunk : shape.chunks) layers[chunk.stage] += chunk.layers;
    auto evaluate = [&](const std::vector<int>& zdp) {
      run.modes = stage_modes(shape, base, zdp);
      return cost_of(run);
    };
    // The fewest zdp layers that fit lies in [low, high] per stage. None at all is tried first:
    // the first zdp layer adds its gather buffers to the transient peak, so memory falls with
    // the count only from one layer on.
    std::vector<int> low(stages, 0);
    std::vector<int> high(stages, 0);
    const ParallelIterationCost without = evaluate(high);
    bool all_fit = true;
    for (int r = 0; r < stages; ++r) {
      if (!stage_fits(without, r)) {
        low[r] = 1;
        high[r] = layers[r];
        all_fit = false;
      }
    }
    if (!all_fit) {
      const ParallelIterationCost all_zdp = evaluate(high);
      for (int r = 0; r < stages; ++r) {
        if (low[r] > 0 && !stage_fits(all_zdp, r)) {
          fits(all_zdp);
          return false;
        }
      }
    }
    while (true) {
      std::vector<int> middle(stages);
      bool open = false;
      for (int r = 0; r < stages; ++r) {
        middle[r] = (low[r] + high[r]) / 2;
        open = open || low[r] < high[r];
      }
      if (!open) break;
      const ParallelIterationCost cost = evaluate(middle);
      for (int r = 0; r < stages; ++r) {
        if (low[r] >= high[r]) continue;
        if (stage_fits(cost, r)) {
          high[r] = middle[r];
        } else {
          low[r] = middle[r] + 1;
        }
      }
    }
    // `high` is the fewest zdp layers that fit, per stage; every count from it up fits too.
    std::vector<int> chosen = high;
    ParallelIterationCost best = evaluate(chosen);
    if (!fits(best)) return false;
    // More zdp layers than needed can still be faster: their gathers and reductions run beside
    // the compute every pass, where the base mode's reduction (dp, z1) waits after the
    // pipeline. Pass times only grow with the counts, so this layout can beat the best found only
    // if its passes alone do (a bound: the pipeline less the longest wait for z2's gathers before
    // the first pass, which shrink as layers turn zdp); then each stage's count is improved in
    // turn until none improves (coordinate descent: not proven optimal, see the tests against
    // brute force).
    const std::optional<LayoutPlan>& leader = result_.strategies.front().second;
    double longest_prologue_s = 0;
    for (const StageCost& stage : best.stages) {
      longest_prologue_s = std::max(longest_prologue_s, stage.prologue_s);
    }
    const double passes_s = best.pipeline_s - longest_prologue_s;
    const bool promising =
        !leader || best.samples_per_iteration / passes_s > leader->throughput_samples_per_s;
    // The counts tried per stage: all of them for a few layers; for more, the ends and the knee
    // where the stage's zdp traffic stops hiding behind its compute (its passes' time is flat
    // up to it, found by binary search), beside which the time turns from falling to rising.
    std::vector<std::vector<int>> candidates(stages);
    for (int r = 0; promising && r < stages; ++r) {
      if (layers[r] - high[r] <= exhaustive_layers) {
        for (int count = high[r]; count <= layers[r]; ++count) candidates[r].push_back(count);
        continue;
      }
      auto pass_s = [&](const ParallelIterationCost& cost) {
        double total = 0;
        for (const ChunkCost& chunk : cost.chunks) {
          if (chunk.stage == r) total += chunk.forward_s + chunk.backward_s;
        }
        return total;
      };
      const double flat_s = pass_s(best);
      int flat = high[r];
      int rising = layers[r] + 1;
      while (rising - flat > 1) {
        std::vector<int> trial = chosen;
        trial[r] = (flat + rising) / 2;
        if (pass_s(evaluate(trial)) <= flat_s * (1 + 1e-12)) {
          flat = trial[r];
        } else {
          rising = trial[r];
        }
      }
      for (int count : {high[r], flat, std::min(rising, layers[r]), layers[r]}) {
        if (std::find(candidates[r].begin(), candidates[r].end(), count) == candidates[r].end()) {
          candidates[r].push_back(count);
        }
      }
    }
    for (int sweep = 0; promising && sweep < 3; ++sweep) {
      bool improved = false;
      for (int r = 0; r < stages; ++r) {
        for (int count : candidates[r]) {
          if (count == chosen[r]) continue;
          std::vector<int> trial = chosen;
          trial[r] = count;
          ParallelIterationCost cost = evaluate(trial);
          if (cost.iteration_time_s < best.iteration_time_s * (1 - 1e-12)) {
            chosen = std::move(trial);
            best = std::move(cost);
            improved = true;
          }
        }
      }
      if (!improved) break;
    }
    // The run as chosen (evaluate left the last trial's modes in it).
    run.modes = stage_modes(shape, base, chosen);
    offer("3d_osdp", run, best, base, chosen);
    return true;
  }

  // Stages with at most this many counts above the fewest that fit try every count.
  static constexpr int exhaustive_layers = 8;

  const Scenario& scenario_;
  const LayoutSearchOptions& options_;
  double limit_bytes_ = infinity;
  LayoutSearchResult result_;
};

}  // namespace

double layout_search_passes(const Scenario& scenario, const LayoutSearchOptions& options) {
  if (!scenario.gpt) return 0;
  double passes = 0;
  for_each_axes(scenario, options, [&](int tensor, int pipeline) {
    const int data = scenario.cluster.ranks / (tensor * pipeline);
    for_each_micro_batch(scenario.training, data, [&](int, int micro_batches) {
      // Checkpointed or not, each of the three schedules at most.
      passes += 2.0 * 3.0 * micro_batches * pipeline;
      return true;
    });
  });
  return passes;
}

LayoutSearchResult search_layouts(const Scenario& scenario, const LayoutSearchOptions& options) {
  if (!scenario.gpt) {
    throw InputError(scenario.file, "$.model", "an operator list",
                     "a GPT generator (\"family\": \"gpt\"): 3D layouts split its layers");
  }
  const int gpus = scenario.cluster.ranks;
  if (options.tensor && (*options.tensor < 1 || gpus % *options.tensor != 0 ||
                         scenario.gpt->heads % *options.tensor != 0)) {
    throw InputError(scenario.file, "--tp", std::to_string(*options.tensor),
                     fmt::format("a divisor of the GPUs ({}) and of the attention heads ({})", gpus,
                                 scenario.gpt->heads));
  }
  if (options.pipeline &&
      (*options.pipeline < 1 || gpus % (*options.pipeline * options.tensor.value_or(1)) != 0 ||
       *options.pipeline > scenario.gpt->layers)) {
    throw InputError(scenario.file, "--pp", std::to_string(*options.pipeline),
                     fmt::format("a divisor of the GPUs ({}) over the tensor degree, at most the "
                                 "layers ({})",
                                 gpus, scenario.gpt->layers));
  }
  return LayoutSearch(scenario, options).run();
}

}  // namespace osdp
