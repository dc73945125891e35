// 3D layouts (tensor x pipeline x data, search/layout_search) in the planning commands: the
// flags that ask for them (--tp, --pp, --schedule) and how a layout search's result is shown.
// `osdp layout` is the search alone; `plan`, `sweep`, `explain` and `simulate` take the same
// flags and show the layout their own way.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/scenario_options.hpp"
#include "model/json_reader.hpp"
#include "model/parallel_iteration.hpp"
#include "model/scenario.hpp"
#include "search/layout_search.hpp"

namespace osdp::cli {

// --tp N|auto, --pp N|auto, --schedule 1f1b|gpipe|interleaved|auto; empty: not given.
struct LayoutFlags {
  std::string tensor;
  std::string pipeline;
  std::string schedule;
};

// Registers the three flags on a planning command (plan, sweep, explain, simulate).
void add_layout_flags(CLI::App& app, LayoutFlags& flags);

// Any of the flags given: the command plans 3D layouts instead of a data-parallel plan.
bool layout_requested(const LayoutFlags& flags);

// The axes the flags fix ("auto": searched). InputError naming the flag when a value is bad.
LayoutSearchOptions layout_search_options(const LayoutFlags& flags);

// The data-parallel search's own flags (--modes, --split, --checkpoint, --units, --offload,
// --min-unit-params, --cost-model, --gap, --time-limit) have no meaning for a 3D layout search:
// InputError naming the first one given. The training's flags (--memory-limit, --micro-batch,
// --accumulation, --global-batch, --precision, --seq-len) apply to both.
void refuse_data_parallel_flags(const ScenarioOptions& options);

// Loads the scenario with the command line's training flags for a layout search (the global
// batch divides over a data-parallel degree, not every rank), after refusing the data-parallel
// search's flags (refuse_data_parallel_flags).
std::unique_ptr<const Scenario> load_for_layouts(const ScenarioOptions& options);

struct LayoutSearchRun {
  LayoutSearchResult result;
  double search_s = 0;
  double memory_limit_bytes = 0;  // the limit the search kept to
};

// search_layouts, timed, with the limit it used.
// Refuses (exit 2 naming --force) a search whose work estimate is beyond a few minutes, unless
// `force`; `repetitions` counts searches that follow it (explain's per-degree ones).
LayoutSearchRun run_layout_search(const Scenario& scenario, const LayoutSearchOptions& options,
                                  bool force, int repetitions = 1);

// The 3D model's cost of a plan's run.
ParallelIterationCost layout_cost(const Scenario& scenario, const LayoutPlan& plan);

struct SimulatedLayout {
  double iteration_time_s = 0;
  double bubble_fraction = 0;
};

// Each fitting strategy's layout run in SimGrid (sim/pipeline_simulation) with the scenario's
// simulation options, all of them stopped at 2 minutes unless `force` (InputError naming
// --force). InputError when this osdp was built without the simulator.
std::map<std::string, SimulatedLayout> simulate_layouts(const Scenario& scenario,
                                                        const LayoutSearchResult& result,
                                                        const std::string& flag, bool force);

// "1 x 2 x 4"
std::string degrees_text(const ParallelRun& run);
// "-", "1f1b", "interleaved v=2"
std::string schedule_text(const ParallelRun& run);
// "dp + 12 zdp layers"
std::string modes_summary(const LayoutPlan& plan);

// One strategy's figures as JSON (fits: false when none of its configurations does).
Json layout_plan_json(const Scenario& scenario, const std::string& strategy,
                      const std::optional<LayoutPlan>& plan);

// The whole search as `osdp layout --json` prints it.
Json layout_search_json(const Scenario& scenario, const LayoutSearchRun& run,
                        const std::map<std::string, SimulatedLayout>& simulated);

// The text report: setup, the strategies' table, the simulated figures (when given) and the
// best layout stage by stage.
std::string layout_search_report(const Scenario& scenario, const LayoutSearchRun& run,
                                 const std::map<std::string, SimulatedLayout>& simulated);

// Why no layout fits and what to change: the least memory any layout needs and a --memory-limit
// that would fit, never one above the GPU's memory (refused), nor a limit when no layout could
// run the batch at all.
std::string no_layout_fits(const Scenario& scenario, const LayoutSearchRun& run);
// That on stderr, after "osdp: "; returns exit_infeasible.
int report_no_layout_fits(const Scenario& scenario, const LayoutSearchRun& run);

// The transformer layers of a stage (over its chunks).
int stage_layer_count(const ParallelIterationCost& cost, int stage);

// Each stage of a plan: layers, parameters, memory by part (model states + activations of the
// micro-batches in flight + the largest transient buffer = peak), time (busy, idle in the
// pipeline, last pass, gradient reductions, optimizer step) and zdp layers.
Json layout_stages_json(const ParallelIterationCost& cost, const LayoutPlan& plan);

// The stages of a plan: layers, parameters, memory and time each.
std::string stage_table(const Scenario& scenario, const LayoutPlan& plan);

// The 3D model's timeline of a plan as a Chrome / Perfetto trace (one track per stage).
std::string layout_trace(const Scenario& scenario, const LayoutPlan& plan);
// The same of a layout already costed.
std::string layout_trace(const ParallelIterationCost& cost, const ParallelRun& run);

// `osdp explain --tp/--pp/--schedule`: the chosen layout, the best at every tensor x pipeline
// degree beside it, each stage's memory by part and its time (cli/layout_explanation.cpp).
// Returns the exit code.
int explain_layout(const Scenario& scenario, const LayoutSearchOptions& options, bool json,
                   bool force);

// Checks --trace before the run: a path osdp cannot write is bad input, not a late failure.
void check_trace_path(const std::string& path);

}  // namespace osdp::cli
