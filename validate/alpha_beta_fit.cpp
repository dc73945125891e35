#include "validate/alpha_beta_fit.hpp"

#include <algorithm>

namespace osdp::validate {

CollectiveTiming fit_collective_timing(std::vector<std::pair<double, double>> points) {
  std::sort(points.begin(), points.end());
  CollectiveTiming timing;
  if (points.empty()) return timing;
  // Least squares t = alpha + beta * bytes.
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double count = static_cast<double>(points.size());
  const double denominator = count * sxx - sx * sx;
  double beta = denominator > 0 ? (count * sxy - sx * sy) / denominator : 0.0;
  beta = std::max(beta, 0.0);
  timing.alpha_beta = {std::max((sy - beta * sx) / count, 0.0), beta};
  for (std::size_t i = 0; i + 1 < points.size(); ++i) {
    const auto [x0, y0] = points[i];
    const auto [x1, y1] = points[i + 1];
    const double slope = x1 > x0 ? std::max((y1 - y0) / (x1 - x0), 0.0) : 0.0;
    timing.by_size.push_back({i == 0 ? 0.0 : x0, {std::max(y0 - slope * x0, 0.0), slope}});
  }
  return timing;
}

}  // namespace osdp::validate
