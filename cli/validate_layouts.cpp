#include "cli/validate_layouts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <set>

#include "cli/layout_views.hpp"
#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "model/parallel_iteration.hpp"
#include "search/layout_search.hpp"

namespace osdp::cli {
namespace {

std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

// "12" -> 12; 0 unless 1..4096 in plain digits (an int, not an optional: GCC 12 warns of
// optionals it thinks uninitialized on the throwing paths of the callers).
int small_count(const std::string& digits) {
  if (digits.empty() || digits.size() > 4 ||
      !std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }))
    return 0;
  const int value = std::stoi(digits);
  return value >= 1 && value <= 4096 ? value : 0;
}

struct Axes {
  int tensor = 1;
  int pipeline = 1;
  int data = 0;  // 0: the ranks left
};

// "tp2xpp2" -> {2, 2, 0}; false when an axis is not tp<N>, pp<N> or dp<N>. (Not an optional:
// GCC 12 then warns of an uninitialized member on the throwing paths.)
bool parse_axes(const std::string& text, Axes& axes) {
  std::set<std::string> named;
  for (const std::string& axis : split_on(text, 'x')) {
    const int degree = axis.size() > 2 ? small_count(axis.substr(2)) : 0;
    const std::string name = axis.substr(0, 2);
    if (degree == 0 || !named.insert(name).second) return false;  // "tp2xtp2": which degree?
    if (name == "tp") {
      axes.tensor = degree;
    } else if (name == "pp") {
      axes.pipeline = degree;
    } else if (name == "dp") {
      axes.data = degree;
    } else {
      return false;
    }
  }
  return true;
}

// The error for a layout item: `why`, or (empty) what an item looks like.
InputError layout_error(const std::string& flag, const std::string& item, const std::string& why) {
  return InputError("command line", flag, item,
                    why.empty() ? "a layout such as tp2, pp2:gpipe:m4, pp2:interleaved:v2:m4 or "
                                  "tp2xdp2:z1 (axes tp<N>, pp<N>, dp<N> joined by x, then "
                                  ":gpipe, :1f1b or :interleaved with :v<chunks per stage>, "
                                  ":m<micro-batches>, :z1 or :z2 for ZeRO-1 or ZeRO-2 in "
                                  "the data-parallel group, :zdp<K> for 3D + OSDP: the "
                                  "first K layers of every stage ZDP, the rest z2 (or :dp, "
                                  ":z1 where given), :sp for "
                                  "sequence parallelism and :ckpt to recompute every layer's "
                                  "attention and MLP in backward)"
                                : why);
}

// v: the stated chunks per stage (0: none stated), 2 by default when interleaved and 1
// otherwise; refused where the interleaved schedule cannot run (`refuse` makes the error).
template <typename Refuse>
int chunks_per_stage_of(const Refuse& refuse, const ParallelRun& run, int stated, int layers) {
  const int pipeline = run.degrees.pipeline;
  if (run.schedule != PipelineSchedule::interleaved) {
    if (stated > 0) throw refuse("v<chunks per stage> with :interleaved only");
    return 1;
  }
  const int v = stated > 0 ? stated : 2;
  if (pipeline < 2 || v < 2) {
    throw refuse(
        "an interleaved schedule of at least 2 pipeline stages and v2 or more chunks "
        "per stage (v1 is 1f1b)");
  }
  if (run.micro_batches % pipeline != 0) {
    throw refuse(
        fmt::format("micro-batches that are a multiple of the {} pipeline stages under "
                    "the interleaved schedule (here m{})",
                    pipeline, run.micro_batches));
  }
  if (pipeline * v > layers) {
    throw refuse(fmt::format("at most {} model chunks (pp x v, here {}) for the model's {} layers",
                             layers, pipeline * v, layers));
  }
  return v;
}

