// `osdp fit` and `osdp predict`: the simulator against measured iteration times.
//   osdp fit SCENARIO --table MEASURED.csv --out CLUSTER.json [--json]
//   osdp predict SCENARIO --table CONFIGS.csv [--json]
// The table is in the format vTrain publishes (model/measured_table.hpp); the scenario gives
// what the table does not (vocabulary, precision, optimizer, cluster) and how the runs ran.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "cli/command.hpp"
#include "cli/format.hpp"
#include "cli/foundry_commands.hpp"
#include "cli/kernel_commands.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/atomic_file.hpp"
#include "model/foundry_runs.hpp"
#include "model/input_error.hpp"
#include "model/least_squares.hpp"
#include "model/measured_runs.hpp"
#include "sim/fit.hpp"
#include "sim/simulate.hpp"

namespace osdp::cli {
namespace {

struct MeasuredOptions {
  std::string scenario_path;
  std::vector<std::string> table_paths;
  std::string out_path;
  bool json = false;
  bool no_simulate = false;           // fit: skip simulating every row with the fitted cluster
  bool force = false;                 // run even when the estimated work is absurd
  std::string weighting = "servers";  // fit: sim::RowWeighting (servers, rows)
};

MeasuredTable read_tables(const std::vector<std::string>& paths) {
  std::vector<MeasuredTable> tables;
  for (const std::string& path : paths) tables.push_back(read_measured_table(path));
  return merge_measured_tables(std::move(tables));
}

Json row_json(const MeasuredRun& run) {
  return {{"gpus", run.gpus},
          {"global_batch", run.global_batch},
          {"micro_batch", run.micro_batch},
          {"hidden_size", run.hidden},
          {"attention_heads", run.heads},
          {"layers", run.layers},
          {"sequence_length", run.sequence_length},
          {"tensor_parallelism", run.tensor_parallelism},
          {"data_parallelism", run.data_parallelism},
          {"pipeline_parallelism", run.pipeline_parallelism}};
}

// One iteration per row, with the scenario's cluster resized to the row's GPUs: data-parallel
// rows simulated (SimGrid), rows with tensor or pipeline parallelism through their pipeline
// schedule's timeline (model/parallel_iteration).
std::vector<double> simulate_rows(const Scenario& scenario, const MeasuredTable& table) {
  const RunSetup setup = read_run_setup(scenario);
  const sim::SimOptions options = sim::read_sim_options(scenario.simulation, scenario.file);
  std::vector<double> predicted;
  // Rows are checked first, so that a bad row fails before any simulation runs.
  std::vector<std::pair<Scenario, Plan>> runs;
  for (const MeasuredRun& run : table.runs) {
    Scenario run_scenario = scenario_for_run(scenario, table, run);
    Plan plan = uses_model_parallelism(run) ? Plan{} : plan_for_run(run_scenario, setup, run);
    runs.emplace_back(std::move(run_scenario), std::move(plan));
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& [run_scenario, plan] = runs[i];
    if (uses_model_parallelism(table.runs[i])) {
      predicted.push_back(
          parallel_cost_for_run(run_scenario, setup, table.runs[i]).iteration_time_s);
    } else {
      predicted.push_back(sim::simulate_plan(run_scenario, plan, options).iteration_time_s);
    }
  }
  return predicted;
}

struct ErrorSummary {
  double mape_percent = 0;
  double median_abs_percent = 0;
  double max_abs_percent = 0;
  int rows = 0;
};

ErrorSummary summarise(const std::vector<double>& errors_percent) {
  ErrorSummary summary;
  std::vector<double> absolute;
  for (double e : errors_percent) absolute.push_back(std::abs(e));
  summary.rows = static_cast<int>(absolute.size());
  if (absolute.empty()) return summary;
  for (double a : absolute) summary.mape_percent += a / absolute.size();
  summary.median_abs_percent = median(absolute);
  summary.max_abs_percent = *std::max_element(absolute.begin(), absolute.end());
  return summary;
}

int run_predict(const MeasuredOptions& options) {
  const Scenario scenario = load_checked_scenario(options.scenario_path);
  if (const std::optional<KernelTable> kernels = kernel_table_in(options.table_paths)) {
    return run_kernel_predict(scenario, *kernels, options.json);
  }
  if (describes_foundry_runs(scenario)) {
    return run_foundry_predict(scenario, options.table_paths, options.json);
  }
  const MeasuredTable table = read_tables(options.table_paths);
  refuse_unless_forced(measured_rows_work(table), options.force);
  const std::vector<double> predicted = simulate_rows(scenario, table);
  std::vector<double> errors;
  Json rows = Json::array();
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const MeasuredRun& run = table.runs[i];
    Json row = row_json(run);
    row["predicted_iteration_time_s"] = predicted[i];
    if (run.iteration_time_s) {
      const double error = 100.0 * (predicted[i] - *run.iteration_time_s) / *run.iteration_time_s;
      errors.push_back(error);
      row["measured_iteration_time_s"] = *run.iteration_time_s;
      row["error_percent"] = error;
    } else {
      row["measured_iteration_time_s"] = nullptr;
      row["error_percent"] = nullptr;
    }
    rows.push_back(std::move(row));
  }
  const ErrorSummary summary = summarise(errors);
  if (options.json) {
    Json document = {{"rows", std::move(rows)}};
    document["mape_percent"] = errors.empty() ? Json(nullptr) : Json(summary.mape_percent);
    document["median_abs_error_percent"] =
        errors.empty() ? Json(nullptr) : Json(summary.median_abs_percent);
    fmt::print("{}\n", document.dump(2));
    return exit_ok;
  }
  fmt::print(
      "{}: {} rows of {} on {} (GPUs and tensor x data x pipeline layout per row as the "
      "table says)\n",
      table.file, table.runs.size(), scenario.name, scenario.cluster.name);
  fmt::print(
      "{:>4} {:>3} {:>3} {:>3} {:>6} {:>5} {:>4} {:>6} {:>6} {:>5} {:>5} {:>12} {:>12} {:>8}\n",
      "GPUs", "tp", "dp", "pp", "global", "micro", "acc", "hidden", "heads", "layers", "seq",
      "measured ms", "predicted ms", "error %");
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const MeasuredRun& run = table.runs[i];
    const std::string measured =
        run.iteration_time_s ? fmt::format("{:.2f}", *run.iteration_time_s * 1e3) : "-";
    const std::string error =
        run.iteration_time_s
            ? fmt::format("{:+.1f}",
                          100.0 * (predicted[i] - *run.iteration_time_s) / *run.iteration_time_s)
            : "-";
    fmt::print(
        "{:>4} {:>3} {:>3} {:>3} {:>6} {:>5} {:>4} {:>6} {:>6} {:>5} {:>5} {:>12} {:>12.2f} "
        "{:>8}\n",
        run.gpus, run.tensor_parallelism, run.data_parallelism, run.pipeline_parallelism,
        run.global_batch, run.micro_batch, run.accumulation_steps(), run.hidden, run.heads,
        run.layers, run.sequence_length, measured, predicted[i] * 1e3, error);
  }
  if (!errors.empty()) {
    fmt::print("absolute error over {} rows: mean (MAPE) {:.2f} %, median {:.2f} %, max {:.2f} %\n",
               summary.rows, summary.mape_percent, summary.median_abs_percent,
               summary.max_abs_percent);
  }
  return exit_ok;
}

