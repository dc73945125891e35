#include "model/least_squares.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/input_error.hpp"

namespace osdp {

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

double mean_abs_percent_error(const std::vector<double>& predicted,
                              const std::vector<double>& measured, double* max_percent) {
  double sum = 0;
  double most = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    const double error = 100.0 * std::abs(predicted[i] - measured[i]) / measured[i];
    sum += error;
    most = std::max(most, error);
  }
  if (max_percent != nullptr) *max_percent = most;
  return measured.empty() ? 0.0 : sum / static_cast<double>(measured.size());
}

void require_usable_fit(const std::string& file, const std::string& column,
                        double fit_mape_percent) {
  if (fit_mape_percent <= most_usable_fit_mape_percent) return;
  throw InputError(
      file, fmt::format("column \"{}\"", column),
      fmt::format("times no set of constants fits (fit-set MAPE {:.4g} %)", fit_mape_percent),
      fmt::format("times in the unit the header names, of runs the scenario "
                  "describes, that a fit matches within {:.0f} % on average (no "
                  "cluster written)",
                  most_usable_fit_mape_percent));
}

}  // namespace osdp
