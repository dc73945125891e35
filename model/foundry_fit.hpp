// `osdp fit` on llm-foundry's table: the compute constants of each GPU chip, fitted by
// Levenberg-Marquardt on the relative errors of the rows' step times as the extended cost model
// predicts them (overlap of FSDP's gathers and reductions included, so the time is not linear in
// the constants: the fit differentiates the model numerically, in log space).
//
// The constants, per chip (a handful for all its rows, never one per row):
//   GEMM rate        FLOP/s of the transformer layers' and the head's matrix products
//   score rate       FLOP/s of attention's score products (the FlashAttention kernel)
//   layer fixed      time per forward call of an attention or MLP (backward: twice)
//   activation traffic  bytes per second of the memory-bound work, per saved activation byte
// and, for a chip with amp_fp8 rows, its fp8 speedup of the matrix products. The head runs at the
// GEMM rate; communication, the optimizer step and memory stay as the cluster files give them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/foundry_runs.hpp"

namespace osdp {

struct FoundryConstant {
  std::string chip;
  std::string name;
  std::string unit;  // of `value`
  double value = 0;
};

struct FoundryFitResult {
  std::vector<FoundryConstant> constants;
  FoundrySetup fitted;                 // the setup's GPU types with the fitted constants
  std::vector<double> fitted_s;        // per row, fitted on all rows
  std::vector<double> by_model_s;      // per row, fitted without the row's model size
  std::vector<double> largest_gpus_s;  // rows at the largest GPU count, fitted without them
  double fit_mape_percent = 0;
  double by_model_mape_percent = 0;
  double largest_gpus_mape_percent = 0;  // over the rows at the largest GPU count
  int largest_gpus = 0;
  int model_sizes = 0;
};

FoundryFitResult fit_foundry_table(const Scenario& scenario, const FoundrySetup& setup,
                                   const FoundryTable& table);

// The GPU type's cluster document with the constants written in (the file a fit writes).
Json fitted_cluster_json(const FoundryGpu& gpu);

}  // namespace osdp
