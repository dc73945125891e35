#include "sim/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "sim/program.hpp"

namespace osdp::sim {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// The constants in the fit's units: s per TFLOP (rates), ms (fixed).
enum Constant { layer_rate, head_rate, layer_fixed, edge_fixed, constants_count };

std::vector<FitConstant> describe_constants(const std::vector<double>& theta) {
  auto rate = [](double seconds_per_unit) {
    return seconds_per_unit > 0 ? 1.0 / seconds_per_unit : infinity;
  };
  return {{"layer rate (attention, MLP)", "TFLOP/s", rate(theta[layer_rate])},
          {"head rate (LM head + loss)", "TFLOP/s", rate(theta[head_rate])},
          {"layer fixed per forward call (backward: 2x)", "ms", theta[layer_fixed]},
          {"embedding / head fixed per forward call (backward: 2x)", "ms", theta[edge_fixed]}};
}

ComputeLaw law(double fixed_ms, double seconds_per_tflop) {
  ComputeLaw result;
  result.fixed_s = fixed_ms * 1e-3;
  result.flops_per_s = seconds_per_tflop > 0 ? 1e12 / seconds_per_tflop : infinity;
  return result;
}

OperatorCompute phases(double fixed_ms, double seconds_per_tflop) {
  // A backward runs two MatMuls per forward MatMul: twice the calls' fixed part, same rate.
  return {law(fixed_ms, seconds_per_tflop), law(2 * fixed_ms, seconds_per_tflop)};
}

// Time of an iteration whose items run one after another: what the simulator gives for a plan
// without overlap (all DP, gradients all-reduced after the backward), with uncontended rings.
double serial_time_s(const Program& program, const Cluster& cluster) {
  double total = 0;
  for (const ProgramItem& item : program.items) {
    if (!item.collective) {
      total += item.work_s;
    } else {
      total += cluster.world.time_s(item.kind, item.bytes, cluster.ranks);
    }
  }
  return total;
}

double row_time_s(const Scenario& run, const Plan& plan, const Cluster& cluster,
                  const SimOptions& options) {
  const CostModel model(*run.workload, cluster, run.training, run.cost);
  return serial_time_s(build_program(model, plan, options), cluster);
}

std::vector<double> solve_weighted(const std::vector<RowModel>& rows,
                                   const std::vector<double>& measured,
                                   const std::vector<int>& use) {
  // Relative residuals: divide each row by its measurement. Columns scaled to unit maximum
  // (NNLS is invariant to it; the normal equations are better conditioned).
  std::vector<double> scale(constants_count, 0.0);
  for (int r : use) {
    for (int g = 0; g < constants_count; ++g) {
      scale[g] = std::max(scale[g], std::abs(rows[r].features[g] / measured[r]));
    }
  }
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (int r : use) {
    std::vector<double> line(constants_count);
    for (int g = 0; g < constants_count; ++g) {
      line[g] = scale[g] > 0 ? rows[r].features[g] / measured[r] / scale[g] : 0.0;
    }
    a.push_back(std::move(line));
    b.push_back((measured[r] - rows[r].base_s) / measured[r]);
  }
  std::vector<double> theta = non_negative_least_squares(a, b);
  for (int g = 0; g < constants_count; ++g) theta[g] = scale[g] > 0 ? theta[g] / scale[g] : 0.0;
  return theta;
}

double predict(const RowModel& row, const std::vector<double>& theta) {
  double total = row.base_s;
  for (int g = 0; g < constants_count; ++g) total += row.features[g] * theta[g];
  return total;
}

// Six significant digits: the written cluster does not change with the last bits of a solve.
double rounded(double value) { return std::stod(fmt::format("{:.6g}", value)); }

Json cluster_document_with(const Json& document, const std::vector<double>& theta) {
  Json cluster = document;
  Json& gpu = cluster["gpu"];
  if (!gpu.is_object()) gpu = Json::object();
  auto law_json = [](double fixed_ms, double seconds_per_tflop) {
    Json json = {{"fixed", rounded(fixed_ms * 1e-3)}};
    if (seconds_per_tflop > 0) json["rate"] = rounded(1e12 / seconds_per_tflop);
    return json;
  };
  auto kind_json = [&](double fixed_ms, double seconds_per_tflop) {
    return Json{{"forward", law_json(fixed_ms, seconds_per_tflop)},
                {"backward", law_json(2 * fixed_ms, seconds_per_tflop)}};
  };
  gpu["operator_compute"] = {{"embedding", kind_json(theta[edge_fixed], 0.0)},
                             {"attention", kind_json(theta[layer_fixed], theta[layer_rate])},
                             {"mlp", kind_json(theta[layer_fixed], theta[layer_rate])},
                             {"head", kind_json(theta[edge_fixed], theta[head_rate])}};
  return cluster;
}

}  // namespace

