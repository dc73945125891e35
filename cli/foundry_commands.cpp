#include "cli/foundry_commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "cli/command.hpp"
#include "cli/format.hpp"
#include "model/atomic_file.hpp"
#include "model/foundry_fit.hpp"
#include "model/foundry_runs.hpp"
#include "model/input_error.hpp"
#include "model/least_squares.hpp"
#include "model/units.hpp"

namespace osdp::cli {
namespace {

FoundryTable read_tables(const std::vector<std::string>& paths) {
  std::vector<FoundryTable> tables;
  for (const std::string& path : paths) tables.push_back(read_foundry_table(path));
  return merge_foundry_tables(std::move(tables));
}

Json optional_json(const std::optional<double>& value) {
  return value ? Json(*value) : Json(nullptr);
}

}  // namespace

int run_foundry_predict(const Scenario& scenario, const std::vector<std::string>& table_paths,
                        bool json) {
  const FoundrySetup setup = read_foundry_setup(scenario);
  const FoundryTable table = read_tables(table_paths);
  // Every row is expressed first, so that a bad row fails before any is costed.
  for (const FoundryRun& run : table.runs) foundry_scenario_for_run(scenario, setup, run);
  std::vector<FoundryPrediction> predictions;
  for (const FoundryRun& run : table.runs) {
    predictions.push_back(predict_foundry_run(scenario, setup, run));
  }

  std::vector<double> errors;
  int out_of_memory = 0;
  Json rows = Json::array();
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const FoundryRun& run = table.runs[i];
    const FoundryPrediction& p = predictions[i];
    const bool fits = p.fits();
    if (!fits) ++out_of_memory;
    const double predicted_s = p.cost.iteration_time_s;
    std::optional<double> error;
    if (fits && run.iteration_time_s) {
      error = 100.0 * (predicted_s - *run.iteration_time_s) / *run.iteration_time_s;
      errors.push_back(*error);
    }
    const double tokens = static_cast<double>(run.global_batch) * run.sequence_length;
    Json row = {
        {"line", run.line},
        {"model", run.model},
        {"sequence_length", run.sequence_length},
        {"gpus", run.gpus},
        {"gpu", run.gpu},
        {"micro_batch", run.micro_batch},
        {"accumulation_steps", run.accumulation_steps},
        {"global_batch", run.global_batch},
        {"precision", run.precision},
        {"mp_mode", run.mixed_precision},
        {"sharding", run.sharding},
        {"activation_checkpointing", run.activation_checkpointing},
        {"fits", fits},
        {"predicted_peak_memory_bytes", p.cost.peak_memory_bytes},
        {"gpu_memory_bytes", p.memory_bytes},
        {"peak_memory_dominated_by", p.cost.peak.dominant_part()},
        {"measured_iteration_time_s", optional_json(run.iteration_time_s)},
        {"predicted_iteration_time_s", fits ? Json(predicted_s) : Json(nullptr)},
        {"error_percent", optional_json(error)},
        {"mfu_percent", optional_json(run.mfu_percent)},
        {"hfu_percent", optional_json(run.hfu_percent)},
        {"throughput_tokens_per_s", optional_json(run.throughput_tokens_per_s)},
        {"predicted_throughput_tokens_per_s", fits ? Json(tokens / predicted_s) : Json(nullptr)}};
    // The published MFU scaled by the step time osdp predicts (same FLOPs, other time).
    row["predicted_mfu_percent"] =
        fits && run.mfu_percent && run.iteration_time_s
            ? Json(*run.mfu_percent * *run.iteration_time_s / predicted_s)
            : Json(nullptr);
    rows.push_back(std::move(row));
  }
  double mape = 0;
  std::vector<double> absolute;
  for (double e : errors) absolute.push_back(std::abs(e));
  for (double a : absolute) mape += a / absolute.size();
  if (json) {
    Json document = {
        {"rows", std::move(rows)},
        {"rows_out_of_memory", out_of_memory},
        {"mape_percent", absolute.empty() ? Json(nullptr) : Json(mape)},
        {"median_abs_error_percent", absolute.empty() ? Json(nullptr) : Json(median(absolute))}};
    fmt::print("{}\n", document.dump(2));
    return exit_ok;
  }
  fmt::print(
      "{}: {} llm-foundry runs on {} (FSDP, one unit per transformer block; GPUs, precision, "
      "sharding and checkpointing per row as the table says)\n",
      table.file, table.runs.size(), scenario.name);
  fmt::print(
      "{:>5} {:>6} {:>4} {:>9} {:>5} {:>4} {:>8} {:>4} {:>10} {:>10} {:>8} {:>9} {:>5} "
      "{:>6} {:>6}\n",
      "model", "seq", "GPUs", "GPU", "micro", "acc", "prec", "ckpt", "measured s", "predicted",
      "error %", "peak GiB", "fits", "MFU", "osdp");
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const FoundryRun& run = table.runs[i];
    const FoundryPrediction& p = predictions[i];
    const bool fits = p.fits();
    const double predicted_s = p.cost.iteration_time_s;
    const std::string measured =
        run.iteration_time_s ? fmt::format("{:.3f}", *run.iteration_time_s) : "-";
    const std::string error =
        fits && run.iteration_time_s
            ? fmt::format("{:+.1f}",
                          100.0 * (predicted_s - *run.iteration_time_s) / *run.iteration_time_s)
            : "-";
    const std::string mfu = run.mfu_percent ? fmt::format("{:.1f}", *run.mfu_percent) : "-";
    const std::string osdp_mfu =
        fits && run.mfu_percent && run.iteration_time_s
            ? fmt::format("{:.1f}", *run.mfu_percent * *run.iteration_time_s / predicted_s)
            : "-";
    fmt::print(
        "{:>5} {:>6} {:>4} {:>9} {:>5} {:>4} {:>8} {:>4} {:>10} {:>10} {:>8} {:>9.1f} {:>5} "
        "{:>6} {:>6}\n",
        run.model, run.sequence_length, run.gpus, run.gpu, run.micro_batch, run.accumulation_steps,
        run.precision, run.activation_checkpointing ? "yes" : "no", measured,
        fits ? fmt::format("{:.3f}", predicted_s) : "OOM", error,
        p.cost.peak_memory_bytes / (1024.0 * 1024.0 * 1024.0), fits ? "yes" : "NO", mfu, osdp_mfu);
  }
  fmt::print("runs called out of memory: {} of {}\n", out_of_memory, table.runs.size());
  if (!absolute.empty()) {
    fmt::print(
        "absolute error over {} rows that fit: mean (MAPE) {:.2f} %, median {:.2f} %, max "
        "{:.2f} %\n",
        absolute.size(), mape, median(absolute),
        *std::max_element(absolute.begin(), absolute.end()));
  }
  return exit_ok;
}

