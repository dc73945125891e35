#include "cli/kernel_commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "cli/command.hpp"
#include "model/atomic_file.hpp"
#include "model/cluster_json.hpp"
#include "model/input_error.hpp"
#include "model/json_reader.hpp"

namespace osdp::cli {
namespace {

std::string kind_name(KernelTableKind kind) {
  return kind == KernelTableKind::gemm ? "gemm" : "attention";
}

// The law in words: what the cost model takes from it.
std::string describe(const KernelLawFit& fit) {
  if (fit.name == "matrix product") {
    return fmt::format("{:.1f} us + FLOPs / {:.1f} TFLOP/s", fit.law.fixed_s * 1e6,
                       fit.law.flops_per_s ? *fit.law.flops_per_s / 1e12 : 0.0);
  }
  return fmt::format("score FLOPs / {:.1f} TFLOP/s + rows x {:.3f} ns",
                     fit.law.score_flops_per_s ? *fit.law.score_flops_per_s / 1e12 : 0.0,
                     fit.law.score_row_s.value_or(0.0) * 1e9);
}

Json law_json(const KernelLawFit& fit) {
  Json law = Json::object();
  if (fit.name == "matrix product") {
    law["fixed_s"] = fit.law.fixed_s;
    law["flops_per_s"] = fit.law.flops_per_s ? Json(*fit.law.flops_per_s) : Json(nullptr);
  } else {
    law["score_flops_per_s"] =
        fit.law.score_flops_per_s ? Json(*fit.law.score_flops_per_s) : Json(nullptr);
    law["score_row_s"] = fit.law.score_row_s.value_or(0.0);
  }
  return {{"name", fit.name},
          {"law", law},
          {"fit_mape_percent", fit.fit_mape_percent},
          {"fit_max_percent", fit.fit_max_percent},
          // null: the table has one group only, nothing to leave out.
          {"cv_mape_percent", fit.groups > 1 ? Json(fit.cv_mape_percent) : Json(nullptr)},
          {"cross_validated_by", fit.group_by}};
}

}  // namespace

std::optional<KernelTable> kernel_table_in(const std::vector<std::string>& table_paths) {
  std::optional<std::size_t> kernel_at;
  for (std::size_t i = 0; i < table_paths.size(); ++i) {
    const std::string text = read_input_file(table_paths[i], "CSV");
    const std::string header = text.substr(0, text.find('\n'));
    if (kernel_table_kind(header)) {
      if (table_paths.size() > 1) {
        throw InputError("command line", "--table", table_paths[i],
                         "a kernel table on its own (one --table), not beside other tables");
      }
      return parse_kernel_table(text, table_paths[i]);
    }
  }
  return std::nullopt;
}

int run_kernel_fit(const Scenario& scenario, const KernelTable& table, const std::string& out_path,
                   bool json) {
  if (const auto why = unusable_output(out_path)) {
    throw InputError("command line", "--out", out_path,
                     "a path osdp can write the cluster to, not " + *why);
  }
  const std::vector<KernelLawFit> fits = fit_kernel_table(table);
  Cluster cluster = scenario.cluster;
  apply_kernel_laws(cluster, fits);
  Json document = scenario.cluster_document;
  document["gpu"]["operator_compute"] = cluster_to_json(cluster)["gpu"]["operator_compute"];
  // What is written must load (a rate above the GPU's peak_compute would not). Where it does
  // not, the table's times are what is wrong (too fast for the GPU: a unit slip), not the file
  // not yet written.
  try {
    load_cluster(JsonReader(document, out_path));
  } catch (const InputError& error) {
    throw InputError(table.file, "rows",
                     fmt::format("times that fit a law the cluster refuses ({} {}: {})",
                                 error.json_path(), error.value(), error.expected()),
                     "kernel times this GPU can reach (in seconds, as the header says)");
  }
  write_file_atomically(out_path, document.dump(2) + "\n");
  if (json) {
    Json laws = Json::array();
    for (const KernelLawFit& fit : fits) laws.push_back(law_json(fit));
    fmt::print("{}\n", Json{{"table", table.file},
                            {"kind", kind_name(table.kind)},
                            {"rows", table.rows()},
                            {"laws", laws},
                            {"cluster_file", out_path}}
                           .dump(2));
    return exit_ok;
  }
  fmt::print("fitted on {} {} kernels ({}):\n", table.rows(),
             table.kind == KernelTableKind::gemm ? "GEMM" : "attention", table.file);
  for (const KernelLawFit& fit : fits) {
    const std::string held_out =
        fit.groups > 1 ? fmt::format("leave one {} out {:.2f} %", fit.group_by, fit.cv_mape_percent)
                       : fmt::format("one {} only: none left out", fit.group_by);
    fmt::print("  {:<19} {:<46} fit MAPE {:5.2f} % (max {:.1f} %), {}\n", fit.name, describe(fit),
               fit.fit_mape_percent, fit.fit_max_percent, held_out);
  }
  fmt::print(
      "wrote {} ({}'s cluster with these laws in its {})\n", out_path, scenario.name,
      table.kind == KernelTableKind::gemm ? "attention, mlp and head laws" : "attention law");
  return exit_ok;
}

int run_kernel_predict(const Scenario& scenario, const KernelTable& table, bool json) {
  const std::vector<double> predicted =
      predict_kernel_table(scenario.cluster, scenario.cluster_source, table);
  std::vector<double> measured;
  std::vector<std::string> group;
  Json rows = Json::array();
  for (int i = 0; i < table.rows(); ++i) {
    Json row;
    if (table.kind == KernelTableKind::gemm) {
      const GemmTiming& gemm = table.gemms[i];
      measured.push_back(gemm.median_s);
      group.push_back(gemm.what);
      row = {{"line", gemm.line}, {"tokens", gemm.tokens}, {"k", gemm.k},
             {"n", gemm.n},       {"what", gemm.what},     {"measured_s", gemm.median_s}};
    } else {
      const AttentionTiming& a = table.attention[i];
      measured.push_back(a.forward_backward_s);
      group.push_back(fmt::format("sequence {:.0f}", a.sequence));
      row = {{"line", a.line},         {"batch", a.batch},
             {"heads", a.heads},       {"sequence", a.sequence},
             {"head_dim", a.head_dim}, {"measured_s", a.forward_backward_s}};
    }
    row["predicted_s"] = predicted[i];
    row["error_percent"] = 100.0 * (predicted[i] - measured[i]) / measured[i];
    rows.push_back(std::move(row));
  }
  double total = 0;
  std::map<std::string, std::pair<double, int>> by_group;
  for (int i = 0; i < table.rows(); ++i) {
    const double error = 100.0 * std::abs(predicted[i] - measured[i]) / measured[i];
    total += error;
    by_group[group[i]].first += error;
    ++by_group[group[i]].second;
  }
  const double mape = total / table.rows();
  if (json) {
    fmt::print("{}\n", Json{{"table", table.file},
                            {"kind", kind_name(table.kind)},
                            {"mape_percent", mape},
                            {"rows", rows}}
                           .dump(2));
    return exit_ok;
  }
  fmt::print(
      "{} {} kernels ({}) timed with {}'s {} laws{}:\n", table.rows(),
      table.kind == KernelTableKind::gemm ? "GEMM" : "attention (forward + backward)", table.file,
      scenario.cluster.name, scenario.name,
      table.kind == KernelTableKind::gemm ? " (a product: half a forward call's fixed part)" : "");
  for (const auto& [name, sum] : by_group) {
    fmt::print("  {:<16} {:>4} rows  MAPE {:6.2f} %\n", name, sum.second, sum.first / sum.second);
  }
  fmt::print("  {:<16} {:>4} rows  MAPE {:6.2f} %\n", "all", table.rows(), mape);
  return exit_ok;
}

}  // namespace osdp::cli