Cluster cluster_with_constants(const Cluster& base, const std::vector<double>& theta) {
  Cluster cluster = base;
  auto& laws = cluster.gpu.operator_compute;
  laws["embedding"] = phases(theta[edge_fixed], 0.0);
  laws["embedding"].forward.flops_per_s.reset();  // no FLOPs: its fixed part is all of it
  laws["embedding"].backward.flops_per_s.reset();
  laws["attention"] = phases(theta[layer_fixed], theta[layer_rate]);
  laws["mlp"] = phases(theta[layer_fixed], theta[layer_rate]);
  laws["head"] = phases(theta[edge_fixed], theta[head_rate]);
  return cluster;
}

std::vector<RowModel> row_models(const Scenario& scenario, const MeasuredTable& table,
                                 const SimOptions& options) {
  const RunSetup setup = read_run_setup(scenario);
  if (setup.mode != Mode::dp || options.gradient_all_reduce != GradientAllReduce::after_backward) {
    throw InputError(scenario.file, "$.simulation.gradient_all_reduce",
                     "a setup whose communication overlaps compute",
                     "\"measured_runs\": {\"mode\": \"dp\"} and \"gradient_all_reduce\": "
                     "\"after_backward\" (the fit sums the iteration's parts)");
  }
  std::vector<RowModel> rows;
  for (const MeasuredRun& run : table.runs) {
    const Scenario run_scenario = scenario_for_run(scenario, table, run);
    const Plan plan = plan_for_run(run_scenario, setup, run);
    RowModel row;
    const std::vector<double> zero(constants_count, 0.0);
    row.base_s =
        row_time_s(run_scenario, plan, cluster_with_constants(run_scenario.cluster, zero), options);
    for (int g = 0; g < constants_count; ++g) {
      std::vector<double> unit = zero;
      unit[g] = 1.0;
      const double time = row_time_s(run_scenario, plan,
                                     cluster_with_constants(run_scenario.cluster, unit), options);
      row.features.push_back(time - row.base_s);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

FitResult fit_table(const Scenario& scenario, const MeasuredTable& table,
                    const SimOptions& options) {
  if (!table.has_times()) {
    throw InputError(table.file, "header (line 1)", "no \"iteration time (ms)\" column",
                     "measured iteration times to fit");
  }
  const std::vector<RowModel> rows = row_models(scenario, table, options);
  std::vector<double> measured;
  for (const MeasuredRun& run : table.runs) measured.push_back(*run.iteration_time_s);
  const int n = static_cast<int>(rows.size());

  FitResult result;
  std::vector<int> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  const std::vector<double> theta = solve_weighted(rows, measured, all);
  for (int r = 0; r < n; ++r) result.fitted_s.push_back(predict(rows[r], theta));

  // Leave one model size out: fit without its rows, predict them.
  std::map<std::string, std::vector<int>> by_size;
  for (int r = 0; r < n; ++r) by_size[table.runs[r].model_size()].push_back(r);
  result.model_sizes = static_cast<int>(by_size.size());
  result.validated_s.assign(n, 0.0);
  for (const auto& [size, held_out] : by_size) {
    std::vector<int> train;
    for (int r = 0; r < n; ++r) {
      if (table.runs[r].model_size() != size) train.push_back(r);
    }
    if (train.empty()) {
      throw InputError(table.file, "rows", "one model size",
                       "rows of at least two model sizes (for cross-validation)");
    }
    const std::vector<double> fold = solve_weighted(rows, measured, train);
    for (int r : held_out) result.validated_s[r] = predict(rows[r], fold);
  }
  result.fit_mape_percent = mean_abs_percent_error(result.fitted_s, measured);
  result.cv_mape_percent = mean_abs_percent_error(result.validated_s, measured);
  result.constants = describe_constants(theta);
  result.cluster_json = cluster_document_with(scenario.cluster_document, theta);
  result.cluster = cluster_with_constants(scenario.cluster, theta);
  return result;
}

double mean_abs_percent_error(const std::vector<double>& predicted,
                              const std::vector<double>& measured) {
  double total = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    total += std::abs(predicted[i] - measured[i]) / measured[i];
  }
  return measured.empty() ? 0.0 : 100.0 * total / static_cast<double>(measured.size());
}

namespace {

// Least squares over the columns in `passive` (normal equations; a handful of scaled columns).
std::vector<double> least_squares_on(const std::vector<std::vector<double>>& a,
                                     const std::vector<double>& b, const std::vector<int>& passive,
                                     int columns) {
  const int k = static_cast<int>(passive.size());
  std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0.0));
  for (std::size_t r = 0; r < a.size(); ++r) {
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) m[i][j] += a[r][passive[i]] * a[r][passive[j]];
      m[i][k] += a[r][passive[i]] * b[r];
    }
  }
  // Gaussian elimination with partial pivoting; a (near-)singular column stays at zero.
  for (int c = 0; c < k; ++c) {
    int pivot = c;
    for (int r = c + 1; r < k; ++r) {
      if (std::abs(m[r][c]) > std::abs(m[pivot][c])) pivot = r;
    }
    std::swap(m[c], m[pivot]);
    if (std::abs(m[c][c]) < 1e-14) continue;
    for (int r = 0; r < k; ++r) {
      if (r == c) continue;
      const double factor = m[r][c] / m[c][c];
      for (int j = c; j <= k; ++j) m[r][j] -= factor * m[c][j];
    }
  }
  std::vector<double> x(columns, 0.0);
  for (int i = 0; i < k; ++i) {
    if (std::abs(m[i][i]) >= 1e-14) x[passive[i]] = m[i][k] / m[i][i];
  }
  return x;
}

}  // namespace

