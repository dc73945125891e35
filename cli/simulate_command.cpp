// `osdp simulate`: one training iteration of a plan on the simulated cluster (SimGrid), or one
// collective alone.
//   osdp simulate SCENARIO [--plan PLAN.json | --strategy osdp|ddp|fsdp|zero2] [--trace FILE]
//   osdp simulate --collective all-gather --bytes 256MiB --cluster CLUSTER.json
// --json prints the figures as JSON (keys with units: iteration_time_s, peak_memory_bytes, ...).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "cli/comparison.hpp"
#include "cli/format.hpp"
#include "cli/layout_views.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/atomic_file.hpp"
#include "model/units.hpp"
#include "search/exact.hpp"
#include "search/split_cuts.hpp"
#include "search/strategies.hpp"
#include "sim/pipeline_simulation.hpp"
#include "sim/simulate.hpp"

namespace osdp::cli {
namespace {

constexpr const char* command_line = "command line";

struct SimulateOptions {
  ScenarioOptions scenario;  // SCENARIO, --memory-limit, --modes, ... as `osdp plan` takes them
  LayoutFlags layout;        // --tp, --pp, --schedule: a 3D layout instead
  std::string plan_path;
  std::string strategy;
  std::string trace_path;
  int trace_ranks = 64;
  std::string collective;
  std::string bytes;
  std::string cluster_path;
  std::string granularity;
  bool json = false;
};

CollectiveKind parse_collective(const std::string& name) {
  for (CollectiveKind kind :
       {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce}) {
    if (collective_name(kind) == name) return kind;
  }
  throw InputError(command_line, "--collective", name, "all-gather, reduce-scatter or all-reduce");
}

sim::SimOptions with_granularity(sim::SimOptions options, const std::string& granularity) {
  if (granularity.empty()) return options;
  if (granularity != "step" && granularity != "scale" && granularity != "auto") {
    throw InputError(command_line, "--collectives", granularity, "auto, step or scale");
  }
  options.granularity = granularity == "step"    ? sim::Granularity::step
                        : granularity == "scale" ? sim::Granularity::scale
                                                 : sim::Granularity::automatic;
  return options;
}

int run_collective(const SimulateOptions& options) {
  if (options.cluster_path.empty()) {
    throw InputError(command_line, "--cluster", "nothing", "a cluster JSON file for --collective");
  }
  if (const auto given = first_override_given(options.scenario)) {
    throw InputError(command_line, given->first, given->second,
                     "no search flag with --collective (they apply to a SCENARIO's plan)");
  }
  if (!options.scenario.scenario_path.empty()) {
    throw InputError(command_line, "--collective", options.collective,
                     "either --collective with --bytes and --cluster, or a SCENARIO");
  }
  // What only a scenario's plan takes, named (a collective alone has no plan, layout or trace).
  for (const auto& [flag, given] :
       {std::pair<const char*, bool>{"--plan", !options.plan_path.empty()},
        {"--strategy", !options.strategy.empty()},
        {"--trace", !options.trace_path.empty()},
        {"--tp, --pp or --schedule", layout_requested(options.layout)}}) {
    if (given) {
      throw InputError(command_line, flag, "given with --collective",
                       "no " + std::string(flag) +
                           " with --collective (it takes --bytes, --force, "
                           "--cluster, --collectives and --json)");
    }
  }
  const CollectiveKind kind = parse_collective(options.collective);
  const auto bytes = units::parse(options.bytes, units::Dimension::bytes);
  // Capped as an operator's bytes are (limits::operator_bytes, 1 PiB): past ~1e21 bytes the
  // simulated time stops growing. A fraction of a byte is a unit slip.
  if (!bytes || *bytes < 1 || *bytes > limits::operator_bytes.max) {
    throw InputError(
        command_line, "--bytes", options.bytes,
        units::expected_form(units::Dimension::bytes) + ", at least 1 B and at most 1 PiB");
  }
  const Json document = read_json_file(options.cluster_path);
  const Cluster cluster = load_cluster(JsonReader(document, options.cluster_path));
  const sim::SimOptions sim_options = with_granularity(sim::SimOptions{}, options.granularity);
  const bool every_step =
      sim::resolve_granularity(sim_options.granularity, cluster.ranks) == sim::Granularity::step;
  refuse_unless_forced(collective_work(cluster, kind, *bytes, every_step), options.scenario.force);
  const sim::CollectiveResult result = sim::simulate_collective(cluster, kind, *bytes, sim_options);
  if (options.json) {
    Json json = sim::to_json(result);
    json["cluster"] = cluster.name;
    json["collectives"] = std::string(
        sim::granularity_name(sim::resolve_granularity(sim_options.granularity, cluster.ranks)));
    fmt::print("{}\n", json.dump(2));
    return exit_ok;
  }
  fmt::print(
      "{} of {} on {} ranks of {} ({} mode)\n", collective_name(kind), units::format_bytes(*bytes),
      result.ranks, cluster.name,
      sim::granularity_name(sim::resolve_granularity(sim_options.granularity, cluster.ranks)));
  fmt::print("  time                 {}\n", units::format_seconds(result.time_s));
  fmt::print("  algorithm bandwidth  {}\n",
             units::format_bandwidth(result.algorithm_bandwidth_Bps));
  fmt::print("  bus bandwidth        {}\n", units::format_bandwidth(result.bus_bandwidth_Bps));
  fmt::print("  alpha-beta model     {}\n", units::format_seconds(result.alpha_beta_time_s));
  if (cluster.collectives == CollectiveLibrary::nccl) {
    fmt::print("  NCCL's choice        {} {} (the cluster's \"collectives\": \"nccl\")\n",
               algorithm_name(result.algorithm), protocol_name(result.protocol));
  }
  return exit_ok;
}

Plan choose_plan(const SimulateOptions& options, const Scenario& scenario, const CostModel& model,
                 std::string& label) {
  if (!options.plan_path.empty()) {
    if (!options.strategy.empty()) {
      throw InputError(command_line, "--strategy", options.strategy, "either --plan or --strategy");
    }
    label = options.plan_path;
    return load_plan_file(options.plan_path, *scenario.workload, model);
  }
  const std::string strategy = options.strategy.empty() ? "osdp" : options.strategy;
  label = strategy;
  if (strategy == "osdp") {
    const SearchResult result = search_split_cuts(model, scenario.search).result;
    require_search_answer(result, scenario);
    if (!result.best) {
      const Training& training = model.training();
      const std::string batches =
          training.min_batch_size == training.max_batch_size
              ? fmt::format("at batch size {}", training.min_batch_size)
              : fmt::format("at any batch size from {} to {}", training.min_batch_size,
                            training.max_batch_size);
      throw InfeasibleError(fmt::format(
          "no plan fits in {} per GPU {}: the least memory any plan needs is {} (raise the limit "
          "with --memory-limit, up to the GPU's memory, or `osdp plan` says what dominates it)",
          units::format_bytes(model.memory_limit_bytes()), batches,
          units::format_bytes_above(result.min_memory_needed_bytes, model.memory_limit_bytes())));
    }
    return result.best->plan;
  }
  const auto named = strategy_from_name(strategy, scenario.search.min_unit_parameters);
  if (!named) {
    throw InputError(command_line, "--strategy", strategy, "osdp or one of " + strategy_names());
  }
  if (!options.scenario.units.empty()) {
    // A baseline wraps as its library does (fsdp_block, zero2_block, ...): never silently
    // ignore a flag that cannot apply to it.
    throw InputError(command_line, "--units", options.scenario.units,
                     fmt::format("no --units with --strategy {} (it wraps as {}); the per-block "
                                 "baselines are fsdp_block, fsdp_block+ckpt, zero2_block and "
                                 "zero2_block+ckpt",
                                 strategy, named->units.describe()));
  }
  const StrategyResult result = schedule_strategy(model, *named);
  if (!result.best) {
    const int min_batch = model.training().min_batch_size;
    const std::optional<double> need = strategy_peak_bytes(model, *named, min_batch);
    throw InfeasibleError(fmt::format(
        "{} does not fit in memory: at batch size {} it needs {} per GPU against the limit of "
        "{} (raise it with --memory-limit, up to the GPU's memory)",
        strategy, min_batch, need ? units::format_bytes(*need) : std::string("more"),
        units::format_bytes(model.memory_limit_bytes())));
  }
  return result.best->plan;
}

// The simulated stages' passes as a timeline (for the trace): each stage's first rank.
PipelineTimeline simulated_timeline(const sim::PipelineSimulation& result) {
  PipelineTimeline timeline;
  timeline.stages = result.stage_passes;
  timeline.makespan_s = result.pipeline_s;
  for (const auto& passes : result.stage_passes) {
    timeline.finish_s.push_back(passes.empty() ? 0.0 : passes.back().end_s);
  }
  timeline.busy_s = result.stage_busy_s;
  return timeline;
}

// One strategy's best 3D layout (3d_osdp unless --strategy names a 3D baseline) run in the
// simulator (sim/pipeline_simulation) beside the 3D model's figures.
int run_layout(const SimulateOptions& options) {
  refuse_data_parallel_flags(options.scenario);
  if (!options.plan_path.empty()) {
    throw InputError(command_line, "--plan", options.plan_path,
                     "no --plan with --tp, --pp or --schedule (a plan file holds a data-parallel "
                     "plan; --strategy picks a 3D strategy)");
  }
  const LayoutSearchOptions search = layout_search_options(options.layout);
  const std::string strategy = options.strategy.empty() ? "3d_osdp" : options.strategy;
  const std::vector<std::string>& names = layout_strategy_names();
  if (std::find(names.begin(), names.end(), strategy) == names.end()) {
    std::string list;
    for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
    throw InputError(command_line, "--strategy", strategy,
                     "with --tp, --pp or --schedule, one of " + list);
  }
  check_trace_path(options.trace_path);
  const std::unique_ptr<const Scenario> scenario = load_for_layouts(options.scenario);
  refuse_output_over_input("--trace", options.trace_path, files_read(*scenario));
  const sim::SimOptions sim_options = with_granularity(
      sim::read_sim_options(scenario->simulation, scenario->file), options.granularity);
  const LayoutSearchRun search_run = run_layout_search(*scenario, search, options.scenario.force);
  const auto chosen =
      std::find_if(search_run.result.strategies.begin(), search_run.result.strategies.end(),
                   [&](const auto& entry) { return entry.first == strategy; });
  if (!chosen->second) {
    if (!search_run.result.strategies.front().second) {
      throw InfeasibleError(no_layout_fits(*scenario, search_run));
    }
    throw InfeasibleError(
        fmt::format("no 3D layout of {} fits in {} per GPU (3d_osdp's does: --strategy 3d_osdp)",
                    strategy, units::format_bytes(search_run.memory_limit_bytes)));
  }
  const LayoutPlan& plan = *chosen->second;
  const ParallelIterationCost cost = layout_cost(*scenario, plan);
  // Its work is not estimated before it runs (the flows follow the topology's routing).
  const WorkDeadline deadline = work_deadline(options.scenario.force);
  const sim::PipelineSimulation result = [&] {
    try {
      return sim::simulate_pipeline(*scenario, plan.run, cost, sim_options.granularity,
                                    sim_options.network, deadline.at);
    } catch (const sim::DeadlinePassed&) {
      refuse_overrun(fmt::format("the simulation of {}'s layout", strategy), deadline);
    }
  }();
  if (!options.trace_path.empty()) {
    std::vector<double> states;
    for (const StageCost& stage : cost.stages) states.push_back(stage.model_state_bytes);
    std::vector<double> activations;
    for (const ChunkCost& chunk : cost.chunks) activations.push_back(chunk.saved_activation_bytes);
    write_file_atomically(
        options.trace_path,
        pipeline_chrome_trace(simulated_timeline(result), degrees_text(plan.run) + " (simulated)",
                              states, activations, result.stage_synchronised_s));
  }
  const double simulated_throughput = cost.samples_per_iteration / result.iteration_time_s;
  const std::string collectives = std::string(sim::granularity_name(
      sim::resolve_granularity(sim_options.granularity, scenario->cluster.ranks)));
  if (options.json) {
    Json json = layout_plan_json(*scenario, strategy, plan);
    json["scenario"] = scenario->name;
    json["gpus"] = scenario->cluster.ranks;
    json["collectives"] = collectives;
    json["memory_limit_bytes"] = search_run.memory_limit_bytes;
    json["simulated"] = {{"iteration_time_s", result.iteration_time_s},
                         {"throughput_samples_per_s", simulated_throughput},
                         {"pipeline_s", result.pipeline_s},
                         {"bubble_fraction", result.bubble_fraction},
                         {"stage_finish_s", result.stage_finish_s},
                         {"stage_busy_s", result.stage_busy_s},
                         {"stage_synchronised_s", result.stage_synchronised_s},
                         {"flows", result.flows},
                         {"collectives", result.collectives}};
    if (!options.trace_path.empty()) json["trace"] = options.trace_path;
    fmt::print("{}\n", json.dump(2));
    return exit_ok;
  }
  fmt::print(
      "{}: {} layout tp x pp x dp = {}, schedule {}, micro-batch {} x {} on {} GPUs ({} "
      "collectives)\n",
      scenario->name, strategy, degrees_text(plan.run), schedule_text(plan.run),
      plan.run.micro_batch, plan.run.micro_batches, scenario->cluster.ranks, collectives);
  fmt::print("  {:<26}{:>20}{:>20}\n", "", "simulated", "3D model");
  fmt::print("  {:<26}{:>20}{:>20}\n", "iteration time",
             units::format_seconds(result.iteration_time_s),
             units::format_seconds(cost.iteration_time_s));
  fmt::print("  {:<26}{:>20}{:>20}\n", "throughput", format_throughput(simulated_throughput),
             format_throughput(plan.throughput_samples_per_s));
  fmt::print("  {:<26}{:>20}{:>20}\n", "pipeline", units::format_seconds(result.pipeline_s),
             units::format_seconds(cost.pipeline_s));
  fmt::print("  {:<26}{:>20}{:>20}\n", "bubble", format_percent(result.bubble_fraction),
             format_percent(cost.timeline.bubble_fraction()));
  fmt::print("  {:<26}{:>20}{:>20}\n", "peak memory", "-",
             units::format_bytes(cost.peak_memory_bytes));
  Table stages({{"stage", Table::Align::right},
                {"last pass", Table::Align::right},
                {"(model)", Table::Align::right},
                {"busy", Table::Align::right},
                {"(model)", Table::Align::right},
                {"gradients reduced", Table::Align::right},
                {"(model)", Table::Align::right}});
  for (std::size_t r = 0; r < result.stage_finish_s.size(); ++r) {
    stages.add_row(
        {std::to_string(r), units::format_seconds(result.stage_finish_s[r]),
         units::format_seconds(cost.timeline.finish_s[r]),
         units::format_seconds(result.stage_busy_s[r]),
         units::format_seconds(cost.timeline.busy_s[r]),
         units::format_seconds(result.stage_synchronised_s[r]),
         units::format_seconds(cost.timeline.finish_s[r] + cost.stages[r].gradient_reduce_s)});
  }
  fmt::print("\n  Per stage, simulated and (3D model):\n{}", stages.render("    "));
  fmt::print("  (the 3D simulation times the run; its memory is the 3D model's)\n");
  if (!options.trace_path.empty()) fmt::print("  trace written to {}\n", options.trace_path);
  return exit_ok;
}

int run_plan(const SimulateOptions& options) {
  if (layout_requested(options.layout)) return run_layout(options);
  if (options.scenario.scenario_path.empty()) {
    throw InputError(command_line, "SCENARIO", "nothing",
                     "a scenario file, or --collective with --bytes and --cluster");
  }
  if (!options.bytes.empty() || !options.cluster_path.empty()) {
    throw InputError(command_line, options.bytes.empty() ? "--cluster" : "--bytes", "given",
                     "--bytes and --cluster only with --collective");
  }
  // Checked before the run: a trace that cannot be written is bad input, not a late failure.
  check_trace_path(options.trace_path);
  // The plan and sweep commands' overrides apply here too, so that `osdp simulate X --units auto`
  // simulates the plan `osdp plan X --units auto` found.
  const std::unique_ptr<const Scenario> scenario = load_with_overrides(options.scenario);
  refuse_output_over_input("--trace", options.trace_path,
                           files_read(*scenario, {options.plan_path}));
  const sim::SimOptions sim_options = with_granularity(
      sim::read_sim_options(scenario->simulation, scenario->file), options.granularity);
  refuse_unless_forced(
      simulation_work(*scenario, 1, sim_options.granularity == sim::Granularity::step),
      options.scenario.force);
  const CostModel model = scenario->cost_model();
  std::string label;
  const Plan plan = choose_plan(options, *scenario, model, label);
  const sim::SimulationResult result =
      sim::simulate_plan(*scenario, plan, sim_options, options.trace_path, options.trace_ranks);
  // The analytic figure with the plan's own accumulation steps (a global batch), its
  // neighbours split as the plan splits them (Scenario::cost_model_for).
  const Scenario planned = scenario->for_plan(plan);
  const PlanCost analytic = planned.cost_model_for(plan).plan_cost(plan);
  // A plan given by file (or a batch the search would not choose) may not fit: say so.
  const double limit_bytes = model.memory_limit_bytes();
  const bool fits = result.peak_memory_bytes <= limit_bytes;
  if (options.json) {
    Json json = sim::to_json(result);
    json["scenario"] = scenario->name;
    json["plan"] = label;
    json["memory_limit_bytes"] = limit_bytes;
    json["fits"] = fits;
    json["analytic"] = {{"iteration_time_s", analytic.iteration_time_s},
                        {"throughput_samples_per_s", analytic.throughput_samples_per_s},
                        {"peak_memory_bytes", analytic.peak_memory_bytes}};
    if (!options.trace_path.empty()) json["trace"] = options.trace_path;
    fmt::print("{}\n", json.dump(2));
    return exit_ok;
  }
  const int steps = planned.training.accumulation_steps;
  // On shared cores collectives are CPU work of their calibrated time, not flows on a network.
  const std::string collectives =
      scenario->cluster.host_cores
          ? fmt::format("compute and collectives sharing {} cores",
                        scenario->cluster.host_cores->cores)
          : fmt::format("{} collectives", sim::granularity_name(result.granularity));
  fmt::print("{}: plan {} at batch size {}{} on {} ranks ({})\n", scenario->name, label,
             plan.batch_size,
             steps > 1 ? fmt::format(" x {} accumulation steps", steps) : std::string(),
             result.ranks, collectives);
  fmt::print("  {:<26}{:>20}{:>20}\n", "", "simulated", "analytic");
  fmt::print("  {:<26}{:>20}{:>20}\n", "iteration time",
             units::format_seconds(result.iteration_time_s),
             units::format_seconds(analytic.iteration_time_s));
  fmt::print("  {:<26}{:>20}{:>20}\n", "throughput",
             fmt::format("{:.2f} samples/s", result.throughput_samples_per_s),
             fmt::format("{:.2f} samples/s", analytic.throughput_samples_per_s));
  fmt::print("  {:<26}{:>20}{:>20}\n", "peak memory", units::format_bytes(result.peak_memory_bytes),
             units::format_bytes(analytic.peak_memory_bytes));
  fmt::print("  {:<26}{:>20}{:>20}\n", "compute (rank 0)", units::format_seconds(result.compute_s),
             units::format_seconds(analytic.compute_s));
  if (result.compute_s > analytic.compute_s * 1.01) {
    fmt::print(
        "    (simulated: the compute stream's busy time, slowed where a collective runs "
        "beside it; analytic: the work at full speed)\n");
  }
  fmt::print("  {:<26}{:>20}\n", "optimizer step", units::format_seconds(result.optimizer_step_s));
  fmt::print("  exposed communication (rank 0), total {}\n",
             units::format_seconds(result.exposed_comm_total_s()));
  for (int c = 0; c < sim::comm_categories; ++c) {
    fmt::print("    {:<24}{:>20}\n", sim::comm_category_name(static_cast<sim::CommCategory>(c)),
               units::format_seconds(result.exposed_comm_s[c]));
  }
  fmt::print("  peak memory on rank {} at {}, reached by {}\n", result.peak_rank,
             units::format_seconds(result.peak_time_s), result.peak_memory_cause);
  std::string live;
  for (int c = 0; c < sim::memory_categories; ++c) {
    if (result.peak_breakdown_bytes[c] <= 0) continue;
    std::string name(sim::memory_category_name(static_cast<sim::MemoryCategory>(c)));
    std::replace(name.begin(), name.end(), '_', ' ');
    live += fmt::format("{}{} {}", live.empty() ? "" : ", ", name,
                        units::format_bytes(result.peak_breakdown_bytes[c]));
  }
  fmt::print("    live then: {}\n", live);
  if (!fits) {
    fmt::print(
        "  over the limit: the simulated peak {} is above the {} per GPU limit (--memory-limit, "
        "else the scenario's): this plan would run out of memory\n",
        units::format_bytes(result.peak_memory_bytes), units::format_bytes(limit_bytes));
  }
  if (!options.trace_path.empty()) fmt::print("  trace written to {}\n", options.trace_path);
  return exit_ok;
}

}  // namespace

Subcommand add_simulate_command(CLI::App& root) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* app = root.add_subcommand(
      "simulate", "Simulate one training iteration (or one collective) on the cluster (SimGrid)");
  add_scenario_options(*app, options->scenario, /*with_memory_limit=*/true,
                       /*scenario_required=*/false);
  add_layout_flags(*app, options->layout);
  app->add_option("--plan", options->plan_path, "Plan JSON file (as `osdp plan --json` writes)");
  app->add_option("--strategy", options->strategy,
                  "osdp (default) or a baseline: " + strategy_names() +
                      "; with --tp, --pp or --schedule 3d_osdp (default) or a 3D baseline: "
                      "megatron_tp, gpipe, deepspeed_3d, fsdp_pp");
  CLI::Option* trace =
      app->add_option("--trace", options->trace_path,
                      "Write a Chrome trace (JSON, microseconds) that Perfetto opens");
  app->add_option("--trace-ranks", options->trace_ranks,
                  "Ranks in the trace: 0 .. N-1 (default 64)")
      ->check(CLI::Range(1, 1 << 20))
      ->needs(trace);
  app->add_option("--collective", options->collective,
                  "Simulate one collective: all-gather, reduce-scatter or all-reduce");
  app->add_option("--bytes", options->bytes, "Buffer size of the collective (\"256MiB\")");
  app->add_option("--cluster", options->cluster_path, "Cluster JSON file for --collective");
  app->add_option("--collectives", options->granularity,
                  "step (every ring step a flow), scale (one flow per ring edge) or auto "
                  "(step up to 32 ranks; the default)");
  app->add_flag("--json", options->json, "Print the figures as JSON");
  return {app, [options]() {
            return options->collective.empty() ? run_plan(*options) : run_collective(*options);
          }};
}

}  // namespace osdp::cli