ParallelRun parse_layout(const std::string& flag, const std::string& item, int ranks,
                         int micro_batch, const Scenario& scenario) {
  const int layers = scenario.gpt->layers;
  auto refuse = [&flag, &item](const std::string& why) { return layout_error(flag, item, why); };
  const std::vector<std::string> parts = split_on(item, ':');
  ParallelRun run;
  Axes axes;
  if (!parse_axes(parts.front(), axes)) throw refuse("");
  const int tensor = axes.tensor;
  const int pipeline = axes.pipeline;
  const int data_degree = axes.data > 0 ? axes.data : ranks / std::max(1, tensor * pipeline);
  int micro_batches = 0;     // 0: the default
  int chunks_per_stage = 0;  // 0: the default
  std::optional<Mode> data_mode;
  int zdp_layers_per_stage = 0;
  // Each kind of modifier once: "pp2:gpipe:1f1b" or "tp2:sp:sp" leave unclear what runs.
  std::set<std::string> given;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& token = parts[i];
    const int count = token.size() > 1 ? small_count(token.substr(1)) : 0;
    const int zdp_count = token.rfind("zdp", 0) == 0 ? small_count(token.substr(3)) : 0;
    const std::string kind = token == "z1" || token == "z2" || token == "dp"
                                 ? "a data-parallel mode"
                             : zdp_count > 0                      ? ":zdp<K>"
                             : pipeline_schedule_from_name(token) ? "a schedule"
                             : token[0] == 'm' && count > 0       ? ":m<micro-batches>"
                             : token[0] == 'v' && count > 0       ? ":v<chunks>"
                                                                  : ":" + token;
    if (!given.insert(kind).second) {
      throw refuse(fmt::format("each modifier once ({} is given twice)", kind));
    }
    if (zdp_count > layers) {
      throw refuse(fmt::format(":zdp<K> with K at most the model's {} layers", layers));
    }
    if (token == "z1" || token == "z2" || token == "dp") {
      data_mode = mode_from_name(token);
    } else if (token == "sp") {
      run.sequence_parallel = true;
    } else if (token == "ckpt") {
      run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
    } else if (zdp_count > 0) {
      zdp_layers_per_stage = zdp_count;
    } else if (const auto schedule = pipeline_schedule_from_name(token)) {
      run.schedule = *schedule;
    } else if (token[0] == 'm' && count > 0) {
      micro_batches = count;
    } else if (token[0] == 'v' && count > 0) {
      chunks_per_stage = count;
    } else {
      throw refuse("");
    }
  }
  if (ranks % (tensor * pipeline) != 0) {
    throw refuse(fmt::format("tensor x pipeline degrees that divide the {} ranks", ranks));
  }
  if (tensor * pipeline * data_degree != ranks) {
    throw refuse(fmt::format("tp x pp x dp = the {} ranks (here {})", ranks,
                             tensor * pipeline * data_degree));
  }
  if (run.sequence_parallel && tensor < 2) {
    throw refuse(
        ":sp with a tensor-parallel degree of 2 or more (sequence parallelism splits "
        "the sequence over the tensor ranks)");
  }
  if (run.sequence_parallel && scenario.gpt->sequence_length % tensor != 0) {
    throw refuse(fmt::format(":sp with a tensor degree that divides the sequence of {}",
                             scenario.gpt->sequence_length));
  }
  if (pipeline > layers + 2) {
    throw refuse(
        fmt::format("at most {} pipeline stages (the model's {} layers, embedding and "
                    "head)",
                    layers + 2, layers));
  }
  run.degrees = {tensor, pipeline, data_degree};
  run.micro_batch = micro_batch;
  run.micro_batches = micro_batches > 0 ? micro_batches : (pipeline > 1 ? 2 * pipeline : 1);
  run.chunks_per_stage = chunks_per_stage_of(refuse, run, chunks_per_stage, layers);
  // The model's split, stated, so that the runtime runs the chunks the model costs.
  run.layers_per_chunk = even_layer_split(layers, pipeline * run.chunks_per_stage);
  // As the runtime transfers: each tensor rank sends its whole activation to its peer of the
  // next stage, and a send returns at once (only receives wait).
  run.scatter_gather_transfers = false;
  run.blocking_transfers = false;
  // ZeRO-1 (DeepSpeed 3D) or ZeRO-2 (FSDP + PP) inside the layout: every operator of the
  // tensor-parallel GPT (embedding, attention and MLP per layer, head) in that mode, as the
  // runtime shards them.
  if (data_mode == Mode::z1 || data_mode == Mode::z2) run.modes.assign(2 * layers + 2, *data_mode);
  // 3D + OSDP as the layout search writes it: the stated mode (z2 unless :dp or :z1) for the
  // embedding, the head and the other layers, ZDP for the first K layers of every stage (a
  // stage with fewer: all of them).
  if (zdp_layers_per_stage > 0) {
    if (data_degree < 2) throw refuse(":zdp<K> with a data-parallel degree of 2 or more");
    const ParallelIterationCost shape = parallel_iteration_cost(
        *scenario.gpt, scenario.training, scenario.cluster, scenario.cost, run, flag);
    run.modes = stage_modes(shape, data_mode.value_or(Mode::z2),
                            std::vector<int>(pipeline, zdp_layers_per_stage));
  }
  return run;
}