int run_fit(const MeasuredOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const Scenario scenario = load_checked_scenario(options.scenario_path);
  // The fitted cluster may replace the scenario's own cluster file (read before it is written),
  // never the scenario or a table.
  std::vector<std::string> kept = options.table_paths;
  kept.push_back(scenario.file);
  refuse_output_over_input("--out", options.out_path, kept);
  if (const std::optional<KernelTable> kernels = kernel_table_in(options.table_paths)) {
    return run_kernel_fit(scenario, *kernels, options.out_path, options.json);
  }
  if (describes_foundry_runs(scenario)) {
    return run_foundry_fit(scenario, options.table_paths, options.out_path, options.json);
  }
  // The output is checked before the work, not after it.
  if (const auto why = unusable_output(options.out_path)) {
    throw InputError("command line", "--out", options.out_path,
                     "a path osdp can write the cluster to, not " + *why);
  }
  const MeasuredTable table = read_tables(options.table_paths);
  // The fit builds every row's program; the check simulates every row again.
  refuse_unless_forced(measured_rows_work(table, !options.no_simulate ? 2 : 1), options.force);
  const sim::SimOptions sim_options = sim::read_sim_options(scenario.simulation, scenario.file);
  const bool every_row = options.weighting == "rows";
  const sim::FitResult fit =
      sim::fit_table(scenario, table, sim_options,
                     every_row ? sim::RowWeighting::every_row : sim::RowWeighting::balance_servers);
  const double fit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  require_usable_fit(table.file, "iteration time (ms)", fit.fit_mape_percent);
  write_file_atomically(options.out_path, fit.cluster_json.dump(2) + "\n");

  std::vector<double> measured;
  for (const MeasuredRun& run : table.runs) measured.push_back(*run.iteration_time_s);
  // The fitted cluster through the simulator itself: the sum the fit solved should be what
  // the simulator gives, row by row.
  double simulated_mape = -1;
  double fit_vs_simulated_max_percent = -1;
  if (!options.no_simulate) {
    // What was written, read back: the check covers the shipped file, rounding included.
    Scenario fitted = scenario;
    fitted.cluster = load_cluster(JsonReader(fit.cluster_json, options.out_path));
    fitted.cluster_document = fit.cluster_json;
    fitted.cluster_source = {options.out_path, "$"};
    const std::vector<double> simulated = simulate_rows(fitted, table);
    simulated_mape = sim::mean_abs_percent_error(simulated, measured);
    fit_vs_simulated_max_percent = 0;
    for (std::size_t i = 0; i < simulated.size(); ++i) {
      fit_vs_simulated_max_percent =
          std::max(fit_vs_simulated_max_percent,
                   100.0 * std::abs(simulated[i] - fit.fitted_s[i]) / simulated[i]);
    }
  }
  if (options.json) {
    Json constants = Json::array();
    for (const auto& c : fit.constants) {
      constants.push_back({{"name", c.name}, {"unit", c.unit}, {"value", c.value}});
    }
    Json document = {
        {"cluster_file", options.out_path},         {"rows", table.runs.size()},
        {"model_sizes", fit.model_sizes},           {"constants", constants},
        {"fit_mape_percent", fit.fit_mape_percent}, {"cv_mape_percent", fit.cv_mape_percent},
        {"weighting", options.weighting},           {"fit_time_s", fit_s}};
    Json groups = Json::array();
    for (const sim::RowGroupFigures& group : fit.groups) {
      groups.push_back({{"name", group.name},
                        {"rows", group.rows},
                        {"fit_mape_percent", group.fit_mape_percent},
                        {"cv_mape_percent", group.cv_mape_percent}});
    }
    document["groups"] = std::move(groups);
    // The cross-validated predictions in `predict --json`'s shape (plots/measured_table_fit.py).
    Json rows = Json::array();
    std::vector<double> errors;
    for (std::size_t i = 0; i < table.runs.size(); ++i) {
      Json row = row_json(table.runs[i]);
      const double error = 100.0 * (fit.validated_s[i] - measured[i]) / measured[i];
      errors.push_back(error);
      row["measured_iteration_time_s"] = measured[i];
      row["predicted_iteration_time_s"] = fit.validated_s[i];
      row["error_percent"] = error;
      rows.push_back(std::move(row));
    }
    const ErrorSummary summary = summarise(errors);
    document["cross_validated"] = {{"rows", std::move(rows)},
                                   {"mape_percent", summary.mape_percent},
                                   {"median_abs_error_percent", summary.median_abs_percent}};
    if (!options.no_simulate) {
      document["simulated_fit_mape_percent"] = simulated_mape;
      document["fit_vs_simulated_max_percent"] = fit_vs_simulated_max_percent;
    }
    fmt::print("{}\n", document.dump(2));
    return exit_ok;
  }
  fmt::print("fitted {} constants on {} rows of {} model sizes ({}), in {:.2f} s\n",
             fit.constants.size(), table.runs.size(), fit.model_sizes, table.file, fit_s);
  for (const auto& c : fit.constants) {
    fmt::print("  {:<56} {:>10.4g} {}\n", c.name, c.value, c.unit);
  }
  fmt::print("fit-set MAPE                                  {:.2f} %\n", fit.fit_mape_percent);
  fmt::print("cross-validated MAPE (leave one model size out) {:.2f} %\n", fit.cv_mape_percent);
  if (fit.groups.size() > 1) {
    fmt::print("weighting: {}\n",
               every_row ? "every row alike" : "one-server and multi-server rows count equally");
    for (const sim::RowGroupFigures& group : fit.groups) {
      fmt::print("  {:<16} {:>4} rows: fit-set MAPE {:.2f} %, cross-validated {:.2f} %\n",
                 group.name, group.rows, group.fit_mape_percent, group.cv_mape_percent);
    }
  }
  if (!options.no_simulate) {
    fmt::print(
        "simulated with the fitted cluster: MAPE {:.2f} % (fit vs simulator: at most "
        "{:.3f} % apart)\n",
        simulated_mape, fit_vs_simulated_max_percent);
  }
  fmt::print("wrote {}\n", options.out_path);
  return exit_ok;
}

}  // namespace

