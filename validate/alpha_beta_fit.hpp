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

// One alpha-beta line through all points (no segments), by least squares on the relative error:
// every size counts alike, and no point's noise becomes the law of its size range, as joining
// neighbours makes it (on CPU ranks single sizes vary 2-5x between calibrations, from scheduler
// wake-ups). alpha, beta >= 0.
AlphaBeta fit_alpha_beta(const std::vector<std::pair<double, double>>& step_points);

// A compute law fixed_s + b x flops_per_sample / rate fitted by least squares to the summed time
// of `calls` calls at each batch size b (points are (b, seconds)); `flops_per_sample` is the
// FLOPs of those calls per sample. A negative intercept refits through the origin; FLOP-free
// calls (the embedding) get their mean time per call as the fixed part and no rate.
ComputeLaw fit_compute_law(const std::vector<std::pair<double, double>>& batch_points,
                           double flops_per_sample, int calls);

}  // namespace osdp::validate
