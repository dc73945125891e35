// `osdp report SCENARIO --out DIR`: one self-contained HTML page that teaches the plan of one
// model on one cluster: the plan as a map of operators, what each mode keeps in memory and
// sends, throughput against the memory limit for OSDP and every baseline, the simulated
// timeline of one iteration, and why the plan chose what it chose. This file gathers the
// figures (the same functions as plan, sweep, explain and simulate); cli/report_page draws them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include "cli/command.hpp"
#include "cli/comparison.hpp"
#include "cli/explanation.hpp"
#include "cli/format.hpp"
#include "cli/layout_views.hpp"
#include "cli/report_page.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/atomic_file.hpp"
#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "model/units.hpp"
#include "model/wrapping.hpp"
#include "search/exact.hpp"
#include "search/split_cuts.hpp"
#include "search/strategies.hpp"
#ifdef OSDP_WITH_SIM
#include "sim/simulate.hpp"
#endif

namespace osdp::cli {
namespace {

namespace fs = std::filesystem;

const std::string command_line = "command line";

struct ReportOptions {
  ScenarioOptions scenario;
  std::string out_dir;
  std::string memory_limits;  // "2GiB:24GiB:2GiB" or "4GiB,8GiB"; empty: a range to the GPU's
  bool no_timeline = false;
};

Json choice_json(const OperatorChoice& choice) {
  return {{"label", describe(choice)},
          {"mode", mode_name(choice.mode)},
          {"slices", choice.slices},
          {"sharded_slices", choice.sharded_slices},
          {"checkpoint", choice.checkpoint != Checkpoint::none},
          {"offload", choice.offload}};
}

// The plan's operators (its units, for a plan of FSDP units) in execution order.
Json operators_json(const CostModel& plan_model, const Plan& plan) {
  Json operators = Json::array();
  const Workload& workload = plan_model.workload();
  for (int index : workload.execution_order()) {
    const Operator& op = workload.op(index);
    operators.push_back({{"name", op.name},
                         {"kind", operator_kind_name(op.kind)},
                         {"parameters", op.parameter_count},
                         {"parameter_bytes", op.parameter_bytes},
                         {"choice", choice_json(plan.choices[index])}});
  }
  return operators;
}

// Collectives per iteration of a whole plan, summed by kind: how many, how many bytes (the
// full buffers), and the time the cost model gives them.
Json collectives_per_iteration(const CostModel& model, const Plan& plan) {
  struct Total {
    int count = 0;
    double bytes = 0;
    double time_s = 0;
  };
  std::map<std::string, Total> totals;
  for (int index = 0; index < model.workload().size(); ++index) {
    for (const CollectiveCall& call :
         collectives_of(model.cluster(), model.workload().op(index), plan.choices[index])) {
      Total& total = totals[std::string(collective_name(call.kind))];
      total.count += call.count;
      total.bytes += call.count * call.full_bytes;
      total.time_s += call.time_s();
    }
  }
  Json list = Json::array();
  for (const auto& [name, total] : totals) {
    list.push_back({{"collective", name},
                    {"count", total.count},
                    {"full_bytes", total.bytes},
                    {"time_s", total.time_s}});
  }
  return list;
}

Json cost_json(const PlanCost& cost, double limit_bytes) {
  return {{"batch_size", cost.batch_size},
          {"iteration_time_s", cost.iteration_time_s},
          {"compute_s", cost.compute_s},
          {"communication_s", cost.communication_s},
          {"exposed_communication_s", cost.exposed_communication_s},
          {"throughput_samples_per_s", cost.throughput_samples_per_s},
          {"peak_memory_bytes", cost.peak_memory_bytes},
          {"fits", cost.peak_memory_bytes <= limit_bytes},
          {"model_state_bytes", cost.peak.model_state_bytes},
          {"activation_bytes", cost.peak.activation_bytes},
          {"extra_bytes", cost.peak.extra_bytes},
          {"transient_bytes", cost.peak.transient_bytes},
          {"dominant_part", cost.peak.dominant_part()}};
}

// Every mode the cluster can run, on every operator, at the plan's batch size (operators that
// cannot take the mode stay DP), beside the plan itself: what each keeps and sends.
Json modes_json(const CostModel& model, const Plan& osdp_plan, const PlanCost& osdp_cost,
                const CostModel& plan_model) {
  const double limit_bytes = model.memory_limit_bytes();
  Json modes = Json::array();
  for (const ModeDescription& mode : mode_descriptions()) {
    if (!mode_fits_cluster(mode.mode, model.cluster())) continue;
    Plan plan;
    plan.batch_size = osdp_plan.batch_size;
    for (int index = 0; index < model.workload().size(); ++index) {
      const OperatorChoice choice = OperatorChoice::whole(mode.mode);
      plan.choices.push_back(model.valid(index, choice) ? choice : OperatorChoice::whole(Mode::dp));
    }
    modes.push_back({{"name", mode.name},
                     {"known_as", mode.known_as},
                     {"keeps", mode.keeps},
                     {"sends", mode.sends},
                     {"wins", mode.wins},
                     {"cost", cost_json(model.plan_cost(plan), limit_bytes)},
                     {"collectives", collectives_per_iteration(model, plan)}});
  }
  modes.push_back({{"name", "osdp"},
                   {"known_as", "the plan: a mode per operator"},
                   {"keeps", "what each operator's mode keeps (the map above)"},
                   {"sends", "what each operator's mode sends"},
                   {"wins", "by construction, at its batch size and memory limit"},
                   {"cost", cost_json(osdp_cost, limit_bytes)},
                   {"collectives", collectives_per_iteration(plan_model, osdp_plan)}});
  return modes;
}

Json throughput_curves(const CostModel& model, const SearchSpec& spec,
                       const std::vector<double>& limits) {
  Json curves = Json::object();
  Json osdp = Json::array();
  std::map<std::string, Json> baselines;
  std::vector<std::string> order;
  for (double limit : limits) {
    const Comparison point = compare_with_baselines(model, spec, limit);
    osdp.push_back(point.osdp.best ? Json(point.osdp.best->cost.throughput_samples_per_s)
                                   : Json(nullptr));
    for (const BaselineOutcome& baseline : point.baselines) {
      const std::string& name = baseline.strategy.name;
      if (!baselines.count(name)) order.push_back(name);
      baselines[name].push_back(baseline.best ? Json(baseline.best->cost.throughput_samples_per_s)
                                              : Json(nullptr));
    }
  }
  Json series = Json::array();
  series.push_back({{"name", "osdp"}, {"throughput_samples_per_s", osdp}});
  for (const std::string& name : order) {
    series.push_back({{"name", name}, {"throughput_samples_per_s", baselines[name]}});
  }
  return {{"memory_limits_bytes", limits}, {"series", series}};
}

// The best 3D layouts of a GPT scenario under the same limit (search/layout_search): every
// strategy's figures, and the best one's stages and pipeline timeline (the 3D model's). Pass
// spans [stage, chunk, micro-batch, 0 forward | 1 backward, start_s, end_s]; a timeline of more
// passes than a page should carry is left out (`timeline_left_out`).
Json layouts_json(const Scenario& scenario, double limit_bytes, bool force) {
  LayoutSearchOptions options;
  options.memory_limit_bytes = limit_bytes;
  const LayoutSearchRun run = run_layout_search(scenario, options, force);
  Json strategies = Json::array();
  for (const auto& [name, plan] : run.result.strategies) {
    strategies.push_back(layout_plan_json(scenario, name, plan));
  }
  Json layouts = {{"strategies", strategies}, {"evaluations", run.result.evaluations}};
  const std::optional<LayoutPlan>& best = run.result.strategies.front().second;
  if (!best) {
    layouts["least_memory_needed_bytes"] = run.result.least_memory_needed_bytes;
    return layouts;
  }
  const ParallelIterationCost cost = layout_cost(scenario, *best);
  layouts["stages"] = layout_stages_json(cost, *best);
  layouts["pipeline_s"] = cost.pipeline_s;
  layouts["iteration_time_s"] = cost.iteration_time_s;
  constexpr std::size_t max_passes = 6000;
  std::size_t passes = 0;
  for (const auto& stage : cost.timeline.stages) passes += stage.size();
  if (passes > max_passes) {
    layouts["timeline_left_out"] = passes;
    return layouts;
  }
  Json spans = Json::array();
  for (std::size_t r = 0; r < cost.timeline.stages.size(); ++r) {
    for (const TimedStep& pass : cost.timeline.stages[r]) {
      spans.push_back({r, pass.step.chunk, pass.step.micro_batch,
                       pass.step.pass == Pass::forward ? 0 : 1, pass.start_s, pass.end_s});
    }
  }
  layouts["passes"] = spans;
  return layouts;
}

#ifdef OSDP_WITH_SIM
// Rank 0's simulated iteration, compacted from the simulator's Chrome trace: lanes (streams),
// spans [lane, category, start_us, duration_us, name] and the memory timeline
// [time_us, bytes per category].
Json timeline_json(const Scenario& scenario, const Plan& plan, const fs::path& out_dir) {
  const sim::SimOptions options = sim::read_sim_options(scenario.simulation, scenario.file);
  const fs::path trace_path =
      out_dir / fmt::format(".osdp-report-trace-{}.json", std::random_device()());
  struct Remove {
    fs::path path;
    ~Remove() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } remove{trace_path};
  const sim::SimulationResult result =
      sim::simulate_plan(scenario, plan, options, trace_path.string(), 1);
  std::ifstream file(trace_path);
  const Json trace = Json::parse(file);
  Json lanes = Json::object();
  Json spans = Json::array();
  Json memory = Json::array();
  std::vector<std::string> memory_categories;
  for (const Json& event : trace.at("traceEvents")) {
    if (event.value("pid", -1) != 0) continue;
    const std::string phase = event.value("ph", "");
    if (phase == "M" && event.value("name", "") == "thread_name") {
      lanes[std::to_string(event.at("tid").get<int>())] = event.at("args").at("name");
    } else if (phase == "X") {
      spans.push_back({event.at("tid"), event.value("cat", ""), event.at("ts"), event.at("dur"),
                       event.value("name", "")});
    } else if (phase == "C") {
      const Json& args = event.at("args");
      if (memory_categories.empty()) {
        for (const auto& [name, value] : args.items()) memory_categories.push_back(name);
      }
      Json point = Json::array({event.at("ts")});
      for (const std::string& name : memory_categories) point.push_back(args.value(name, 0.0));
      // Consecutive samples at one instant: keep the last (the state after them all).
      if (!memory.empty() && memory.back()[0] == point[0])
        memory.back() = point;
      else
        memory.push_back(point);
    }
  }
  return {{"iteration_time_s", result.iteration_time_s},
          {"compute_s", result.compute_s},
          {"exposed_communication_s", result.exposed_comm_total_s()},
          {"peak_memory_bytes", result.peak_memory_bytes},
          {"peak_time_s", result.peak_time_s},
          {"peak_memory_cause", result.peak_memory_cause},
          {"lanes", lanes},
          {"spans", spans},
          {"memory_categories", memory_categories},
          {"memory", memory}};
}
#endif

int run_report(const ReportOptions& options) {
  const fs::path out_dir = options.out_dir;
  const fs::path page = out_dir / "index.html";
  // Checked before the work: an unusable --out is bad input, not a late failure.
  if (const auto why = unusable_output(page.string())) {
    throw InputError(command_line, "--out", options.out_dir,
                     "a directory osdp can write index.html into (this is " + *why + ")");
  }
  const std::unique_ptr<const Scenario> scenario = load_with_overrides(options.scenario);
  const CostModel model = scenario->cost_model();
  const double limit_bytes = model.memory_limit_bytes();
  const std::vector<double> limits = sweep_memory_limits(options.memory_limits, 64, *scenario);
  refuse_unless_forced(planning_work(*scenario, static_cast<int>(limits.size()) + 1),
                       options.scenario.force);
  const SearchResult result = search_split_cuts(model, scenario->search, limit_bytes, true).result;
  require_search_answer(result, *scenario);
  if (!result.best) {
    throw InfeasibleError(fmt::format(
        "nothing fits in {} per GPU: the least memory any plan needs is {} (raise it with "
        "--memory-limit, up to the GPU's memory)",
        units::format_bytes(limit_bytes),
        units::format_bytes_above(result.min_memory_needed_bytes, limit_bytes)));
  }
  const Plan& plan = result.best->plan;
  const Scenario planned = scenario->for_plan(plan);
  const CostModel plan_model = planned.cost_model();

  Json data = {
      {"scenario", scenario->name},
      {"description", scenario->description},
      {"model", scenario->workload->name()},
      {"cluster", scenario->cluster.name},
      {"ranks", model.ranks()},
      {"gpus_per_node", scenario->cluster.gpus_per_node},
      {"gpu_memory_bytes", scenario->cluster.gpu.memory_bytes.value_or(limit_bytes)},
      {"memory_limit_bytes", limit_bytes},
      {"cost_model", cost_model_name(model.settings().kind)},
      {"search", describe_search(*scenario)},
      {"accumulation_steps", plan_model.training().accumulation_steps},
      {"units", plan.unit_sizes.empty() ? "one per operator" : describe_units(plan.unit_sizes)},
      {"plan", cost_json(result.best->cost, limit_bytes)}};
  data["operators"] = operators_json(plan_model, plan);
  Json classes = Json::array();
  for (const auto& members : operator_classes(plan_model)) {
    classes.push_back(class_json(plan_model, scenario->search, plan, members, limit_bytes, true));
  }
  data["operator_classes"] = classes;
  data["modes"] = modes_json(model, plan, result.best->cost, plan_model);
  data["throughput"] = throughput_curves(model, scenario->search, limits);
  if (scenario->gpt) data["layouts"] = layouts_json(*scenario, limit_bytes, options.scenario.force);
#ifdef OSDP_WITH_SIM
  if (!options.no_timeline) {
    refuse_unless_forced(simulation_work(*scenario), options.scenario.force);
    fs::create_directories(out_dir);
    data["timeline"] = timeline_json(*scenario, plan, out_dir);
  }
#endif
  write_file_atomically(page.string(), render_report_page(data));
  fmt::print("wrote {} ({}: {} on {} ranks, batch {} per rank, {})\n", page.string(),
             scenario->name, scenario->workload->name(), model.ranks(), plan.batch_size,
             format_throughput(result.best->cost.throughput_samples_per_s));
  return exit_ok;
}

}  // namespace

Subcommand add_report_command(CLI::App& root) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* app = root.add_subcommand(
      "report",
      "Write one self-contained HTML page that teaches the plan: the plan map, memory and "
      "collectives per mode, throughput against the memory limit, the simulated timeline and "
      "why each choice");
  add_scenario_options(*app, options->scenario);
  app->add_option("--out", options->out_dir, "Directory for index.html")->required();
  app->add_option("--memory-limits", options->memory_limits,
                  "Memory limits of the throughput curve: START:STOP:STEP or a list (default 16 "
                  "steps up to the GPU's memory)");
  app->add_flag("--no-timeline", options->no_timeline,
                "Leave the simulated timeline out (default: simulate one iteration of the plan)");
  return {app, [options] { return run_report(*options); }};
}

}  // namespace osdp::cli
