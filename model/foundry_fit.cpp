#include "model/foundry_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/cluster_json.hpp"
#include "model/input_error.hpp"
#include "model/least_squares.hpp"

namespace osdp {
namespace {

enum ChipConstant { gemm_rate, score_rate, layer_fixed, traffic, per_chip };

// One row, prepared once: its scenario (wrapped model, training, cluster) and plan.
struct PreparedRow {
  Scenario scenario;
  Plan plan;
  std::string chip;
  bool fp8 = false;
  double measured_s = 0;
};

// The parameter vector: per chip its four constants (in SI units), then an fp8 speedup per chip
// that has fp8 rows. Fitted as logarithms, so that every constant stays positive.
struct Layout {
  std::vector<std::string> chips;
  std::vector<std::string> fp8_chips;
  std::map<std::string, double> peak_flops_per_s;
  int size() const { return static_cast<int>(chips.size() * per_chip + fp8_chips.size()); }
  int chip_index(const std::string& chip) const {
    return static_cast<int>(std::find(chips.begin(), chips.end(), chip) - chips.begin());
  }
  int fp8_index(const std::string& chip) const {
    const auto at = std::find(fp8_chips.begin(), fp8_chips.end(), chip);
    return at == fp8_chips.end()
               ? -1
               : static_cast<int>(chips.size() * per_chip + (at - fp8_chips.begin()));
  }
};

// The chip's laws from its constants: attention and MLP at the GEMM and score rates with their
// fixed part and activation traffic; the head at the GEMM rate; the embedding free of compute.
void set_constants(Cluster& cluster, const double* c, double fp8_speedup) {
  auto& laws = cluster.gpu.operator_compute;
  laws.clear();
  ComputeLaw layer;
  layer.fixed_s = c[layer_fixed];
  layer.flops_per_s = c[gemm_rate];
  layer.score_flops_per_s = c[score_rate];
  layer.activation_bytes_per_s = c[traffic];
  ComputeLaw layer_backward = layer;
  layer_backward.fixed_s = 2.0 * c[layer_fixed];
  laws["attention"] = {layer, layer_backward};
  laws["mlp"] = {layer, layer_backward};
  ComputeLaw head;
  head.flops_per_s = c[gemm_rate];
  laws["head"] = {head, head};
  laws["embedding"] = {ComputeLaw{}, ComputeLaw{}};
  cluster.gpu.fp8_speedup = fp8_speedup;
}

std::vector<double> chip_constants(const Layout& layout, const std::vector<double>& x,
                                   const std::string& chip, double* fp8_speedup) {
  const int at = layout.chip_index(chip) * per_chip;
  std::vector<double> c(per_chip);
  for (int k = 0; k < per_chip; ++k) c[k] = std::exp(x[at + k]);
  const int fp8 = layout.fp8_index(chip);
  *fp8_speedup = fp8 >= 0 ? std::exp(x[fp8]) : 1.0;
  return c;
}

double predict_row(const PreparedRow& row, const Layout& layout, const std::vector<double>& x) {
  double fp8_speedup = 1.0;
  const std::vector<double> c = chip_constants(layout, x, row.chip, &fp8_speedup);
  Cluster cluster = row.scenario.cluster;
  set_constants(cluster, c.data(), fp8_speedup);
  if (row.fp8) apply_fp8(cluster);
  const CostModel costs(*row.scenario.workload, cluster, row.scenario.training, row.scenario.cost);
  return costs.plan_cost(row.plan).iteration_time_s;
}

// Keeps rates at most the chip's peak and speedups within [1, 2].
void clamp(const Layout& layout, std::vector<double>& x) {
  for (std::size_t i = 0; i < layout.chips.size(); ++i) {
    const auto peak = layout.peak_flops_per_s.find(layout.chips[i]);
    if (peak == layout.peak_flops_per_s.end()) continue;
    for (int k : {gemm_rate, score_rate}) {
      x[i * per_chip + k] = std::min(x[i * per_chip + k], std::log(peak->second));
    }
  }
  for (const std::string& chip : layout.fp8_chips) {
    double& s = x[layout.fp8_index(chip)];
    s = std::clamp(s, 0.0, std::log(2.0));
  }
}

std::vector<double> residuals(const std::vector<PreparedRow>& rows, const std::vector<int>& use,
                              const Layout& layout, const std::vector<double>& x) {
  std::vector<double> r;
  r.reserve(use.size());
  for (int i : use)
    r.push_back((predict_row(rows[i], layout, x) - rows[i].measured_s) / rows[i].measured_s);
  return r;
}

double squared(const std::vector<double>& r) {
  double sum = 0;
  for (double v : r) sum += v * v;
  return sum;
}

// Solves (A + lambda diag(A)) d = g by Gaussian elimination with partial pivoting.
std::vector<double> solve_damped(std::vector<std::vector<double>> a, std::vector<double> g,
                                 double lambda) {
  const int n = static_cast<int>(g.size());
  for (int i = 0; i < n; ++i) a[i][i] += lambda * std::max(a[i][i], 1e-12);
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int row = col + 1; row < n; ++row) {
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    }
    std::swap(a[col], a[pivot]);
    std::swap(g[col], g[pivot]);
    if (std::abs(a[col][col]) < 1e-300) continue;
    for (int row = col + 1; row < n; ++row) {
      const double f = a[row][col] / a[col][col];
      for (int k = col; k < n; ++k) a[row][k] -= f * a[col][k];
      g[row] -= f * g[col];
    }
  }
  std::vector<double> d(n, 0.0);
  for (int i = n - 1; i >= 0; --i) {
    if (std::abs(a[i][i]) < 1e-300) continue;
    double sum = g[i];
    for (int k = i + 1; k < n; ++k) sum -= a[i][k] * d[k];
    d[i] = sum / a[i][i];
  }
  return d;
}

