// Fitting the alpha-beta model of a ring collective to measured (step bytes, step time) points;
// shared by `osdp calibrate` (Gloo on CPU) and the CUDA + NCCL probe. Free of libtorch.
#pragma once

#include <utility>
#include <vector>

#include "model/cluster.hpp"

namespace osdp::validate {

// Piecewise alpha-beta through the points sorted by size: each segment joins two neighbouring
// points (alpha, beta >= 0) and applies from the first one's step size up (the first from 0);
// `alpha_beta` is a least-squares fit over all points.
CollectiveTiming fit_collective_timing(std::vector<std::pair<double, double>> step_points);

}  // namespace osdp::validate
