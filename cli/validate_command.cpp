// `osdp validate`: runs plans for real (libtorch, c10d Gloo; one process per rank) and in
// simulation, and compares time and peak memory. This process chooses and checks the plans and
// simulates them; osdp-runtime (which loads libtorch) trains them and reports the figures.
//   osdp validate SCENARIO (--plan PLAN.json | --strategies osdp,ddp,fsdp,zero2) [--ranks N]
//                 [--cluster CALIBRATED.json] [--batch B] [--iterations N] [--rounds R]
//                 [--json] [--out DIR] [--against VALIDATION.json]
// Without torchrun-style variables it forks its N local ranks itself; under torchrun, Slurm or
// mpirun every process is one rank and rank 0 reports.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "cli/command.hpp"
#include "cli/scenario_options.hpp"
#include "cli/validate_layouts.hpp"
#include "model/atomic_file.hpp"
#include "search/exact.hpp"
#include "search/strategies.hpp"
#include "validate/comparison.hpp"
#include "validate/launch.hpp"
#include "validate/machine_load.hpp"
#include "validate/runtime_process.hpp"
#include "validate/runtime_request.hpp"
#ifdef OSDP_WITH_SIM
#include "sim/simulate.hpp"
#endif

namespace osdp::cli {
namespace {

constexpr const char* command_line = "command line";

struct ValidateOptions {
  std::string scenario_path;
  std::string plan_path;
  std::string strategies;
  std::string cluster_path;
  std::string layouts;
  int ranks = 0;
  int batch = 0;
  int iterations = 0;  // 0: the scenario's
  int rounds = 0;      // 0: the scenario's, at most the iterations
  bool json = false;
  std::string out;
  // An earlier run's validation JSON: its measurements instead of new ones.
  std::string against_path;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<validate::PlanRun> choose_plans(const ValidateOptions& options,
                                            const Scenario& scenario, const CostModel& model,
                                            int batch) {
  std::vector<validate::PlanRun> plans;
  if (!options.plan_path.empty()) {
    if (!options.strategies.empty()) {
      throw InputError(command_line, "--strategies", options.strategies,
                       "either --plan or --strategies");
    }
    plans.push_back({std::filesystem::path(options.plan_path).stem().string(),
                     load_plan_file(options.plan_path, *scenario.workload, model)});
    return plans;
  }
  const std::string list = options.strategies.empty() ? "osdp,ddp,fsdp,zero2" : options.strategies;
  refuse_empty_items("--strategies", list);
  std::set<std::string> listed;
  for (const std::string& name : split(list)) {
    if (!listed.insert(name).second) {
      throw InputError(command_line, "--strategies", list,
                       "each strategy once (" + name + " is listed twice: it would run twice)");
    }
    if (name == "osdp") {
      const auto best = solve_batch(model, scenario.search, batch, model.memory_limit_bytes());
      if (!best) {
        throw InfeasibleError(fmt::format("osdp: no plan fits in memory at batch size {}", batch));
      }
      plans.push_back({name, best->plan});
      continue;
    }
    const auto strategy = strategy_from_name(name, scenario.search.min_unit_parameters);
    if (!strategy) {
      throw InputError(command_line, "--strategies", name,
                       "osdp or " + strategy_names() + ", comma-separated");
    }
    plans.push_back({name, strategy_plan(model, *strategy, batch)});
  }
  if (plans.empty())
    throw InputError(command_line, "--strategies", "\"" + list + "\"", "at least one strategy");
  return plans;
}

// --against: the measurements of an earlier `osdp validate --json` (or its --out's
// validation.json), which must be of the same plans, in the same order, on as many ranks.
std::vector<validate::PlanMeasurement> kept_measurements(
    const std::string& path, const Json& document, const std::vector<validate::PlanRun>& plans,
    int ranks) {
  if (!document.is_object() || !document.contains("measurements")) {
    throw InputError(path, "$.measurements", "missing",
                     "the measurements of an earlier `osdp validate --json` (validation.json)");
  }
  std::vector<validate::PlanMeasurement> measured =
      validate::measurements_from_json(document.at("measurements"), path);
  if (measured.size() != plans.size()) {
    throw InputError(path, "$.measurements", fmt::format("{} plans", measured.size()),
                     fmt::format("the {} plans this command validates (the same --strategies, "
                                 "--plan and --layouts as the run that measured them)",
                                 plans.size()));
  }
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const std::string at = fmt::format("$.measurements[{}]", i);
    if (measured[i].name != plans[i].name) {
      throw InputError(path, at + ".name", "\"" + measured[i].name + "\"",
                       "\"" + plans[i].name + "\", this command's plan in that place");
    }
    if (static_cast<int>(measured[i].ranks.size()) != ranks) {
      throw InputError(path, at + ".ranks", fmt::format("{} ranks", measured[i].ranks.size()),
                       fmt::format("{}, as many as the cluster has", ranks));
    }
  }
  return measured;
}

// The simulator's figures of one plan (SimGrid; the analytic extended cost model in a build
// without it). Writes a Chrome trace to `trace_path` when it is not empty and SimGrid runs.
validate::SimulatedFigures simulate(const Scenario& scenario, const Plan& plan,
                                    const std::string& trace_path) {
  validate::SimulatedFigures figures;
#ifdef OSDP_WITH_SIM
  const sim::SimOptions options = sim::read_sim_options(scenario.simulation, scenario.file);
  const sim::SimulationResult result = sim::simulate_plan(scenario, plan, options, trace_path);
  figures.iteration_time_s = result.iteration_time_s;
  figures.peak_memory_bytes = result.peak_memory_bytes;
  // The measured side's figure is the critical rank's, the one that waited least (all ranks run
  // the same passes): the same of the simulated ranks, which differ where they take turns on
  // shared cores.
  figures.exposed_communication_s = result.critical_rank_exposed_comm_s();
#else
  (void)trace_path;
  const Scenario planned = scenario.for_plan(plan);
  const PlanCost cost = planned.cost_model_for(plan).plan_cost(plan);
  figures.iteration_time_s = cost.iteration_time_s;
  figures.peak_memory_bytes = cost.peak_memory_bytes;
  figures.exposed_communication_s = cost.exposed_communication_s;
#endif
  return figures;
}

constexpr const char* simulator_name() {
#ifdef OSDP_WITH_SIM
  return "simgrid";
#else
  return "analytic";
#endif
}

// An --out that cannot be written is found before the run, not after it.
void require_writable_directory(const std::string& out) {
  std::error_code error;
  std::filesystem::create_directories(out, error);
  if (error || !std::filesystem::is_directory(out) || access(out.c_str(), W_OK) != 0) {
    throw InputError(command_line, "--out", "\"" + out + "\"",
                     "a directory osdp can create or write" +
                         (error ? " (" + error.message() + ")" : std::string()));
  }
}

// osdp-runtime failed and said why; the command exits with its code.
struct RunExit {
  int code = 1;
};

// Trains the plans in osdp-runtime; nullopt on ranks that do not report (under torchrun).

std::optional<std::vector<validate::PlanMeasurement>> measure_in_runtime(
    const validate::MeasureRequest& request, std::vector<validate::ComputeCheck>& compute_check) {
  const validate::TemporaryDirectory directory("osdp-validate");
  const std::string request_path = (directory.path() / "request.json").string();
  const std::string response_path = (directory.path() / "response.json").string();
  write_file_atomically(request_path, validate::measure_request_to_json(request).dump());
  const int code = validate::run_runtime({"measure", request_path, response_path});
  if (code != exit_ok) throw RunExit{code};
  return validate::measure_response_from_json(read_json_file(response_path), response_path,
                                              &compute_check);
}

// Every plan simulated on the scenario's cluster (layouts by the 3D model); traces under
// out/traces when out is given.
std::vector<validate::SimulatedFigures> simulate_plans(const Scenario& scenario,
                                                       const std::vector<validate::PlanRun>& plans,
                                                       const std::string& out) {
  std::vector<validate::SimulatedFigures> simulated;
  for (const auto& plan : plans) {
    const std::string trace =
        out.empty()
            ? ""
            : (std::filesystem::path(out) / "traces" / (plan.name + ".simulated.json")).string();
    simulated.push_back(plan.layout ? predict_layout(scenario, *plan.layout, plan.name, trace)
                                    : simulate(scenario, plan.plan, trace));
  }
  return simulated;
}

// The kept run's plans (their summary in its JSON) are the ones to simulate now: osdp's is
// searched again, and another cluster may choose another one.
void require_same_plans(const std::string& path, const Json& kept,
                        const std::vector<validate::PlanRun>& plans) {
  if (!kept.contains("plans") || !kept.at("plans").is_array()) return;
  for (std::size_t i = 0; i < kept.at("plans").size() && i < plans.size(); ++i) {
    const Json& was = kept.at("plans").at(i);
    const Json now = validate::describe_plan_run(plans[i]);
    // Measured at another batch size (the kept run's, or an edited --batch): the errors would
    // compare two different steps.
    if (was.contains("batch_size") && was.at("batch_size").is_number() &&
        was.at("batch_size").get<double>() != plans[i].plan.batch_size) {
      throw InputError(path, fmt::format("$.plans[{}].batch_size", i), was.at("batch_size").dump(),
                       fmt::format("{}, the batch size this command validates {} at (--batch or "
                                   "the scenario's validation.batch_size)",
                                   plans[i].plan.batch_size, plans[i].name));
    }
    if (was.contains("plan") && was.at("plan") != now) {
      throw InputError(path, fmt::format("$.plans[{}].plan", i), was.at("plan").dump(),
                       fmt::format("{}, the plan this command validates as {} (give the measured "
                                   "plan with --plan, e.g. --out's plans/{}.json)",
                                   now.dump(), plans[i].name, plans[i].name));
    }
  }
}

// Writes --out's files and prints the comparison (as JSON with --json); `measured_where` says
// where the measurements come from, `notes` follow the tables.
void report(const ValidateOptions& options, const Scenario& scenario,
            const std::vector<validate::PlanRun>& plans, const validate::Comparison& comparison,
            const Json& json, const std::string& measured_where,
            const std::vector<std::string>& notes) {
  if (!options.out.empty()) {
    const std::filesystem::path out(options.out);
    write_file_atomically((out / "validation.csv").string(), validate::comparison_csv(comparison));
    write_file_atomically((out / "validation.json").string(), json.dump(2) + "\n");
    for (const auto& plan : plans) {
      const Json written = plan.layout ? validate::plan_runs_to_json({plan}).at(0)
                                       : plan_to_json(plan.plan, *scenario.workload);
      write_file_atomically((out / "plans" / (plan.name + ".json")).string(),
                            written.dump(2) + "\n");
    }
    const std::string plot = validate::plot_predicted_vs_measured(
        (out / "validation.csv").string(), (out / "predicted_vs_measured.png").string());
    if (!options.json) fmt::print(stderr, "osdp validate: wrote {} ({})\n", out.string(), plot);
  }
  if (options.json) {
    fmt::print("{}\n", json.dump(2));
    return;
  }
  fmt::print("{}: {} vs simulated on cluster \"{}\"\n", scenario.name, measured_where,
             scenario.cluster.name);
  fmt::print("{}", validate::comparison_table(comparison));
  fmt::print("{}", validate::stage_table(comparison));
  for (const std::string& note : notes) fmt::print("{}\n", note);
}

// --against: the simulation set against kept measurements; nothing runs.
int compare_with_kept(const ValidateOptions& options, const Scenario& scenario,
                      const std::vector<validate::PlanRun>& plans, int ranks) {
  // Flags that only shape a measurement have nothing to act on here.
  for (const auto& [flag, given] :
       {std::pair<const char*, bool>{"--iterations", options.iterations > 0},
        {"--rounds", options.rounds > 0}}) {
    if (given) {
      throw InputError(command_line, flag, "given with --against",
                       std::string("no ") + flag +
                           " with --against (it measures nothing: the kept run's iterations "
                           "are what it compares)");
    }
  }
  const Json kept = read_json_file(options.against_path);
  const std::vector<validate::PlanMeasurement> measurements =
      kept_measurements(options.against_path, kept, plans, ranks);
  require_same_plans(options.against_path, kept, plans);
  if (!options.out.empty()) require_writable_directory(options.out);
  const validate::Comparison comparison =
      validate::compare(scenario, plans, measurements, simulate_plans(scenario, plans, options.out),
                        simulator_name());
  Json json = validate::comparison_json(comparison);
  json["scenario"] = scenario.name;
  json["measurements_from"] = options.against_path;
  json["measurements"] = validate::measurements_to_json(measurements);
  report(options, scenario, plans, comparison, json,
         fmt::format("{} ranks, measured as kept in {}", ranks, options.against_path),
         {"(the measurements of an earlier run: no speed check or machine load this time)"});
  return exit_ok;
}

// The run's rank count (--ranks, or WORLD_SIZE under torchrun) must be the cluster's: the
// simulation it is compared with runs on that cluster. The message names what was given (the
// flag or the variable), not the cluster file, which is only wrong when it is the one to change.
[[noreturn]] void refuse_rank_count(const Scenario& scenario, int ranks, bool from_torchrun) {
  const int cluster_ranks = scenario.cluster.ranks;
  const std::string cluster = fmt::format(
      "the cluster's {} {} ({}, {}): give --ranks {} or leave it out, or a cluster of {} {} "
      "with --cluster",
      cluster_ranks, cluster_ranks == 1 ? "rank" : "ranks", scenario.cluster_source.file,
      scenario.cluster_source.path("ranks"), cluster_ranks, ranks, ranks == 1 ? "rank" : "ranks");
  if (from_torchrun) {
    throw InputError(
        "environment", "WORLD_SIZE", std::to_string(ranks),
        fmt::format("the cluster's {} {} ({}, {}) under torchrun", cluster_ranks,
                    cluster_ranks == 1 ? "rank" : "ranks", scenario.cluster_source.file,
                    scenario.cluster_source.path("ranks")));
  }
  throw InputError("command line", "--ranks", std::to_string(ranks), cluster);
}

int run(const ValidateOptions& options) {
  Scenario loaded = load_scenario(options.scenario_path);
  if (!options.cluster_path.empty()) {
    const Json document = read_json_file(options.cluster_path);
    loaded.cluster = load_cluster(JsonReader(document, options.cluster_path));
    loaded.cluster_document = document;
    loaded.cluster_source = {options.cluster_path, "$"};
  }
  const auto scenario = std::make_unique<const Scenario>(std::move(loaded));
  const validate::GptShape shape = validate::require_gpt_shape(*scenario, scenario->file);
  validate::ValidationOptions validation = validate::read_validation_options(*scenario);
  if (options.batch > 0) validation.batch_size = options.batch;
  validate::override_measured_iterations(validation, options.iterations, options.rounds);
  const auto environment = validate::rank_from_environment();
  const int ranks = environment ? environment->world_size
                                : (options.ranks > 0 ? options.ranks : scenario->cluster.ranks);
  if (ranks != scenario->cluster.ranks)
    refuse_rank_count(*scenario, ranks, environment.has_value());
  // A fixed global batch: the measured micro-batch accumulates up to it.
  if (scenario->training.global_batch_size) {
    const auto steps = scenario->training.accumulation_for(validation.batch_size, ranks);
    if (!steps) {
      throw InputError(scenario->file, "$.validation.batch_size",
                       std::to_string(validation.batch_size),
                       fmt::format("a micro-batch b with b x {} ranks dividing the global batch {}",
                                   ranks, *scenario->training.global_batch_size));
    }
    validation.accumulation_steps = *steps;
  }
  Plan measured_batch;
  measured_batch.batch_size = validation.batch_size;
  const Scenario planned = scenario->for_plan(measured_batch);
  const CostModel model = planned.cost_model();
  std::vector<validate::PlanRun> plans =
      choose_plans(options, planned, model, validation.batch_size);
  for (const auto& plan : plans) {
    validate::check_runnable(shape, plan.plan, ranks, scenario->cluster.gpus_per_node,
                             options.plan_path.empty() ? plan.name : options.plan_path);
  }
  // Tensor x pipeline x data layouts beside them: the flag's, else the scenario's.
  const bool layouts_flag = !options.layouts.empty();
  const std::string layouts = layouts_flag ? options.layouts : validation.layouts;
  if (!layouts.empty()) {
    if (validation.device != validate::DeviceKind::cpu) {
      throw InputError(scenario->file, "$.validation.device", "cuda",
                       "\"cpu\" for tensor and pipeline layouts (the runtime runs them on CPU "
                       "ranks over Gloo only)");
    }
    for (validate::PlanRun& run : parse_layouts(layouts_flag ? "--layouts" : "$.validation.layouts",
                                                layouts, *scenario, ranks, validation.batch_size)) {
      // Checked here, before any rank starts: the 3D model refuses what it cannot cost.
      (void)predict_layout(*scenario, *run.layout, run.name);
      plans.push_back(std::move(run));
    }
  }
  if (!options.against_path.empty()) return compare_with_kept(options, *scenario, plans, ranks);
  if (!options.json && !environment) {
    const std::string accumulation =
        validation.accumulation_steps > 1
            ? fmt::format(" of {} micro-batches", validation.accumulation_steps)
            : std::string();
    fmt::print(stderr,
               "osdp validate: {} plan(s) on {} local ranks, {} measured iterations{} each in {} "
               "rounds (plans take turns), {} warm-up\n",
               plans.size(), ranks, validation.iterations, accumulation, validation.rounds,
               validation.warmup_iterations);
  }

  if (!options.out.empty()) require_writable_directory(options.out);

  validate::set_speed_probe(validation, scenario->cluster);
  validate::MeasureRequest request;
  request.shape = shape;
  request.plans = plans;
  request.local_ranks = ranks;
  request.options = validation;
  request.gpus_per_node = scenario->cluster.gpus_per_node;
  if (!options.out.empty()) {
    request.trace_directory = (std::filesystem::path(options.out) / "traces").string();
  }
  std::optional<std::vector<validate::PlanMeasurement>> measurements;
  std::vector<validate::ComputeCheck> compute_check;
  validate::MachineLoad load;
  load.cores = validate::machine_cores();
  load.before = validate::one_minute_load_average();
  try {
    measurements = measure_in_runtime(request, compute_check);
  } catch (const RunExit& failed) {
    return failed.code;
  }
  if (!measurements) return exit_ok;  // a rank other than 0 under torchrun
  load.after = validate::one_minute_load_average();

  const validate::Comparison comparison =
      validate::compare(*scenario, plans, *measurements,
                        simulate_plans(*scenario, plans, options.out), simulator_name());
  // The same measurements against the laws rescaled to the speed the machine had during them.
  const auto drift = validate::speed_drift(compute_check, scenario->cluster.gpu.speed_reference);
  std::optional<validate::Comparison> rescaled;
  if (drift) {
    Scenario at_drift = *scenario;
    at_drift.cluster.gpu = with_compute_time_scaled(at_drift.cluster.gpu, drift->factor());
    rescaled = validate::compare(at_drift, plans, *measurements,
                                 simulate_plans(at_drift, plans, ""), simulator_name());
  }
  Json json = validate::comparison_json(comparison);
  json["scenario"] = scenario->name;
  json["validation"] = validate::validation_options_to_json(validation);
  json["measurements"] = validate::measurements_to_json(*measurements);
  json["machine_load"] = validate::load_to_json(load);
  const validate::ComputeAgainstLaws compute = validate::compare_compute(compute_check, model);
  if (!compute.line.empty()) {
    json["compute_check"] = {{"kinds", compute.json},
                             {"measured_over_law_before", compute.before_ratio},
                             {"measured_over_law_after", compute.after_ratio}};
  }
  if (drift) {
    json["speed_reference"] =
        validate::speed_drift_json(*drift, *scenario->cluster.gpu.speed_reference, *rescaled);
  }

  std::vector<std::string> notes;
  if (const std::string line = validate::describe_load(load); !line.empty()) notes.push_back(line);
  if (!compute.line.empty()) notes.push_back(compute.line);
  if (drift) {
    notes.push_back(validate::speed_drift_line(*drift, *scenario->cluster.gpu.speed_reference,
                                               comparison, *rescaled));
  }
  report(options, *scenario, plans, comparison, json,
         fmt::format("{} ranks, measured on this machine", ranks), notes);
  return exit_ok;
}

}  // namespace

Subcommand add_validate_command(CLI::App& root) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* app = root.add_subcommand(
      "validate", "Run plans for real (libtorch, Gloo) and compare with the simulation");
  app->add_option("scenario", options->scenario_path, "Scenario JSON file")->required();
  app->add_option("--plan", options->plan_path, "Plan JSON file (as `osdp plan --json` writes)");
  app->add_option("--strategies", options->strategies,
                  "Comma-separated: osdp, " + strategy_names() + "; default osdp,ddp,fsdp,zero2");
  app->add_option("--ranks", options->ranks, "Local ranks to start (default: the cluster's)")
      ->check(CLI::Range(1, 1024));
  app->add_option("--layouts", options->layouts,
                  "Tensor x pipeline x data layouts to run too, e.g. tp2,pp2:gpipe:m4,dp2:z2:zdp2 "
                  "(axes tp/pp/dp<N> joined by x; :gpipe, :1f1b or :interleaved with :v<N> "
                  "chunks a stage, default 1f1b; :m<N> micro-batches, default 2 x pp; :z1 or :z2 "
                  "in the data-parallel group; :zdp<K> the first K layers of every stage ZDP, "
                  "the rest z2 (or :dp, :z1 where given); :sp sequence parallelism; :ckpt every "
                  "layer's attention and MLP "
                  "recomputed in backward); default: the scenario's validation.layouts");
  app->add_option("--cluster", options->cluster_path,
                  "Cluster JSON replacing the scenario's (e.g. from `osdp calibrate`)");
  app->add_option("--batch", options->batch,
                  "Batch size per rank for strategies and osdp (default: the scenario's "
                  "validation.batch_size, "
                  "else 4)")
      ->check(CLI::Range(1, 1 << 16));
  app->add_option("--iterations", options->iterations,
                  "Measured iterations per plan (default: the scenario's validation.iterations, "
                  "else 9): more steps steady the medians of waits that move from step to step")
      ->check(CLI::Range(1, 100000));
  app->add_option("--rounds", options->rounds,
                  "Rounds the plans take turns in, at most the iterations (default: the "
                  "scenario's validation.rounds, else 3)")
      ->check(CLI::Range(1, 1000));
  app->add_flag("--json", options->json, "Print the comparison as JSON");
  app->add_option("--out", options->out,
                  "Write validation.csv, validation.json, plans, traces, plot");
  app->add_option("--against", options->against_path,
                  "Measure nothing: set the simulation against the measurements kept in this "
                  "file (an earlier run's --json output or --out's validation.json, of the same "
                  "plans), e.g. with another --cluster");
  return {app, [options]() { return run(*options); }};
}

}  // namespace osdp::cli