// Levenberg-Marquardt on the rows `use`, from x, with forward-difference Jacobians.
std::vector<double> levenberg_marquardt(const std::vector<PreparedRow>& rows,
                                        const std::vector<int>& use, const Layout& layout,
                                        std::vector<double> x) {
  const int n = layout.size();
  clamp(layout, x);
  std::vector<double> r = residuals(rows, use, layout, x);
  double cost = squared(r);
  double lambda = 1e-2;
  for (int iteration = 0; iteration < 60; ++iteration) {
    std::vector<std::vector<double>> jacobian(r.size(), std::vector<double>(n, 0.0));
    for (int k = 0; k < n; ++k) {
      std::vector<double> moved = x;
      const double step = 1e-5;
      moved[k] += step;
      const std::vector<double> rk = residuals(rows, use, layout, moved);
      for (std::size_t i = 0; i < r.size(); ++i) jacobian[i][k] = (rk[i] - r[i]) / step;
    }
    std::vector<std::vector<double>> a(n, std::vector<double>(n, 0.0));
    std::vector<double> g(n, 0.0);
    for (std::size_t i = 0; i < r.size(); ++i) {
      for (int p = 0; p < n; ++p) {
        g[p] -= jacobian[i][p] * r[i];
        for (int q = 0; q < n; ++q) a[p][q] += jacobian[i][p] * jacobian[i][q];
      }
    }
    bool improved = false;
    for (int attempt = 0; attempt < 12 && !improved; ++attempt) {
      const std::vector<double> d = solve_damped(a, g, lambda);
      std::vector<double> trial = x;
      for (int k = 0; k < n; ++k) trial[k] += std::clamp(d[k], -2.0, 2.0);
      clamp(layout, trial);
      const std::vector<double> rt = residuals(rows, use, layout, trial);
      const double trial_cost = squared(rt);
      if (trial_cost < cost) {
        const double gain = cost - trial_cost;
        x = trial;
        r = rt;
        cost = trial_cost;
        lambda = std::max(lambda / 3.0, 1e-7);
        improved = true;
        if (gain < 1e-10 * std::max(cost, 1e-12)) return x;
      } else {
        lambda *= 4.0;
      }
    }
    if (!improved) break;
  }
  return x;
}

double mape(const std::vector<double>& predicted, const std::vector<PreparedRow>& rows,
            const std::vector<int>& use) {
  std::vector<double> predicted_used;
  std::vector<double> measured_used;
  for (int i : use) {
    predicted_used.push_back(predicted[i]);
    measured_used.push_back(rows[i].measured_s);
  }
  return mean_abs_percent_error(predicted_used, measured_used);
}

std::vector<double> starting_point(const Layout& layout) {
  std::vector<double> x(layout.size(), 0.0);
  for (std::size_t i = 0; i < layout.chips.size(); ++i) {
    const auto peak = layout.peak_flops_per_s.find(layout.chips[i]);
    const double p = peak == layout.peak_flops_per_s.end() ? 300e12 : peak->second;
    x[i * per_chip + gemm_rate] = std::log(0.6 * p);
    x[i * per_chip + score_rate] = std::log(0.4 * p);
    x[i * per_chip + layer_fixed] = std::log(50e-6);
    x[i * per_chip + traffic] = std::log(1e12);
  }
  for (const std::string& chip : layout.fp8_chips) x[layout.fp8_index(chip)] = std::log(1.3);
  return x;
}

}  // namespace

Json fitted_cluster_json(const FoundryGpu& gpu) {
  Json document = gpu.document;
  Json written = cluster_to_json(gpu.cluster);
  document["gpu"]["operator_compute"] = written["gpu"]["operator_compute"];
  if (gpu.cluster.gpu.fp8_speedup != 1.0) {
    document["gpu"]["fp8_speedup"] = gpu.cluster.gpu.fp8_speedup;
  } else {
    document["gpu"].erase("fp8_speedup");
  }
  return document;
}