Subcommand add_fit_command(CLI::App& root) {
  auto options = std::make_shared<MeasuredOptions>();
  CLI::App* app = root.add_subcommand(
      "fit", "fit the GPU's compute constants to measured iteration times (least squares)");
  app->add_option("scenario", options->scenario_path, "scenario JSON")->required();
  app->add_option(
         "--table", options->table_paths,
         "measured table(s) (vTrain's CSV format; llm-foundry's for a scenario of its runs); "
         "several are fitted as one; or one kernel table (GEMM or attention timings by "
         "shape, model/kernel_table.hpp)")
      ->required();
  app->add_option("--out", options->out_path,
                  "where to write the fitted cluster JSON (for llm-foundry's table: a directory, "
                  "one cluster file per GPU type; for a kernel table: the scenario's cluster with "
                  "the fitted laws)")
      ->required();
  app->add_flag("--json", options->json, "print JSON");
  app->add_flag("--no-simulate", options->no_simulate,
                "Skip simulating every row with the fitted cluster (default: simulate them)");
  app->add_option("--weighting", options->weighting,
                  "how rows count in the least squares: servers (rows on one server and rows "
                  "spanning several count equally as groups; a table of one kind is unweighted) "
                  "or rows (every row alike)")
      ->check(CLI::IsMember({"servers", "rows"}))
      ->capture_default_str();
  app->add_flag("--force", options->force,
                "Run even when the estimated work is far beyond a few minutes");
  return {app, [options]() { return run_fit(*options); }};
}

Subcommand add_predict_command(CLI::App& root) {
  auto options = std::make_shared<MeasuredOptions>();
  CLI::App* app = root.add_subcommand(
      "predict", "simulate one iteration per row of a table and compare with its measurements");
  app->add_option("scenario", options->scenario_path, "scenario JSON")->required();
  app->add_option(
         "--table", options->table_paths,
         "configurations (vTrain's CSV format; llm-foundry's for a scenario of its runs); "
         "several are predicted as one; or one kernel table, timed with the cluster's laws")
      ->required();
  app->add_flag("--json", options->json, "print JSON");
  app->add_flag("--force", options->force,
                "Run even when the estimated work is far beyond a few minutes");
  return {app, [options]() { return run_predict(*options); }};
}

}  // namespace osdp::cli
