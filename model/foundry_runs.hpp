// The runs of llm-foundry's benchmark table (model/foundry_table.hpp) as osdp scenarios and
// plans: the row gives the model size, sequence length, GPUs and their type, micro-batch,
// accumulation, precision, sharding and checkpointing; the scenario's "measured_runs" object
// gives the model file of each size and the cluster (one server, scaled out over its NICs) of
// each GPU type:
//   "measured_runs": {"table": "llm-foundry",
//                     "models": {"125m": "models/mpt-125m.json", ...},
//                     "gpus": {"a100_40gb": {"cluster": "clusters/foundry-a100-40gb.json",
//                                            "chip": "A100"}, ...}}
// (a GPU type may also be given as its cluster's path alone: a chip of its own).
// Each run is what llm-foundry runs: PyTorch FSDP with one unit per transformer block (the
// embedding and the head units of their own), FULL_SHARD as zdp, SHARD_GRAD_OP as z2, NO_SHARD
// as dp, HYBRID_SHARD as hsdp (sharded in a server, replicated across); activation checkpointing of
// the blocks inside their FSDP units (the recompute uses the backward's gather); amp_bf16 and
// amp_fp8 with fp32 master weights and optimizer states (mixed), gradients reduced in fp32 (MP Mode
// DEFAULT) or bf16 (PURE); amp_fp8's matrix products at the GPU's fp8_speedup.
#pragma once

#include <map>
#include <string>

#include "model/foundry_table.hpp"
#include "model/scenario.hpp"

namespace osdp {

struct FoundryGpu {
  Cluster cluster;  // one server of the type (scaled out per row)
  Json document;    // as written (a fit writes it back with new constants)
  std::string file;
  // The GPU chip: types of one chip (A100 40 GB and 80 GB) share its fitted compute constants.
  std::string chip;
};

struct FoundrySetup {
  std::map<std::string, GptSpec> models;   // by the table's Model
  std::map<std::string, FoundryGpu> gpus;  // by the table's GPU
};

// Transformer Engine's fp8 matrix products (amp_fp8): the layers' and the head's laws (and the
// GPU's flat rates) at the GPU's fp8_speedup.
void apply_fp8(Cluster& cluster);

// Whether the scenario describes llm-foundry runs ("measured_runs": {"table": "llm-foundry"}).
bool describes_foundry_runs(const Scenario& scenario);
FoundrySetup read_foundry_setup(const Scenario& scenario);

// The row's scenario: its model (sequence length set), training and cluster (the GPU type's
// server scaled to the row's GPUs). Rows the setup cannot express are InputErrors naming them.
Scenario foundry_scenario_for_run(const Scenario& base, const FoundrySetup& setup,
                                  const FoundryRun& run);
// The plan the row ran, over the model wrapped one FSDP unit per transformer block: the
// scenario's workload must be the wrapped one (`wrap_for_run`).
Plan foundry_plan_for_run(const Scenario& run_scenario, const FoundryRun& run);

struct FoundryPrediction {
  PlanCost cost;            // one optimizer step (all micro-batches), peak memory per GPU
  double memory_bytes = 0;  // the GPU's memory
  bool fits() const { return cost.peak_memory_bytes <= memory_bytes; }
};

// One step of the row by the scenario's cost model (extended: overlap as the simulator runs it).
FoundryPrediction predict_foundry_run(const Scenario& base, const FoundrySetup& setup,
                                      const FoundryRun& run);

}  // namespace osdp
