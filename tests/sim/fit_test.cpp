// `osdp fit`'s least squares: the non-negative solver, and the fit recovering known constants
// from a table the simulator itself generated.
#include "sim/fit.hpp"

#include <fmt/format.h>

#include <array>
#include <catch2/catch.hpp>

#include "model/measured_runs.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;

namespace {

const std::string header =
    "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
    "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n";

Json synthetic_document() {
  return {{"name", "synthetic"},
          {"model",
           {{"family", "gpt"},
            {"layers", 2},
            {"hidden", 128},
            {"heads", 4},
            {"sequence_length", 64},
            {"vocabulary", 1000},
            {"vocabulary_multiple", 128}}},
          {"cluster",
           {{"name", "logical"},
            {"ranks", 4},
            {"gpu",
             {{"memory", "80GiB"},
              {"compute", "100TFLOPS"},
              {"kernel_launch", "4us"},
              {"optimizer_bandwidth", "300GBps"}}},
            {"collective", {{"alpha_s", 5e-6}, {"beta_s_per_byte", 1.0 / 100e9}}}}},
          {"training", {{"precision", "mixed"}, {"optimizer", "adam"}}},
          {"simulation", {{"gradient_all_reduce", "after_backward"}}},
          {"measured_runs", {{"mode", "dp"}, {"checkpoint", {"attention", "mlp"}}}}};
}

Scenario synthetic_scenario() { return scenario_from_json(synthetic_document(), "synthetic.json"); }

// Rows of several shapes; their times left out (filled from the simulator below).
std::vector<std::string> synthetic_rows() {
  std::vector<std::string> rows;
  for (int hidden : {128, 256}) {
    for (int layers : {2, 4}) {
      for (int micro : {1, 4}) {
        for (int ranks : {2, 4}) {
          const int global = micro * ranks * (micro == 1 ? 4 : 2);
          rows.push_back(fmt::format("{},{},{},{},4,{},64,1,{},1", ranks, global, micro, hidden,
                                     layers, ranks));
        }
      }
    }
  }
  return rows;
}

// The table the simulator gives for the synthetic rows on `truth`'s cluster.
MeasuredTable simulated_table(const Scenario& truth) {
  const SimOptions options = read_sim_options(truth.simulation, truth.file);
  const RunSetup setup = read_run_setup(truth);
  std::string text = header;
  std::string configs = header.substr(0, header.find(",iteration")) + "\n";
  for (const std::string& row : synthetic_rows()) configs += row + "\n";
  const MeasuredTable config_table = parse_measured_table(configs, "configs.csv");
  for (const MeasuredRun& run : config_table.runs) {
    const Scenario run_scenario = scenario_for_run(truth, config_table, run);
    const SimulationResult simulated =
        simulate_plan(run_scenario, plan_for_run(run_scenario, setup, run), options);
    text += fmt::format("{},{},{},{},{},{},{},1,{},1,{:.9f}\n", run.gpus, run.global_batch,
                        run.micro_batch, run.hidden, run.heads, run.layers, run.sequence_length,
                        run.data_parallelism, simulated.iteration_time_s * 1e3);
  }
  return parse_measured_table(text, "synthetic.csv");
}

// Constants whose layer calls fall on both sides of the floor: at micro-batch 1 the small
// model's calls are held up by it, at 4 (and the larger hidden size) the linear law holds.
// s per TFLOP, ms: layer rate 0.1 TFLOP/s, head 0.04, layer fixed 0.05 ms, edge fixed 0.2 ms,
// layer floor 0.4 ms per forward call.
// s per TFLOP (layer, head), ms (layer, edge fixed), s per TB (activation traffic), ms (pipeline
// pass; no pipeline in these rows), ms (floor).
const std::vector<double> floored_truth{10.0, 25.0, 0.05, 0.2, 50.0, 0.0, 0.4};

// The synthetic rows as the simulator times them under floored_truth's constants.
MeasuredTable floored_table() {
  Scenario truth = synthetic_scenario();
  truth.cluster = cluster_with_constants(truth.cluster, floored_truth);
  return simulated_table(truth);
}

}  // namespace

