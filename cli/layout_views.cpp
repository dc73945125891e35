#include "cli/layout_views.hpp"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "cli/command.hpp"
#include "cli/format.hpp"
#include "cli/validate_layouts.hpp"
#include "cli/work_guard.hpp"
#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "model/units.hpp"
#ifdef OSDP_WITH_SIM
#include "sim/options.hpp"
#include "sim/pipeline_simulation.hpp"
#endif

namespace osdp::cli {
namespace {

constexpr const char* command_line = "command line";

std::optional<int> parse_degree(const std::string& flag, const std::string& text) {
  if (text.empty() || text == "auto") return std::nullopt;
  std::size_t used = 0;
  int degree = 0;
  try {
    degree = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  constexpr int max_degree = 1 << 20;  // a typo long before a cluster
  if (used != text.size() || degree < 1 || degree > max_degree) {
    throw InputError(command_line, flag, text,
                     fmt::format("auto or a degree from 1 to {}", max_degree));
  }
  return degree;
}

}  // namespace

void add_layout_flags(CLI::App& app, LayoutFlags& flags) {
  app.add_option("--tp", flags.tensor,
                 "Plan a 3D layout (tensor x pipeline x data) with this tensor-parallel degree, "
                 "or auto (searched); any of --tp, --pp, --schedule switches to 3D layouts, as "
                 "`osdp layout` plans them");
  app.add_option("--pp", flags.pipeline,
                 "Plan a 3D layout with this pipeline degree, or auto (searched)");
  app.add_option("--schedule", flags.schedule,
                 "Plan a 3D layout with this pipeline schedule: 1f1b, gpipe, interleaved, or "
                 "auto (searched)");
}

bool layout_requested(const LayoutFlags& flags) {
  return !flags.tensor.empty() || !flags.pipeline.empty() || !flags.schedule.empty();
}

LayoutSearchOptions layout_search_options(const LayoutFlags& flags) {
  LayoutSearchOptions options;
  options.tensor = parse_degree("--tp", flags.tensor);
  options.pipeline = parse_degree("--pp", flags.pipeline);
  if (!flags.schedule.empty() && flags.schedule != "auto") {
    options.schedule = pipeline_schedule_from_name(flags.schedule);
    if (!options.schedule) {
      throw InputError(command_line, "--schedule", flags.schedule,
                       "1f1b, gpipe, interleaved or auto");
    }
    // A schedule orders a pipeline's stages: with one stage it would be dropped unseen.
    if (options.pipeline && *options.pipeline == 1) {
      throw InputError(command_line, "--schedule", flags.schedule,
                       "no --schedule with --pp 1 (one stage has no pipeline schedule), or a "
                       "--pp above 1");
    }
  }
  return options;
}

void refuse_data_parallel_flags(const ScenarioOptions& options) {
  const auto given = overrides_given(options, true);
  if (!given.empty()) {
    throw InputError(command_line, given.front().first, given.front().second,
                     "no data-parallel search flag with --tp, --pp or --schedule: a 3D layout "
                     "search chooses the modes inside each stage and checkpointing itself");
  }
}

std::unique_ptr<const Scenario> load_for_layouts(const ScenarioOptions& options) {
  refuse_data_parallel_flags(options);
  ScenarioOptions for_layouts = options;
  for_layouts.layouts = true;
  return load_with_overrides(for_layouts);
}

LayoutSearchRun run_layout_search(const Scenario& scenario, const LayoutSearchOptions& options,
                                  bool force, int repetitions) {
  refuse_unless_forced(layout_search_work(scenario, options, repetitions), force);
  const auto started = std::chrono::steady_clock::now();
  LayoutSearchRun run{search_layouts(scenario, options), 0, 0};
  if (run.result.evaluations == 0) {
    // Nothing to cost: no micro-batch of the range splits the batch over any data-parallel
    // degree the axes allow. Bad input (exit 2), not a memory verdict with no memory in it.
    const std::string batch =
        scenario.training.global_batch_size
            ? fmt::format("a global batch of {}", *scenario.training.global_batch_size)
            : fmt::format("{} micro-batch{} an iteration (no global batch)",
                          scenario.training.accumulation_steps,
                          scenario.training.accumulation_steps == 1 ? "" : "es");
    throw InputError(command_line, "--global-batch, --micro-batch, --tp, --pp, --schedule",
                     batch + ", which no layout of these axes can run",
                     "a global batch that micro-batch x data-parallel degree splits into "
                     "micro-batches the schedule can run (interleaved: a multiple of the "
                     "pipeline stages), e.g. --global-batch 256");
  }
  run.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.memory_limit_bytes = options.memory_limit_bytes.value_or(
      scenario.training.memory_limit_bytes.value_or(scenario.cluster.gpu.memory_bytes.value_or(0)));
  return run;
}

ParallelIterationCost layout_cost(const Scenario& scenario, const LayoutPlan& plan) {
  return parallel_iteration_cost(*scenario.gpt, scenario.training, scenario.cluster, scenario.cost,
                                 plan.run, scenario.file);
}

std::map<std::string, SimulatedLayout> simulate_layouts(const Scenario& scenario,
                                                        const LayoutSearchResult& result,
                                                        const std::string& flag, bool force) {
  std::map<std::string, SimulatedLayout> simulated;
#ifdef OSDP_WITH_SIM
  (void)flag;  // names the flag only where the simulator is missing
  const sim::SimOptions options = sim::read_sim_options(scenario.simulation, scenario.file);
  const WorkDeadline deadline = work_deadline(force);
  for (const auto& [name, plan] : result.strategies) {
    if (!plan) continue;
    try {
      const sim::PipelineSimulation run =
          sim::simulate_pipeline(scenario, plan->run, layout_cost(scenario, *plan),
                                 options.granularity, options.network, deadline.at);
      simulated[name] = {run.iteration_time_s, run.bubble_fraction};
    } catch (const sim::DeadlinePassed&) {
      refuse_overrun(
          fmt::format("{}: the simulations of the layouts ({} done)", flag, simulated.size()),
          deadline);
    }
  }
#else
  (void)scenario;
  (void)result;
  (void)force;
  throw InputError(command_line, flag, "given",
                   "no " + flag + ": this osdp was built without sim/");
#endif
  return simulated;
}

std::string degrees_text(const ParallelRun& run) {
  return fmt::format("{} x {} x {}", run.degrees.tensor, run.degrees.pipeline, run.degrees.data);
}

std::string schedule_text(const ParallelRun& run) {
  if (run.degrees.pipeline == 1) return "-";
  if (run.schedule == PipelineSchedule::interleaved) {
    return fmt::format("interleaved v={}", run.chunks_per_stage);
  }
  return std::string(pipeline_schedule_name(run.schedule));
}

std::string modes_summary(const LayoutPlan& plan) {
  int zdp = 0;
  for (int layers : plan.zdp_layers_per_stage) zdp += layers;
  std::string text(mode_name(plan.base_mode));
  if (zdp > 0) text += fmt::format(" + {} zdp layers", zdp);
  return text;
}

Json layout_plan_json(const Scenario& scenario, const std::string& strategy,
                      const std::optional<LayoutPlan>& plan) {
  if (!plan) return {{"strategy", strategy}, {"fits", false}};
  const ParallelRun& run = plan->run;
  return {{"strategy", strategy},
          {"fits", true},
          {"tensor_parallelism", run.degrees.tensor},
          {"pipeline_parallelism", run.degrees.pipeline},
          {"data_parallelism", run.degrees.data},
          {"schedule", pipeline_schedule_name(run.schedule)},
          {"chunks_per_stage", run.chunks_per_stage},
          {"micro_batch", run.micro_batch},
          {"micro_batches", run.micro_batches},
          {"checkpoint", !run.checkpointed_kinds.empty()},
          {"layers_per_chunk",
           run.layers_per_chunk.empty()
               ? even_layer_split(scenario.gpt->layers, run.degrees.pipeline * run.chunks_per_stage)
               : run.layers_per_chunk},
          {"base_mode", mode_name(plan->base_mode)},
          {"zdp_layers_per_stage", plan->zdp_layers_per_stage},
          {"iteration_time_s", plan->iteration_time_s},
          {"throughput_samples_per_s", plan->throughput_samples_per_s},
          {"peak_memory_bytes", plan->peak_memory_bytes},
          {"bubble_fraction", plan->bubble_fraction}};
}

Json layout_search_json(const Scenario& scenario, const LayoutSearchRun& run,
                        const std::map<std::string, SimulatedLayout>& simulated) {
  Json strategies = Json::array();
  for (const auto& [name, plan] : run.result.strategies) {
    Json entry = layout_plan_json(scenario, name, plan);
    // On CPU clusters: the `osdp validate --layouts` item that trains it, or why none does.
    if (plan && scenario.cluster.host_cores) {
      const RuntimeLayoutItem runtime = runtime_layout_item(scenario, *plan);
      entry["runtime_layout"] = runtime.item.empty() ? Json() : Json(runtime.item);
      if (runtime.item.empty()) entry["runtime_layout_missing"] = runtime.why_not;
    }
    if (const auto it = simulated.find(name); it != simulated.end()) {
      entry["simulated_iteration_time_s"] = it->second.iteration_time_s;
      entry["simulated_bubble_fraction"] = it->second.bubble_fraction;
    }
    strategies.push_back(std::move(entry));
  }
  Json document = {{"scenario", scenario.name},
                   {"gpus", scenario.cluster.ranks},
                   {"memory_limit_bytes", run.memory_limit_bytes},
                   {"strategies", strategies},
                   {"evaluations", run.result.evaluations},
                   {"search_time_s", run.search_s}};
  if (!run.result.strategies.front().second) {
    document["least_memory_needed_bytes"] = run.result.least_memory_needed_bytes;
  }
  return document;
}

int stage_layer_count(const ParallelIterationCost& cost, int stage) {
  int layers = 0;
  for (const ChunkCost& chunk : cost.chunks) {
    if (chunk.stage == stage) layers += chunk.layers;
  }
  return layers;
}

Json layout_stages_json(const ParallelIterationCost& cost, const LayoutPlan& plan) {
  Json stages = Json::array();
  for (std::size_t r = 0; r < cost.stages.size(); ++r) {
    const StageCost& stage = cost.stages[r];
    stages.push_back({{"stage", r},
                      {"layers", stage_layer_count(cost, static_cast<int>(r))},
                      {"parameters", stage.parameters},
                      {"model_state_bytes", stage.model_state_bytes},
                      {"activation_bytes", stage.activation_bytes},
                      {"micro_batches_in_flight", stage.peak_in_flight},
                      {"transient_bytes", stage.transient_bytes},
                      {"peak_memory_bytes", stage.peak_memory_bytes},
                      {"busy_s", cost.timeline.busy_s[r]},
                      {"idle_s", cost.pipeline_s - cost.timeline.busy_s[r]},
                      {"finish_s", cost.timeline.finish_s[r]},
                      {"gradient_reduce_s", stage.gradient_reduce_s},
                      {"optimizer_step_s", stage.optimizer_step_s},
                      {"zdp_layers", plan.zdp_layers_per_stage[r]}});
  }
  return stages;
}

std::string stage_table(const Scenario& scenario, const LayoutPlan& plan) {
  const ParallelIterationCost cost = layout_cost(scenario, plan);
  std::string text =
      fmt::format("\n{:>5} {:>6} {:>11} {:>12} {:>9} {:>12} {:>11} {:>10}\n", "stage", "layers",
                  "parameters", "states", "in flight", "peak memory", "busy", "zdp layers");
  for (std::size_t r = 0; r < cost.stages.size(); ++r) {
    const StageCost& stage = cost.stages[r];
    text +=
        fmt::format("{:>5} {:>6} {:>11} {:>12} {:>9} {:>12} {:>11} {:>10}\n", r,
                    stage_layer_count(cost, static_cast<int>(r)), format_count(stage.parameters),
                    units::format_bytes(stage.model_state_bytes), stage.peak_in_flight,
                    units::format_bytes(stage.peak_memory_bytes),
                    units::format_seconds(cost.timeline.busy_s[r]), plan.zdp_layers_per_stage[r]);
  }
  text += fmt::format(
      "pipeline {} (bubble {} of the busiest stage's time), then gradients and optimizer step: "
      "iteration {}\n",
      units::format_seconds(cost.pipeline_s), format_percent(cost.timeline.bubble_fraction()),
      units::format_seconds(cost.iteration_time_s));
  return text;
}

std::string layout_search_report(const Scenario& scenario, const LayoutSearchRun& run,
                                 const std::map<std::string, SimulatedLayout>& simulated) {
  std::string text = fmt::format(
      "{} on {}: {} GPUs, memory limit {} per GPU{}\n", scenario.workload->name(),
      scenario.cluster.name, scenario.cluster.ranks, units::format_bytes(run.memory_limit_bytes),
      scenario.training.global_batch_size
          ? fmt::format(", global batch {}", *scenario.training.global_batch_size)
          : fmt::format(", {} micro-batches an iteration", scenario.training.accumulation_steps));
  text += fmt::format("{} layouts costed in {:.2f} s\n\n", run.result.evaluations, run.search_s);
  text += fmt::format("{:<13} {:>12} {:>15} {:>9} {:>5} {:>22} {:>11} {:>16} {:>11} {:>7}\n",
                      "strategy", "tp x pp x dp", "schedule", "micro x m", "ckpt",
                      "data-parallel modes", "iteration", "throughput", "peak", "bubble");
  for (const auto& [name, plan] : run.result.strategies) {
    if (!plan) {
      text += fmt::format("{:<13} {:>12}\n", name, "does not fit");
      continue;
    }
    const ParallelRun& layout = plan->run;
    text += fmt::format("{:<13} {:>12} {:>15} {:>9} {:>5} {:>22} {:>11} {:>16} {:>11} {:>7}\n",
                        name, degrees_text(layout), schedule_text(layout),
                        fmt::format("{} x {}", layout.micro_batch, layout.micro_batches),
                        layout.checkpointed_kinds.empty() ? "no" : "yes", modes_summary(*plan),
                        units::format_seconds(plan->iteration_time_s),
                        format_throughput(plan->throughput_samples_per_s),
                        units::format_bytes(plan->peak_memory_bytes),
                        format_percent(plan->bubble_fraction));
  }
  if (!simulated.empty()) {
    text += "\nSimulated (SimGrid: transfers and data-parallel rings as flows on the topology)\n";
    text += fmt::format("{:<13} {:>11} {:>11} {:>9} {:>7}\n", "strategy", "model", "simulated",
                        "sim/model", "bubble");
    for (const auto& [name, plan] : run.result.strategies) {
      const auto it = simulated.find(name);
      if (!plan || it == simulated.end()) continue;
      text += fmt::format("{:<13} {:>11} {:>11} {:>+8.1f}% {:>7}\n", name,
                          units::format_seconds(plan->iteration_time_s),
                          units::format_seconds(it->second.iteration_time_s),
                          100.0 * (it->second.iteration_time_s / plan->iteration_time_s - 1.0),
                          format_percent(it->second.bubble_fraction));
    }
  }
  text += "\nBest (3d_osdp), stage by stage:";
  const LayoutPlan& best = *run.result.strategies.front().second;
  text += stage_table(scenario, best);
  // On CPU ranks the runtime can train the best layout for real.
  if (scenario.cluster.host_cores) {
    const RuntimeLayoutItem runtime = runtime_layout_item(scenario, best);
    text += runtime.item.empty()
                ? fmt::format("not run by `osdp validate --layouts` yet: {}\n", runtime.why_not)
                : fmt::format(
                      "train it for real on CPU ranks: osdp validate {} --layouts {} "
                      "--batch {}\n",
                      scenario.file, runtime.item, best.run.micro_batch);
  }
  return text;
}

std::string no_layout_fits(const Scenario& scenario, const LayoutSearchRun& run) {
  const double needed = run.result.least_memory_needed_bytes;
  const std::string intro = fmt::format("nothing fits: no 3D layout fits in {} per GPU",
                                        units::format_bytes(run.memory_limit_bytes));
  std::string message = fmt::format("{}; the least memory any needs is {}", intro,
                                    units::format_bytes_above(needed, run.memory_limit_bytes));
  const std::optional<double>& gpu_memory = scenario.cluster.gpu.memory_bytes;
  if (gpu_memory && needed > *gpu_memory) {
    return message +
           fmt::format(
               "\n  that is more than the GPU's {}: more GPUs, a smaller micro-batch or a "
               "shorter sequence (the search already tries checkpointing)",
               units::format_bytes(*gpu_memory));
  }
  return message +
         fmt::format("\n  try --memory-limit {} or more", memory_limit_flag_value(needed));
}

int report_no_layout_fits(const Scenario& scenario, const LayoutSearchRun& run) {
  fmt::print(stderr, "osdp: {}\n", no_layout_fits(scenario, run));
  return exit_infeasible;
}

std::string layout_trace(const Scenario& scenario, const LayoutPlan& plan) {
  return layout_trace(layout_cost(scenario, plan), plan.run);
}

std::string layout_trace(const ParallelIterationCost& cost, const ParallelRun& run) {
  std::vector<double> states;
  std::vector<double> synchronised_s;
  for (std::size_t r = 0; r < cost.stages.size(); ++r) {
    states.push_back(cost.stages[r].model_state_bytes);
    synchronised_s.push_back(cost.timeline.finish_s[r] + cost.stages[r].gradient_reduce_s);
  }
  std::vector<double> activations;
  for (const ChunkCost& chunk : cost.chunks) activations.push_back(chunk.saved_activation_bytes);
  return pipeline_chrome_trace(cost.timeline, degrees_text(run), states, activations,
                               synchronised_s);
}

void check_trace_path(const std::string& path) {
  if (path.empty()) return;
  if (const auto why = unusable_output(path)) {
    throw InputError(command_line, "--trace", path,
                     "a file path osdp can write to (this is " + *why + ")");
  }
}

}  // namespace osdp::cli
