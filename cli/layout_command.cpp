// `osdp layout`: the best tensor x pipeline x data layout of a GPT scenario's model on its
// cluster (search/layout_search), with OSDP's data-parallel modes inside each stage, beside the
// 3D baselines under the same model.
//   osdp layout SCENARIO [--tp N] [--pp N] [--schedule 1f1b|gpipe|interleaved]
//               [--memory-limit 40GiB] [--global-batch N] [--gpus N] [--trace FILE] [--simulate]
//               [--json]
#include <fmt/format.h>

#include <chrono>
#include <map>

#include "cli/command.hpp"
#include "cli/format.hpp"
#include "cli/scenario_options.hpp"
#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "model/units.hpp"
#include "search/layout_search.hpp"
#ifdef OSDP_WITH_SIM
#include "sim/pipeline_simulation.hpp"
#endif

namespace osdp::cli {
namespace {

struct LayoutOptions {
  std::string scenario_path;
  std::optional<int> tensor;
  std::optional<int> pipeline;
  std::string schedule;
  std::string memory_limit;
  std::optional<int> global_batch;
  std::optional<int> gpus;
  std::string trace_path;
  bool simulate = false;
  bool json = false;
};

struct Simulated {
  double iteration_time_s = 0;
  double bubble_fraction = 0;
};

// Each fitting strategy's layout run in SimGrid (sim/pipeline_simulation): its transfers and
// data-parallel rings as flows on the topology, the bubble out of the event simulation.
std::map<std::string, Simulated> simulate_layouts(const Scenario& scenario,
                                                  const LayoutSearchResult& result) {
  std::map<std::string, Simulated> simulated;
#ifdef OSDP_WITH_SIM
  for (const auto& [name, plan] : result.strategies) {
    if (!plan) continue;
    const ParallelIterationCost cost =
        parallel_iteration_cost(*scenario.gpt, scenario.training, scenario.cluster, scenario.cost,
                                plan->run, scenario.file);
    const sim::PipelineSimulation run =
        sim::simulate_pipeline(scenario, plan->run, cost, sim::Granularity::automatic);
    simulated[name] = {run.iteration_time_s, run.bubble_fraction};
  }
#else
  (void)scenario;
  (void)result;
  throw InputError("", "--simulate", "given", "no --simulate: this osdp was built without sim/");
#endif
  return simulated;
}

std::string modes_summary(const LayoutPlan& plan) {
  int zdp = 0;
  for (int layers : plan.zdp_layers_per_stage) zdp += layers;
  std::string text(mode_name(plan.base_mode));
  if (zdp > 0) text += fmt::format(" + {} zdp layers", zdp);
  return text;
}

std::string schedule_text(const ParallelRun& run) {
  if (run.degrees.pipeline == 1) return "-";
  if (run.schedule == PipelineSchedule::interleaved) {
    return fmt::format("interleaved v={}", run.chunks_per_stage);
  }
  return std::string(pipeline_schedule_name(run.schedule));
}

Json plan_json(const Scenario& scenario, const std::string& strategy,
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

// The stages of the best plan: what each holds and does.
std::string stage_table(const Scenario& scenario, const LayoutPlan& plan) {
  const ParallelIterationCost cost = parallel_iteration_cost(
      *scenario.gpt, scenario.training, scenario.cluster, scenario.cost, plan.run, scenario.file);
  std::string text =
      fmt::format("\n{:>5} {:>6} {:>11} {:>12} {:>9} {:>12} {:>11} {:>10}\n", "stage", "layers",
                  "parameters", "states", "in flight", "peak memory", "busy", "zdp layers");
  for (std::size_t r = 0; r < cost.stages.size(); ++r) {
    int layers = 0;
    for (const ChunkCost& chunk : cost.chunks) {
      if (chunk.stage == static_cast<int>(r)) layers += chunk.layers;
    }
    const StageCost& stage = cost.stages[r];
    text +=
        fmt::format("{:>5} {:>6} {:>11} {:>12} {:>9} {:>12} {:>11} {:>10}\n", r, layers,
                    format_count(stage.parameters), units::format_bytes(stage.model_state_bytes),
                    stage.peak_in_flight, units::format_bytes(stage.peak_memory_bytes),
                    units::format_seconds(cost.timeline.busy_s[r]), plan.zdp_layers_per_stage[r]);
  }
  text += fmt::format(
      "pipeline {} (bubble {} of the busiest stage's time), then gradients and optimizer step: "
      "iteration {}\n",
      units::format_seconds(cost.pipeline_s), format_percent(cost.timeline.bubble_fraction()),
      units::format_seconds(cost.iteration_time_s));
  return text;
}

int run_layout(const LayoutOptions& options) {
  Scenario scenario = load_checked_scenario(options.scenario_path);
  LayoutSearchOptions search;
  search.tensor = options.tensor;
  search.pipeline = options.pipeline;
  if (!options.schedule.empty()) {
    search.schedule = pipeline_schedule_from_name(options.schedule);
    if (!search.schedule) {
      throw InputError("", "--schedule", options.schedule, "1f1b, gpipe or interleaved");
    }
  }
  if (!options.memory_limit.empty()) {
    search.memory_limit_bytes = parse_bytes_flag("--memory-limit", options.memory_limit);
    check_memory_limit_flag("--memory-limit", options.memory_limit, *search.memory_limit_bytes,
                            scenario);
  }
  if (options.global_batch) {
    if (*options.global_batch < 1) {
      throw InputError("", "--global-batch", std::to_string(*options.global_batch),
                       "a positive number of samples per iteration");
    }
    scenario.training.global_batch_size = *options.global_batch;
  }
  if (!options.trace_path.empty()) {
    if (const auto why = unusable_output(options.trace_path)) {
      throw InputError("", "--trace", options.trace_path, *why);
    }
  }
  if (options.gpus) {
    if (*options.gpus < 1) {
      throw InputError("", "--gpus", std::to_string(*options.gpus), "a positive number of GPUs");
    }
    scenario.cluster = cluster_with_ranks(scenario, *options.gpus);
  }
  const auto started = std::chrono::steady_clock::now();
  const LayoutSearchResult result = search_layouts(scenario, search);
  const double search_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double limit_bytes = search.memory_limit_bytes.value_or(
      scenario.training.memory_limit_bytes.value_or(scenario.cluster.gpu.memory_bytes.value_or(0)));
  const std::optional<LayoutPlan>& best = result.strategies.front().second;
  const std::map<std::string, Simulated> simulated =
      options.simulate ? simulate_layouts(scenario, result) : std::map<std::string, Simulated>{};
  if (best && !options.trace_path.empty()) {
    const ParallelIterationCost cost =
        parallel_iteration_cost(*scenario.gpt, scenario.training, scenario.cluster, scenario.cost,
                                best->run, scenario.file);
    std::vector<double> states;
    for (const StageCost& stage : cost.stages) states.push_back(stage.model_state_bytes);
    std::vector<double> activations;
    for (const ChunkCost& chunk : cost.chunks) activations.push_back(chunk.saved_activation_bytes);
    write_file_atomically(
        options.trace_path,
        pipeline_chrome_trace(cost.timeline,
                              fmt::format("{} x {} x {}", best->run.degrees.tensor,
                                          best->run.degrees.pipeline, best->run.degrees.data),
                              states, activations));
  }

  if (options.json) {
    Json strategies = Json::array();
    for (const auto& [name, plan] : result.strategies) {
      Json entry = plan_json(scenario, name, plan);
      if (const auto it = simulated.find(name); it != simulated.end()) {
        entry["simulated_iteration_time_s"] = it->second.iteration_time_s;
        entry["simulated_bubble_fraction"] = it->second.bubble_fraction;
      }
      strategies.push_back(std::move(entry));
    }
    Json document = {{"scenario", scenario.name},         {"gpus", scenario.cluster.ranks},
                     {"memory_limit_bytes", limit_bytes}, {"strategies", strategies},
                     {"evaluations", result.evaluations}, {"search_time_s", search_s}};
    if (!best) document["least_memory_needed_bytes"] = result.least_memory_needed_bytes;
    fmt::print("{}\n", document.dump(2));
    return best ? exit_ok : exit_infeasible;
  }
  if (!best) {
    fmt::print(stderr,
               "osdp: nothing fits: no 3D layout fits in {} per GPU; the least memory any needs "
               "is {}\n  try --memory-limit {} or more\n",
               units::format_bytes(limit_bytes),
               units::format_bytes(result.least_memory_needed_bytes),
               memory_limit_flag_value(result.least_memory_needed_bytes));
    return exit_infeasible;
  }
  fmt::print(
      "{} on {}: {} GPUs, memory limit {} per GPU{}\n", scenario.workload->name(),
      scenario.cluster.name, scenario.cluster.ranks, units::format_bytes(limit_bytes),
      scenario.training.global_batch_size
          ? fmt::format(", global batch {}", *scenario.training.global_batch_size)
          : fmt::format(", {} micro-batches an iteration", scenario.training.accumulation_steps));
  fmt::print("{} layouts costed in {:.2f} s\n\n", result.evaluations, search_s);
  fmt::print("{:<13} {:>12} {:>15} {:>9} {:>5} {:>22} {:>11} {:>16} {:>11} {:>7}\n", "strategy",
             "tp x pp x dp", "schedule", "micro x m", "ckpt", "data-parallel modes", "iteration",
             "throughput", "peak", "bubble");
  for (const auto& [name, plan] : result.strategies) {
    if (!plan) {
      fmt::print("{:<13} {:>12}\n", name, "does not fit");
      continue;
    }
    const ParallelRun& run = plan->run;
    fmt::print(
        "{:<13} {:>12} {:>15} {:>9} {:>5} {:>22} {:>11} {:>16} {:>11} {:>7}\n", name,
        fmt::format("{} x {} x {}", run.degrees.tensor, run.degrees.pipeline, run.degrees.data),
        schedule_text(run), fmt::format("{} x {}", run.micro_batch, run.micro_batches),
        run.checkpointed_kinds.empty() ? "no" : "yes", modes_summary(*plan),
        units::format_seconds(plan->iteration_time_s),
        format_throughput(plan->throughput_samples_per_s),
        units::format_bytes(plan->peak_memory_bytes), format_percent(plan->bubble_fraction));
  }
  if (!simulated.empty()) {
    fmt::print(
        "\nSimulated (SimGrid: transfers and data-parallel rings as flows on the topology)\n");
    fmt::print("{:<13} {:>11} {:>11} {:>9} {:>7}\n", "strategy", "model", "simulated", "sim/model",
               "bubble");
    for (const auto& [name, plan] : result.strategies) {
      const auto it = simulated.find(name);
      if (!plan || it == simulated.end()) continue;
      fmt::print("{:<13} {:>11} {:>11} {:>+8.1f}% {:>7}\n", name,
                 units::format_seconds(plan->iteration_time_s),
                 units::format_seconds(it->second.iteration_time_s),
                 100.0 * (it->second.iteration_time_s / plan->iteration_time_s - 1.0),
                 format_percent(it->second.bubble_fraction));
    }
  }
  fmt::print("\nBest (3d_osdp), stage by stage:");
  fmt::print("{}", stage_table(scenario, *best));
  return exit_ok;
}

}  // namespace

Subcommand add_layout_command(CLI::App& root) {
  auto options = std::make_shared<LayoutOptions>();
  CLI::App* app = root.add_subcommand(
      "layout",
      "best tensor x pipeline x data layout (3D + OSDP) and the 3D baselines: megatron_tp, "
      "gpipe, deepspeed_3d, fsdp_pp");
  app->add_option("scenario", options->scenario_path, "scenario JSON (a GPT generator model)")
      ->required();
  app->add_option("--tp", options->tensor, "fix the tensor-parallel degree (default: searched)");
  app->add_option("--pp", options->pipeline, "fix the pipeline degree (default: searched)");
  app->add_option("--schedule", options->schedule,
                  "fix the pipeline schedule: 1f1b, gpipe or interleaved (default: searched)");
  app->add_option("--memory-limit", options->memory_limit,
                  "per-GPU memory limit, e.g. 40GiB (default: the scenario's, else the GPU's)");
  app->add_option("--global-batch", options->global_batch,
                  "samples per iteration (default: the scenario's global batch, else micro-batch "
                  "x accumulation steps x data-parallel ranks)");
  app->add_option("--gpus", options->gpus,
                  "the scenario's cluster with this many GPUs: fewer of its node's, or more nodes "
                  "of its kind joined by its NICs (default: the cluster's)");
  app->add_option("--trace", options->trace_path,
                  "write the best layout's pipeline timeline as a Chrome / Perfetto trace (one "
                  "track per stage)");
  app->add_flag("--simulate", options->simulate,
                "also run each strategy's layout in the simulator (SimGrid): its transfers and "
                "data-parallel rings as flows on the topology, sharing links");
  app->add_flag("--json", options->json, "print JSON");
  return {app, [options]() { return run_layout(*options); }};
}

}  // namespace osdp::cli