TEST_CASE("non-negative least squares", "[fit]") {
  // Exact solution with positive coefficients.
  const std::vector<std::vector<double>> a{{1, 0}, {0, 1}, {1, 1}};
  const auto x = non_negative_least_squares(a, {2, 3, 5});
  CHECK(x[0] == Approx(2));
  CHECK(x[1] == Approx(3));
  // The unconstrained optimum has x1 < 0: the constrained one sets it to zero.
  const auto y = non_negative_least_squares({{1, 1}, {1, 2}, {1, 3}}, {3, 2, 1});
  CHECK(y[1] == 0.0);
  CHECK(y[0] == Approx(2));
}

TEST_CASE("fit recovers the constants that generated a table", "[fit]") {
  const Scenario scenario = synthetic_scenario();
  // Known constants: s per TFLOP, ms.
  const std::vector<double> theta{1.0 / 120, 1.0 / 40, 0.3, 0.5};
  Scenario truth = scenario;
  truth.cluster = cluster_with_constants(scenario.cluster, theta);
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  const RunSetup setup = read_run_setup(scenario);

  std::string text = header;
  std::string configs = header.substr(0, header.find(",iteration")) + "\n";
  for (const std::string& row : synthetic_rows()) configs += row + "\n";
  const MeasuredTable config_table = parse_measured_table(configs, "configs.csv");
  for (const MeasuredRun& run : config_table.runs) {
    const Scenario run_scenario = scenario_for_run(truth, config_table, run);
    const SimulationResult simulated =
        simulate_plan(run_scenario, plan_for_run(run_scenario, setup, run), options);
    text += fmt::format("{},{},{},{},{},{},{},1,{},1,{:.9f}\n", run.gpus, run.global_batch,
                        run.micro_batch, run.hidden, run.heads, run.layers, run.sequence_length,
                        run.data_parallelism, simulated.iteration_time_s * 1e3);
  }
  const MeasuredTable table = parse_measured_table(text, "synthetic.csv");
  const FitResult fit = fit_table(scenario, table, options);

  CHECK(fit.constants[0].value == Approx(120).epsilon(1e-4));  // TFLOP/s
  CHECK(fit.constants[1].value == Approx(40).epsilon(1e-4));
  CHECK(fit.constants[2].value == Approx(0.3).epsilon(1e-4));  // ms
  CHECK(fit.constants[3].value == Approx(0.5).epsilon(1e-4));
  CHECK(fit.fit_mape_percent < 1e-4);
  CHECK(fit.cv_mape_percent < 1e-4);
  CHECK(fit.model_sizes == 4);
  // The written cluster loads and carries the constants.
  const Cluster written = load_cluster(JsonReader(fit.cluster_json, "fitted.json"));
  REQUIRE(written.gpu.compute_law("mlp"));
  CHECK(*written.gpu.compute_law("mlp")->forward.flops_per_s == Approx(120e12).epsilon(1e-5));
  CHECK(written.gpu.compute_law("head")->backward.fixed_s == Approx(1e-3).epsilon(1e-5));
  CHECK(written.gpu.optimizer_bandwidth_Bps == scenario.cluster.gpu.optimizer_bandwidth_Bps);
}