int run_foundry_fit(const Scenario& scenario, const std::vector<std::string>& table_paths,
                    const std::string& out_path, bool json) {
  namespace fs = std::filesystem;
  const FoundrySetup setup = read_foundry_setup(scenario);
  const FoundryTable table = read_tables(table_paths);
  std::error_code error;
  if (!fs::is_directory(out_path, error)) {
    throw InputError("command line", "--out", out_path,
                     "an existing directory: a fit on llm-foundry's table writes one cluster file "
                     "per GPU type into it, named as the scenario's");
  }
  const auto started = std::chrono::steady_clock::now();
  const FoundryFitResult fit = fit_foundry_table(scenario, setup, table);
  const double fit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  require_usable_fit(table.file, "iter_time_s", fit.fit_mape_percent);
  std::vector<std::string> written;
  for (const auto& [type, gpu] : fit.fitted.gpus) {
    const std::string path = (fs::path(out_path) / fs::path(gpu.file).filename()).string();
    write_file_atomically(path, fitted_cluster_json(gpu).dump(2) + "\n");
    written.push_back(path);
  }
  if (json) {
    Json constants = Json::array();
    for (const FoundryConstant& c : fit.constants) {
      constants.push_back(
          {{"chip", c.chip}, {"name", c.name}, {"unit", c.unit}, {"value", c.value}});
    }
    Json rows = Json::array();
    for (std::size_t i = 0; i < table.runs.size(); ++i) {
      const FoundryRun& run = table.runs[i];
      Json row = {{"line", run.line},
                  {"model", run.model},
                  {"sequence_length", run.sequence_length},
                  {"gpus", run.gpus},
                  {"gpu", run.gpu},
                  {"measured_iteration_time_s", *run.iteration_time_s},
                  {"fitted_iteration_time_s", fit.fitted_s[i]},
                  {"by_model_iteration_time_s", fit.by_model_s[i]}};
      row["largest_gpus_iteration_time_s"] =
          run.gpus == fit.largest_gpus ? Json(fit.largest_gpus_s[i]) : Json(nullptr);
      rows.push_back(std::move(row));
    }
    const Json document = {{"cluster_files", written},
                           {"rows", table.runs.size()},
                           {"model_sizes", fit.model_sizes},
                           {"constants", constants},
                           {"fit_mape_percent", fit.fit_mape_percent},
                           {"cv_model_size_mape_percent", fit.by_model_mape_percent},
                           {"largest_gpus", fit.largest_gpus},
                           {"largest_gpus_mape_percent", fit.largest_gpus_mape_percent},
                           {"fit_time_s", fit_s},
                           {"predictions", rows}};
    fmt::print("{}\n", document.dump(2));
    return exit_ok;
  }
  fmt::print("fitted {} constants on {} llm-foundry runs of {} model sizes ({}), in {:.1f} s\n",
             fit.constants.size(), table.runs.size(), fit.model_sizes, table.file, fit_s);
  for (const FoundryConstant& c : fit.constants) {
    fmt::print("  {:<6} {:<50} {:>10.4g} {}\n", c.chip, c.name, c.value, c.unit);
  }
  fmt::print("fit-set MAPE                                              {:.2f} %\n",
             fit.fit_mape_percent);
  fmt::print("cross-validated MAPE (leave one model size out)           {:.2f} %\n",
             fit.by_model_mape_percent);
  fmt::print("the {}-GPU runs, fitted on the smaller runs only: MAPE     {:.2f} %\n",
             fit.largest_gpus, fit.largest_gpus_mape_percent);
  for (const std::string& path : written) fmt::print("wrote {}\n", path);
  return exit_ok;
}

}  // namespace osdp::cli
