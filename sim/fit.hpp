// `osdp fit`: the GPU's free constants from measured iteration times, by weighted least squares
// over the simulator's own decomposition of an iteration.
//
// With every operator in DP and the gradient all-reduce after the backward (no overlap), the
// simulated iteration is the sum of its compute items, the all-reduce and the optimizer step.
// Each compute item is max(floor, law): its host floor (the host cannot issue the call's kernels
// faster) and its law, linear in the constants below (times per FLOP, fixed times). Both are
// read off the program the simulator runs (each constant set to one unit, the others to zero),
// and the fit minimises sum_r w_r ((T_r - measured_r) / measured_r)^2, the relative error the
// MAPE reports (w_r: RowWeighting), over constants >= 0 and rates at most the GPU's peak_compute
// where the cluster declares one. With the calls' regimes (floor or law) fixed, T_r is linear: the
// fit alternates regimes and non-negative least squares from a grid of floors, and keeps the best.
//
// The constants (a handful for all rows, never one per row):
//   layer rate      sustained FLOP/s of attention and MLP, forward, recompute and backward
//   head rate       the same for the LM head with its fp32 softmax cross-entropy
//   layer fixed     time per call of an attention or MLP forward (its backward: twice)
//   edge fixed      the same for the embedding and the head
//   layer floor     host floor per attention or MLP forward call (its backward: twice, as it
//                   launches twice the kernels)
// The optimizer step is not fitted: it is the same for every row of a model size and ranks, so
// the fixed parts would absorb it (a first fit made it free); it stays memory-bound at the
// cluster's optimizer (or memory) bandwidth, part of each row's base.
// Tied because data of this kind cannot tell them apart: a forward and its backward always come
// together (their columns are proportional), and so do an attention and an MLP's fixed parts.
#pragma once

#include <string>
#include <vector>

#include "model/least_squares.hpp"
#include "model/measured_table.hpp"
#include "model/scenario.hpp"
#include "sim/options.hpp"

namespace osdp::sim {

struct FitConstant {
  std::string name;
  std::string unit;  // of `value`
  double value = 0;  // in `unit`: TFLOP/s, ms
};

// `count` alike compute calls of a row that a host floor holds up at small batches: each takes
// max(floor_features . floors, features . linear constants).
struct FlooredCalls {
  double count = 0;
  std::vector<double> features;        // per linear constant (rates, fixed parts)
  std::vector<double> floor_features;  // per floor constant
};

// One row's decomposition (theta in the fit's units): time = base_s + features . theta + the
// floored calls' sum.
struct RowModel {
  double base_s = 0;  // what no constant moves: the all-reduce, optimizer step, launch gaps
  std::vector<double> features;  // of the calls no floor holds up (per linear constant)
  std::vector<FlooredCalls> floored;
};

// How much each row counts in the least squares.
enum class RowWeighting {
  // Rows on one server and rows spanning several count equally as groups (each group's weights
  // sum to half the rows; a table of one kind is unweighted): unweighted, vTrain's 600 one-server
  // 3D rows would outvote its 53 multi-server rows 11 to 1, and the constants serve one kind.
  balance_servers,
  every_row,  // every row alike
};

// The fit's figures over one kind of row (one server, several servers).
struct RowGroupFigures {
  std::string name;
  int rows = 0;
  double fit_mape_percent = 0;
  double cv_mape_percent = 0;
};

struct FitResult {
  std::vector<FitConstant> constants;
  Cluster cluster;                  // the scenario's 8-GPU cluster with the fitted constants
  Json cluster_json;                // its JSON: the scenario's cluster document, constants set
  std::vector<double> fitted_s;     // per row, with the constants fitted on all rows
  std::vector<double> validated_s;  // per row, fitted without the row's model size
  double fit_mape_percent = 0;
  double cv_mape_percent = 0;
  int model_sizes = 0;
  std::vector<RowGroupFigures> groups;  // one server, several servers (those present)
};

// The decomposition of every row (fails on rows the model cannot run, naming them).
// Rows with tensor or pipeline parallelism are decomposed along their critical path under the
// constants `parallel_paths_theta` (exact there; see fit.cpp).
std::vector<RowModel> row_models(const Scenario& scenario, const MeasuredTable& table,
                                 const SimOptions& options,
                                 const std::vector<double>& parallel_paths_theta = {});
// The fit's constants (its units) as the cluster's compute laws hold them.
std::vector<double> constants_of(const Cluster& cluster);
// Each row's weight (a table of one kind of row: all 1).
std::vector<double> row_weights(const MeasuredTable& table, int gpus_per_server,
                                RowWeighting weighting);
FitResult fit_table(const Scenario& scenario, const MeasuredTable& table, const SimOptions& options,
                    RowWeighting weighting = RowWeighting::balance_servers);
// The scenario's cluster with these constants (theta in the fit's units).
Cluster cluster_with_constants(const Cluster& cluster, const std::vector<double>& theta);

using osdp::mean_abs_percent_error;  // model/least_squares.hpp
using osdp::non_negative_least_squares;

}  // namespace osdp::sim
