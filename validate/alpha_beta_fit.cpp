#include "validate/alpha_beta_fit.hpp"

#include <algorithm>

namespace osdp::validate {
namespace {

// Sums for a least-squares line y = intercept + slope * x.
struct LineSums {
  double count = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;

  explicit LineSums(const std::vector<std::pair<double, double>>& points) {
    for (const auto& [x, y] : points) {
      count += 1;
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
  }
  double slope() const {
    const double denominator = count * sxx - sx * sx;
    return denominator > 0 ? (count * sxy - sx * sy) / denominator : 0.0;
  }
  double intercept(double slope) const { return count > 0 ? (sy - slope * sx) / count : 0.0; }
  double slope_through_origin() const { return sxx > 0 ? sxy / sxx : 0.0; }
};

}  // namespace

CollectiveTiming fit_collective_timing(std::vector<std::pair<double, double>> points) {
  std::sort(points.begin(), points.end());
  CollectiveTiming timing;
  if (points.empty()) return timing;
  // Least squares t = alpha + beta * bytes.
  const LineSums sums(points);
  const double beta = std::max(sums.slope(), 0.0);
  timing.alpha_beta = {std::max(sums.intercept(beta), 0.0), beta};
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    const auto [x0, y0] = points[i];
    const auto [x1, y1] = points[i + 1];
    const double slope = x1 > x0 ? std::max((y1 - y0) / (x1 - x0), 0.0) : 0.0;
    timing.by_size.push_back({i == 0 ? 0.0 : x0, {std::max(y0 - slope * x0, 0.0), slope}});
  }
  return timing;
}

AlphaBeta fit_alpha_beta(const std::vector<std::pair<double, double>>& points) {
  double w = 0, wx = 0, wy = 0, wxx = 0, wxy = 0;
  for (const auto& [x, y] : points) {
    if (y <= 0) continue;
    const double weight = 1.0 / (y * y);
    w += weight;
    wx += weight * x;
    wy += weight * y;
    wxx += weight * x * x;
    wxy += weight * x * y;
  }
  if (w <= 0) return {};
  const double denominator = w * wxx - wx * wx;
  double beta = denominator > 0 ? (w * wxy - wx * wy) / denominator : 0.0;
  double alpha = (wy - beta * wx) / w;
  if (beta < 0) {
    beta = 0;
    alpha = wy / w;
  } else if (alpha < 0) {
    alpha = 0;
    beta = wxx > 0 ? wxy / wxx : 0.0;
  }
  return {alpha, beta};
}

ComputeLaw fit_compute_law(const std::vector<std::pair<double, double>>& points,
                           double flops_per_sample, int calls) {
  ComputeLaw law;
  if (points.empty() || calls <= 0) return law;
  const LineSums sums(points);
  if (flops_per_sample <= 0) {
    law.fixed_s = sums.intercept(0.0) / calls;
    return law;
  }
  double slope = sums.slope();
  double intercept = sums.intercept(slope);
  if (intercept < 0 || slope <= 0) {
    intercept = 0;
    slope = sums.slope_through_origin();
  }
  law.fixed_s = intercept / calls;
  if (slope > 0) law.flops_per_s = flops_per_sample / slope;
  return law;
}

}  // namespace osdp::validate
