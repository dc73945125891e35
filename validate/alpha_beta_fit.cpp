#include "validate/alpha_beta_fit.hpp"

#include <algorithm>

#include "model/least_squares.hpp"

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

ComputeLaw fit_compute_law(const std::vector<ComputeSample>& samples) {
  ComputeLaw law;
  std::vector<const ComputeSample*> used;
  bool any_flops = false;
  for (const ComputeSample& sample : samples) {
    if (sample.seconds <= 0 || sample.calls <= 0) continue;
    used.push_back(&sample);
    any_flops = any_flops || sample.flops > 0;
  }
  if (used.empty()) return law;
  if (!any_flops) {
    double per_call_s = 0;
    for (const ComputeSample* sample : used) per_call_s += sample->seconds / sample->calls;
    law.fixed_s = per_call_s / static_cast<double>(used.size());
    return law;
  }
  // The activation bytes tell something apart only where their ratio to the FLOPs varies (probes
  // of several shapes); in one probe both grow with the batch alike and the term is left out.
  double lowest_ratio = 0, highest_ratio = 0;
  bool first = true;
  for (const ComputeSample* sample : used) {
    if (sample->flops <= 0) continue;
    const double ratio = sample->activation_bytes / sample->flops;
    lowest_ratio = first ? ratio : std::min(lowest_ratio, ratio);
    highest_ratio = first ? ratio : std::max(highest_ratio, ratio);
    first = false;
  }
  const bool with_bytes = highest_ratio > 0 && highest_ratio > 1.01 * lowest_ratio;
  // min sum (calls fixed + flops s_per_flop + bytes s_per_byte - seconds)^2 / seconds^2, all
  // three >= 0; columns scaled to unit maximum (NNLS is invariant to it, the solve better
  // conditioned).
  const int columns = with_bytes ? 3 : 2;
  std::vector<std::vector<double>> rows;
  std::vector<double> ones;
  std::vector<double> scale(columns, 0.0);
  for (const ComputeSample* sample : used) {
    std::vector<double> row{sample->calls / sample->seconds, sample->flops / sample->seconds};
    if (with_bytes) row.push_back(sample->activation_bytes / sample->seconds);
    for (int c = 0; c < columns; ++c) scale[c] = std::max(scale[c], row[c]);
    rows.push_back(std::move(row));
    ones.push_back(1.0);
  }
  for (auto& row : rows) {
    for (int c = 0; c < columns; ++c) row[c] = scale[c] > 0 ? row[c] / scale[c] : 0.0;
  }
  std::vector<double> x = non_negative_least_squares(rows, ones);
  for (int c = 0; c < columns; ++c) x[c] = scale[c] > 0 ? x[c] / scale[c] : 0.0;
  law.fixed_s = x[0];
  if (x[1] > 0) law.flops_per_s = 1.0 / x[1];
  if (with_bytes && x[2] > 0) law.activation_bytes_per_s = 1.0 / x[2];
  return law;
}

double compute_law_s(const ComputeLaw& law, const ComputeSample& sample) {
  return sample.calls * law.fixed_s + (law.flops_per_s ? sample.flops / *law.flops_per_s : 0.0) +
         (law.activation_bytes_per_s ? sample.activation_bytes / *law.activation_bytes_per_s : 0.0);
}

}  // namespace osdp::validate