TEST_CASE("fit recovers a host floor and the law above it", "[fit][floor]") {
  const Scenario scenario = synthetic_scenario();
  const MeasuredTable table = floored_table();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);

  // Both regimes are in the table: some layer calls sit on the floor, others above it.
  const std::vector<RowModel> rows = row_models(scenario, table, options);
  int on_floor = 0;
  int above = 0;
  for (const RowModel& row : rows) {
    for (const FlooredCalls& calls : row.floored) {
      double law = 0;
      for (std::size_t g = 0; g < calls.features.size(); ++g) {
        law += calls.features[g] * floored_truth[g];
      }
      (calls.floor_features[0] * floored_truth[6] > law ? on_floor : above) += 1;
    }
  }
  CHECK(on_floor > 0);
  CHECK(above > 0);

  const FitResult fit = fit_table(scenario, table, options);
  REQUIRE(fit.constants.size() == 7);
  CHECK(fit.constants[0].value == Approx(0.1).epsilon(1e-4));  // TFLOP/s
  CHECK(fit.constants[1].value == Approx(0.04).epsilon(1e-4));
  CHECK(fit.constants[2].value == Approx(0.05).epsilon(1e-3));  // ms
  CHECK(fit.constants[3].value == Approx(0.2).epsilon(1e-3));
  CHECK(fit.constants[4].value == Approx(0.02).epsilon(1e-4));  // TB/s
  CHECK(fit.constants[5].value == 0.0);                         // no pipeline in these rows
  CHECK(fit.constants[6].value == Approx(0.4).epsilon(1e-4));   // ms
  CHECK(fit.fit_mape_percent < 1e-3);
  CHECK(fit.cv_mape_percent < 1e-3);
  // The written cluster carries the floor, backward twice the forward's, and simulates to the
  // table.
  const Cluster written = load_cluster(JsonReader(fit.cluster_json, "fitted.json"));
  CHECK(written.gpu.compute_law("attention")->forward.host_floor_s == Approx(4e-4).epsilon(1e-5));
  CHECK(written.gpu.compute_law("mlp")->backward.host_floor_s == Approx(8e-4).epsilon(1e-5));
  CHECK(written.gpu.compute_law("head")->forward.host_floor_s == 0);
  Scenario fitted = scenario;
  fitted.cluster = written;
  const RunSetup setup = read_run_setup(scenario);
  for (std::size_t r = 0; r < table.runs.size(); r += 5) {
    const Scenario run = scenario_for_run(fitted, table, table.runs[r]);
    const double simulated =
        simulate_plan(run, plan_for_run(run, setup, table.runs[r]), options).iteration_time_s;
    CHECK(simulated == Approx(*table.runs[r].iteration_time_s).epsilon(1e-4));
  }
}

TEST_CASE("fit never puts a rate above the GPU's declared peak", "[fit][floor]") {
  Scenario scenario = synthetic_scenario();
  const MeasuredTable table = floored_table();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  // A peak below the rate that generated the table: the fit stops at it.
  scenario.cluster.gpu.peak_flops_per_s = 0.08e12;
  const FitResult fit = fit_table(scenario, table, options);
  CHECK(fit.constants[0].value <= 0.08 * (1 + 1e-9));
  CHECK(fit.constants[0].value == Approx(0.08).epsilon(1e-6));
  CHECK(fit.constants[1].value <= 0.08 * (1 + 1e-9));
  for (const FitConstant& c : fit.constants) CHECK(c.value >= 0);
  const Json& laws = fit.cluster_json["gpu"]["operator_compute"];
  for (const char* kind : {"attention", "mlp", "head"}) {
    for (const char* phase : {"forward", "backward"}) {
      CHECK(laws[kind][phase]["rate"].get<double>() <= 0.08e12 * (1 + 1e-6));
    }
  }
  // The written cluster, with the peak declared in its document, loads.
  Json document = fit.cluster_json;
  document["gpu"]["peak_compute"] = "0.08TFLOPS";
  document["gpu"]["compute"] = "0.08TFLOPS";
  CHECK_NOTHROW(load_cluster(JsonReader(document, "fitted.json")));
}