FoundryFitResult fit_foundry_table(const Scenario& scenario, const FoundrySetup& setup,
                                   const FoundryTable& table) {
  Layout layout;
  std::vector<PreparedRow> rows;
  for (const FoundryRun& run : table.runs) {
    if (!run.iteration_time_s) {
      fail_foundry_cell(run, "iter_time_s", "nothing", "a measured step time to fit against");
    }
    PreparedRow row;
    // The type's own cluster without fp8 applied: the fit applies its own speedup.
    FoundryRun as_bf16 = run;
    if (run.precision == "amp_fp8") as_bf16.precision = "amp_bf16";
    row.scenario = foundry_scenario_for_run(scenario, setup, as_bf16);
    row.plan = foundry_plan_for_run(row.scenario, run);
    const FoundryGpu& gpu = setup.gpus.at(run.gpu);
    row.chip = gpu.chip;
    row.fp8 = run.precision == "amp_fp8";
    row.measured_s = *run.iteration_time_s;
    if (std::find(layout.chips.begin(), layout.chips.end(), row.chip) == layout.chips.end()) {
      layout.chips.push_back(row.chip);
      if (gpu.cluster.gpu.peak_flops_per_s) {
        layout.peak_flops_per_s[row.chip] = *gpu.cluster.gpu.peak_flops_per_s;
      }
    }
    if (row.fp8 && std::find(layout.fp8_chips.begin(), layout.fp8_chips.end(), row.chip) ==
                       layout.fp8_chips.end()) {
      layout.fp8_chips.push_back(row.chip);
    }
    rows.push_back(std::move(row));
  }
  std::vector<int> all(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) all[i] = static_cast<int>(i);

  FoundryFitResult result;
  const std::vector<double> start = starting_point(layout);
  const std::vector<double> x = levenberg_marquardt(rows, all, layout, start);
  result.fitted_s.resize(rows.size());
  for (int i : all) result.fitted_s[i] = predict_row(rows[i], layout, x);
  result.fit_mape_percent = mape(result.fitted_s, rows, all);

  // Leave one model size out: each size predicted by constants fitted on the others.
  std::set<std::string> sizes;
  for (const FoundryRun& run : table.runs) sizes.insert(run.model);
  result.model_sizes = static_cast<int>(sizes.size());
  result.by_model_s.resize(rows.size());
  for (const std::string& size : sizes) {
    std::vector<int> train, held;
    for (int i : all) (table.runs[i].model == size ? held : train).push_back(i);
    const std::vector<double> xf = train.empty() ? x : levenberg_marquardt(rows, train, layout, x);
    for (int i : held) result.by_model_s[i] = predict_row(rows[i], layout, xf);
  }
  result.by_model_mape_percent = mape(result.by_model_s, rows, all);

  // The largest GPU count predicted from the smaller ones: how a fit extrapolates in scale.
  for (const FoundryRun& run : table.runs)
    result.largest_gpus = std::max(result.largest_gpus, run.gpus);
  std::vector<int> train, held;
  for (int i : all) (table.runs[i].gpus == result.largest_gpus ? held : train).push_back(i);
  result.largest_gpus_s.assign(rows.size(), 0.0);
  if (!train.empty()) {
    const std::vector<double> xg = levenberg_marquardt(rows, train, layout, x);
    for (int i : held) result.largest_gpus_s[i] = predict_row(rows[i], layout, xg);
    result.largest_gpus_mape_percent = mape(result.largest_gpus_s, rows, held);
  }

  // The constants, and the setup's clusters with them.
  result.fitted = setup;
  for (auto& [type, gpu] : result.fitted.gpus) {
    if (layout.chip_index(gpu.chip) >= static_cast<int>(layout.chips.size())) continue;
    double fp8_speedup = 1.0;
    const std::vector<double> c = chip_constants(layout, x, gpu.chip, &fp8_speedup);
    set_constants(gpu.cluster, c.data(), fp8_speedup);
  }
  for (const std::string& chip : layout.chips) {
    double fp8_speedup = 1.0;
    const std::vector<double> c = chip_constants(layout, x, chip, &fp8_speedup);
    result.constants.push_back({chip, "GEMM rate (layers, head)", "TFLOP/s", c[gemm_rate] / 1e12});
    result.constants.push_back({chip, "attention score rate", "TFLOP/s", c[score_rate] / 1e12});
    result.constants.push_back(
        {chip, "layer fixed per forward call (backward: 2x)", "ms", c[layer_fixed] * 1e3});
    result.constants.push_back(
        {chip, "activation traffic (saved bytes; backward: 2x)", "TB/s", c[traffic] / 1e12});
    if (layout.fp8_index(chip) >= 0) {
      result.constants.push_back({chip, "fp8 speedup of the matrix products", "x", fp8_speedup});
    }
  }
  return result;
}

}  // namespace osdp