std::vector<double> non_negative_least_squares(const std::vector<std::vector<double>>& a,
                                               const std::vector<double>& b) {
  const int columns = a.empty() ? 0 : static_cast<int>(a[0].size());
  std::vector<double> x(columns, 0.0);
  std::vector<bool> is_passive(columns, false);
  constexpr double tolerance = 1e-12;
  for (int outer = 0; outer < 10 * columns + 10; ++outer) {
    // Gradient of -1/2 ||Ax - b||^2: the column that most reduces the residual enters.
    std::vector<double> w(columns, 0.0);
    for (std::size_t r = 0; r < a.size(); ++r) {
      double residual = b[r];
      for (int j = 0; j < columns; ++j) residual -= a[r][j] * x[j];
      for (int j = 0; j < columns; ++j) w[j] += a[r][j] * residual;
    }
    int entering = -1;
    for (int j = 0; j < columns; ++j) {
      if (!is_passive[j] && w[j] > tolerance && (entering < 0 || w[j] > w[entering])) entering = j;
    }
    if (entering < 0) break;
    is_passive[entering] = true;
    for (int inner = 0; inner < 10 * columns + 10; ++inner) {
      std::vector<int> passive;
      for (int j = 0; j < columns; ++j) {
        if (is_passive[j]) passive.push_back(j);
      }
      const std::vector<double> z = least_squares_on(a, b, passive, columns);
      bool feasible = true;
      for (int j : passive) feasible = feasible && z[j] > 0;
      if (feasible) {
        x = z;
        break;
      }
      // Step towards z until the first passive coefficient reaches zero; it leaves.
      double alpha = 1.0;
      for (int j : passive) {
        if (z[j] <= 0) alpha = std::min(alpha, x[j] / (x[j] - z[j]));
      }
      for (int j = 0; j < columns; ++j) x[j] += alpha * (z[j] - x[j]);
      for (int j : passive) {
        if (x[j] <= tolerance) {
          x[j] = 0;
          is_passive[j] = false;
        }
      }
    }
  }
  return x;
}

}  // namespace osdp::sim