namespace {

// A 4-GPU NVSwitch node with NICs, so that rows of 8 GPUs scale out to two nodes.
Scenario synthetic_3d_scenario() {
  Json document = synthetic_document();
  document["cluster"] = {{"name", "two-level"},
                         {"gpu",
                          {{"memory", "80GiB"},
                           {"compute", "100TFLOPS"},
                           {"kernel_launch", "4us"},
                           {"optimizer_bandwidth", "300GBps"}}},
                         {"topology",
                          {{"kind", "nvswitch"},
                           {"gpus_per_node", 4},
                           {"gpu_link", {{"bandwidth", "100GBps"}, {"latency", "2us"}}},
                           {"nics_per_node", 2},
                           {"nic", {{"bandwidth", "100Gbps"}, {"latency", "5us"}}}}}};
  return scenario_from_json(document, "synthetic-3d.json");
}

}  // namespace

TEST_CASE("fit recovers known constants from rows with tensor and pipeline parallelism",
          "[fit][parallel]") {
  const Scenario scenario = synthetic_3d_scenario();
  Scenario truth = scenario;
  std::vector<double> constants = floored_truth;
  constants[5] = 0.3;  // ms per pipeline pass
  truth.cluster = cluster_with_constants(scenario.cluster, constants);
  const RunSetup setup = read_run_setup(scenario);
  std::string configs = header.substr(0, header.find(",iteration")) + "\n";
  // tensor x data x pipeline over 2 to 8 GPUs (8: two nodes), micro-batches on both sides of
  // the floor, pipelines of 2 and 4 stages with 4 to 8 micro-batches.
  for (int hidden : {128, 256}) {
    for (auto [tp, dp, pp] : {std::array{2, 1, 1},
                              {1, 1, 2},
                              {2, 2, 1},
                              {1, 2, 2},
                              {2, 1, 2},
                              {1, 1, 4},
                              {2, 2, 2},
                              {1, 2, 4}}) {
      for (int micro : {1, 4}) {
        const int global = micro * dp * (pp > 1 ? 2 * pp : 2);
        configs += fmt::format("{},{},{},{},4,{},64,{},{},{}\n", tp * dp * pp, global, micro,
                               hidden, hidden == 128 ? 4 : 8, tp, dp, pp);
      }
    }
  }
  const MeasuredTable config_table = parse_measured_table(configs, "configs.csv");
  std::string text = header;
  for (const MeasuredRun& run : config_table.runs) {
    const Scenario run_scenario = scenario_for_run(truth, config_table, run);
    const double time_s = parallel_cost_for_run(run_scenario, setup, run).iteration_time_s;
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},{:.9f}\n", run.gpus, run.global_batch,
                        run.micro_batch, run.hidden, run.heads, run.layers, run.sequence_length,
                        run.tensor_parallelism, run.data_parallelism, run.pipeline_parallelism,
                        time_s * 1e3);
  }
  const MeasuredTable table = parse_measured_table(text, "synthetic-3d.csv");
  const FitResult fit = fit_table(scenario, table, read_sim_options(scenario.simulation, ""));
  REQUIRE(fit.constants.size() == 7);
  CHECK(fit.constants[0].value == Approx(0.1).epsilon(1e-3));  // TFLOP/s
  CHECK(fit.constants[1].value == Approx(0.04).epsilon(1e-3));
  CHECK(fit.constants[2].value == Approx(0.05).epsilon(1e-3));  // ms
  CHECK(fit.constants[3].value == Approx(0.2).epsilon(1e-3));
  CHECK(fit.constants[4].value == Approx(0.02).epsilon(1e-3));  // TB/s
  CHECK(fit.constants[5].value == Approx(0.3).epsilon(1e-3));   // ms per pipeline pass
  CHECK(fit.constants[6].value == Approx(0.4).epsilon(1e-3));   // ms
  CHECK(fit.fit_mape_percent < 1e-2);
  // Every fitted time is the model's time under the fitted constants (paths found anew).
  Scenario fitted = scenario;
  fitted.cluster = load_cluster(JsonReader(fit.cluster_json, "fitted.json"));
  for (std::size_t r = 0; r < table.runs.size(); ++r) {
    const Scenario run = scenario_for_run(fitted, table, table.runs[r]);
    CHECK(parallel_cost_for_run(run, setup, table.runs[r]).iteration_time_s ==
          Approx(fit.fitted_s[r]).epsilon(1e-4));
  }
}