std::string run_name(std::string item) {
  std::replace(item.begin(), item.end(), ':', '-');
  return item;
}

}  // namespace

std::vector<validate::PlanRun> parse_layouts(const std::string& flag, const std::string& text,
                                             const Scenario& scenario, int ranks, int micro_batch) {
  if (!scenario.gpt) {
    throw InputError(scenario.file, "$.model", "an operator list",
                     "a generated GPT model for tensor and pipeline layouts");
  }
  std::vector<validate::PlanRun> runs;
  std::set<std::string> listed;
  for (const std::string& item : split_on(text, ',')) {
    if (item.empty()) throw InputError("command line", flag, text, "no empty layout in the list");
    if (!listed.insert(item).second) {
      throw InputError("command line", flag, text,
                       "each layout once (" + item + " is listed twice: it would run twice)");
    }
    validate::PlanRun run;
    run.name = run_name(item);
    run.layout = parse_layout(flag, item, ranks, micro_batch, scenario);
    run.plan.batch_size = micro_batch;
    runs.push_back(std::move(run));
  }
  return runs;
}

validate::SimulatedFigures predict_layout(const Scenario& scenario, const ParallelRun& run,
                                          const std::string& source,
                                          const std::string& trace_path) {
  const ParallelIterationCost cost = parallel_iteration_cost(
      *scenario.gpt, scenario.training, scenario.cluster, scenario.cost, run, source);
  if (!trace_path.empty()) write_file_atomically(trace_path, layout_trace(cost, run));
  // Each stage's compute: its chunks' passes, m times, without their tensor-parallel sums and
  // without the time they waited for the data-parallel stream (what is left: the operators'
  // compute, slowed where the stream shares its cores, and each pass's fixed cost).
  std::vector<double> compute_by_stage(run.degrees.pipeline, 0.0);
  for (const ChunkCost& chunk : cost.chunks) {
    compute_by_stage[chunk.stage] +=
        run.micro_batches *
        (chunk.forward_s - chunk.forward_communication_s - chunk.forward_stream_wait_s +
         chunk.backward_s - chunk.backward_communication_s - chunk.backward_stream_wait_s);
  }
  // On shared cores a stage computes faster while the others wait (PipelineWork's rates): its
  // passes as the timeline ran them over what they take with every stage busy.
  const PipelineTimeline& timeline = cost.timeline;
  for (std::size_t stage = 0; stage < compute_by_stage.size(); ++stage) {
    if (stage < timeline.work_s.size() && timeline.work_s[stage] > 0) {
      compute_by_stage[stage] *= timeline.busy_s[stage] / timeline.work_s[stage];
    }
  }
  // The measured figure is the slowest rank's wait, the rank with the least compute: so is this
  // one (a stage's idle time in the bubble counts, as the runtime's ranks wait in receives).
  double least_busy_s = std::numeric_limits<double>::infinity();
  for (std::size_t stage = 0; stage < cost.stages.size(); ++stage) {
    least_busy_s =
        std::min(least_busy_s, compute_by_stage[stage] + cost.stages[stage].optimizer_step_s);
  }
  validate::SimulatedFigures figures;
  figures.iteration_time_s = cost.iteration_time_s;
  figures.peak_memory_bytes = cost.peak_memory_bytes;
  figures.exposed_communication_s =
      cost.stages.empty() ? 0.0 : std::max(0.0, cost.iteration_time_s - least_busy_s);
  // Per stage: its peak, and its time outside passes between the pipeline's first pass and its
  // last (waiting for its neighbours' passes and the transfers: what the runtime's ranks spend
  // in receives).
  const double span_s = timeline.makespan_s - timeline.first_start_s;
  for (std::size_t stage = 0; stage < cost.stages.size(); ++stage) {
    const double busy_s = stage < timeline.busy_s.size() ? timeline.busy_s[stage] : span_s;
    figures.stages.push_back({cost.stages[stage].peak_memory_bytes,
                              run.degrees.pipeline > 1 ? std::max(0.0, span_s - busy_s) : 0.0});
  }
  return figures;
}

