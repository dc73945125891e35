// `osdp layout`: the best tensor x pipeline x data layout of a GPT scenario's model on its
// cluster (search/layout_search), with OSDP's data-parallel modes inside each stage, beside the
// 3D baselines under the same model.
//   osdp layout SCENARIO [--tp N|auto] [--pp N|auto] [--schedule 1f1b|gpipe|interleaved|auto]
//               [--memory-limit 40GiB] [--global-batch N] [--gpus N] [--trace FILE] [--simulate]
//               [--json]
#include <fmt/format.h>

#include <map>

#include "cli/command.hpp"
#include "cli/layout_views.hpp"
#include "cli/scenario_options.hpp"
#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "model/measured_runs.hpp"

namespace osdp::cli {
namespace {

struct LayoutOptions {
  std::string scenario_path;
  LayoutFlags axes;
  std::string memory_limit;
  std::optional<int> global_batch;
  std::optional<int> gpus;
  std::string trace_path;
  bool simulate = false;
  bool force = false;
  bool json = false;
};

int run_layout(const LayoutOptions& options) {
  Scenario scenario = load_checked_scenario(options.scenario_path);
  LayoutSearchOptions search = layout_search_options(options.axes);
  if (!options.memory_limit.empty()) {
    search.memory_limit_bytes = parse_bytes_flag("--memory-limit", options.memory_limit);
    check_memory_limit_flag("--memory-limit", options.memory_limit, *search.memory_limit_bytes,
                            scenario);
  }
  if (options.global_batch) {
    if (*options.global_batch < 1) {
      throw InputError("command line", "--global-batch", std::to_string(*options.global_batch),
                       "a positive number of samples per iteration");
    }
    scenario.training.global_batch_size = *options.global_batch;
  }
  check_trace_path(options.trace_path);
  refuse_output_over_input("--trace", options.trace_path, files_read(scenario));
  if (options.gpus) {
    if (*options.gpus < 1) {
      throw InputError("command line", "--gpus", std::to_string(*options.gpus),
                       "a positive number of GPUs");
    }
    scenario.cluster = cluster_with_ranks(scenario, *options.gpus);
  }
  const LayoutSearchRun run = run_layout_search(scenario, search, options.force);
  const std::optional<LayoutPlan>& best = run.result.strategies.front().second;
  const std::map<std::string, SimulatedLayout> simulated =
      options.simulate ? simulate_layouts(scenario, run.result, "--simulate", options.force)
                       : std::map<std::string, SimulatedLayout>{};
  if (best && !options.trace_path.empty()) {
    write_file_atomically(options.trace_path, layout_trace(scenario, *best));
  }
  if (options.json) {
    fmt::print("{}\n", layout_search_json(scenario, run, simulated).dump(2));
    return best ? exit_ok : exit_infeasible;
  }
  if (!best) return report_no_layout_fits(scenario, run);
  fmt::print("{}", layout_search_report(scenario, run, simulated));
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
  app->add_option("--tp", options->axes.tensor,
                  "fix the tensor-parallel degree (default: auto, searched)");
  app->add_option("--pp", options->axes.pipeline,
                  "fix the pipeline degree (default: auto, searched)");
  app->add_option(
      "--schedule", options->axes.schedule,
      "fix the pipeline schedule: 1f1b, gpipe or interleaved (default: auto, searched)");
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
  app->add_flag("--force", options->force,
                "with --simulate: let the simulations run past 2 minutes (their work is not "
                "estimated before they start)");
  app->add_flag("--json", options->json, "print JSON");
  return {app, [options]() { return run_layout(*options); }};
}

}  // namespace osdp::cli