TEST_CASE("row weights: one-server and multi-server rows count equally as groups", "[fit]") {
  MeasuredTable table;
  for (int gpus : {8, 8, 8, 64}) {
    MeasuredRun run;
    run.gpus = gpus;
    table.runs.push_back(run);
  }
  // Three one-server rows share half the weight, the multi-server row has the other half.
  const std::vector<double> balanced = row_weights(table, 8, RowWeighting::balance_servers);
  REQUIRE(balanced.size() == 4);
  CHECK(balanced[0] == Approx(2.0 / 3));
  CHECK(balanced[2] == Approx(2.0 / 3));
  CHECK(balanced[3] == Approx(2.0));
  CHECK(balanced[0] + balanced[1] + balanced[2] + balanced[3] == Approx(4.0));
  CHECK(row_weights(table, 8, RowWeighting::every_row) == std::vector<double>(4, 1.0));
  // A table of one kind (every row within a server of 64) is unweighted.
  CHECK(row_weights(table, 64, RowWeighting::balance_servers) == std::vector<double>(4, 1.0));
}

TEST_CASE("a weighted fit equals the unweighted fit of a table with the rows repeated", "[fit]") {
  // Rows the constants cannot fit exactly: the 4-rank rows measured slower than the model says.
  Scenario scenario = synthetic_scenario();
  const MeasuredTable generated = floored_table();
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  MeasuredTable table = generated;
  table.runs.clear();
  int four_rank_rows = 0;
  for (MeasuredRun run : generated.runs) {
    if (run.gpus == 4 && ++four_rank_rows > 4) continue;  // 8 two-rank rows, 4 four-rank ones
    *run.iteration_time_s *= run.gpus == 4 ? 1.2 + 0.01 * four_rank_rows : 0.97;
    table.runs.push_back(run);
  }
  // Servers of 2 GPUs: weights 12 / (2 x 8) and 12 / (2 x 4), one to two.
  scenario.cluster.gpus_per_node = 2;
  const std::vector<double> weights = row_weights(table, 2, RowWeighting::balance_servers);
  for (std::size_t r = 0; r < table.runs.size(); ++r) {
    CHECK(weights[r] == Approx(table.runs[r].gpus == 4 ? 1.5 : 0.75));
  }
  const FitResult weighted = fit_table(scenario, table, options);

  MeasuredTable repeated = table;
  for (const MeasuredRun& run : table.runs) {
    if (run.gpus == 4) repeated.runs.push_back(run);
  }
  const FitResult unweighted = fit_table(scenario, repeated, options, RowWeighting::every_row);
  const FitResult plain = fit_table(scenario, table, options, RowWeighting::every_row);
  REQUIRE(weighted.constants.size() == unweighted.constants.size());
  bool weighting_moved_a_constant = false;
  for (std::size_t c = 0; c < weighted.constants.size(); ++c) {
    CAPTURE(weighted.constants[c].name);
    CHECK(weighted.constants[c].value ==
          Approx(unweighted.constants[c].value).epsilon(1e-6).margin(1e-12));
    weighting_moved_a_constant = weighting_moved_a_constant ||
                                 std::abs(plain.constants[c].value - weighted.constants[c].value) >
                                     1e-3 * std::abs(plain.constants[c].value);
  }
  CHECK(weighting_moved_a_constant);
  // The figures per kind of row.
  REQUIRE(weighted.groups.size() == 2);
  CHECK(weighted.groups[0].name == "one server");
  CHECK(weighted.groups[0].rows == 8);
  CHECK(weighted.groups[1].rows == 4);
}