RuntimeLayoutItem runtime_layout_item(const Scenario& scenario, const LayoutPlan& plan) {
  const ParallelRun& run = plan.run;
  RuntimeLayoutItem result;
  if (!scenario.gpt) return {"", "an operator-list model (the runtime trains generated GPTs)"};
  const std::vector<OperatorKind> layers_checkpointed{OperatorKind::attention, OperatorKind::mlp};
  if (!run.checkpointed_kinds.empty() && run.checkpointed_kinds != layers_checkpointed) {
    return {"", "checkpointing some of a layer's operators (the runtime recomputes both)"};
  }
  const int layers = scenario.gpt->layers;
  const int chunks = run.degrees.pipeline * run.chunks_per_stage;
  if (!run.layers_per_chunk.empty() && run.layers_per_chunk != even_layer_split(layers, chunks)) {
    return {"", "an uneven split of the layers over the stages"};
  }
  std::string token;
  const bool uniform =
      run.modes.empty() || std::all_of(run.modes.begin(), run.modes.end(),
                                       [&](Mode mode) { return mode == run.modes.front(); });
  if (uniform) {
    const Mode mode = run.modes.empty() ? Mode::dp : run.modes.front();
    if (mode == Mode::z1 || mode == Mode::z2) token = fmt::format(":{}", mode_name(mode));
    if (mode == Mode::zdp) {
      return {"", "every operator ZDP (the runtime keeps the embedding and the head z2)"};
    }
  } else {
    const std::vector<int>& counts = plan.zdp_layers_per_stage;
    const bool same_count =
        !counts.empty() && std::all_of(counts.begin(), counts.end(),
                                       [&](int count) { return count == counts.front(); });
    if (!same_count || counts.front() < 1) return {"", "different ZDP layer counts per stage"};
    // z2 is the ZDP layers' default company.
    if (plan.base_mode != Mode::z2) token = fmt::format(":{}", mode_name(plan.base_mode));
    token += fmt::format(":zdp{}", counts.front());
  }
  std::string axes;
  for (const auto& [name, degree] :
       {std::pair{"tp", run.degrees.tensor}, std::pair{"pp", run.degrees.pipeline},
        std::pair{"dp", run.degrees.data}}) {
    if (degree == 1) continue;
    axes += fmt::format("{}{}{}", axes.empty() ? "" : "x", name, degree);
  }
  if (axes.empty()) axes = "dp1";
  std::string schedule;
  if (run.degrees.pipeline > 1) {
    schedule = fmt::format(":{}", pipeline_schedule_name(run.schedule));
    if (run.schedule == PipelineSchedule::interleaved) {
      schedule += fmt::format(":v{}", run.chunks_per_stage);
    }
  }
  if (run.sequence_parallel && run.degrees.tensor > 1) token += ":sp";
  if (!run.checkpointed_kinds.empty()) token += ":ckpt";
  result.item = fmt::format("{}{}:m{}{}", axes, schedule, run.micro_batches, token);
  return result;
}

}  // namespace osdp::cli
