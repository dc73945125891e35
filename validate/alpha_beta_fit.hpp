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

// What `calls` alike calls of one operator kind took in all, doing `flops` FLOPs (a probe's
// layers at one batch size).
struct ComputeSample {
  int calls = 1;
  double flops = 0;
  double seconds = 0;
  // The activation bytes those calls save for backward (a backward's sample: twice its
  // forward's, as the cost model charges them; model/cluster.hpp's activation_bytes_per_s).
  double activation_bytes = 0;
};

// A compute law calls x fixed_s + flops / rate + activation_bytes / activation_bytes_per_s
// fitted to samples that may come from probes of different shapes (widths, sequence lengths,
// depths, batch sizes), by non-negative least squares on the relative error, so that a small
// probe's points count as much as a large one's. The memory-bound term (norms, GELU, the
// softmax of the s x s scores) is fitted only where the samples' bytes per FLOP differ (several
// shapes); in one probe it cannot be told from the FLOPs. A fixed part that would be negative
// is zero; FLOP-free calls (the embedding) get their mean time per call as the fixed part and
// no rate.
ComputeLaw fit_compute_law(const std::vector<ComputeSample>& samples);

// What the law gives for a sample's calls (the fit's own prediction, without the cost model's
// host floor, straggling or score terms).
double compute_law_s(const ComputeLaw& law, const ComputeSample& sample);

}  // namespace osdp::validate
