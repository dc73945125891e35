// The setup of one row of a measured table (model/measured_table.hpp) as a scenario and plan:
// the row gives the GPT's shape, the micro-batch, the accumulation steps and the data-parallel
// ranks; the scenario gives the rest (vocabulary, precision, optimizer, GPU, topology) and, in
// its "measured_runs" object, how the runs ran:
//   "measured_runs": {"mode": "dp", "checkpoint": ["attention", "mlp"]}
// (every operator in `mode`; the kinds listed recompute their forward, as Megatron's
// --checkpoint-activations does for transformer layers).
#pragma once

#include <vector>

#include "model/measured_table.hpp"
#include "model/parallel_iteration.hpp"
#include "model/scenario.hpp"

namespace osdp {

struct RunSetup {
  Mode mode = Mode::dp;
  std::vector<OperatorKind> checkpointed_kinds;
};

RunSetup read_run_setup(const Scenario& scenario);

// The scenario of one row: the GPT's shape, micro-batch and accumulation the row sets, on the
// row's GPUs (the scenario's node scaled out to more nodes of the same kind where the row has
// more GPUs than it). Rows that the model cannot express are InputErrors naming the row.
Scenario scenario_for_run(const Scenario& base, const MeasuredTable& table, const MeasuredRun& run);
// Whether a row runs tensor or pipeline parallelism (model/parallel_iteration then costs it).
bool uses_model_parallelism(const MeasuredRun& run);
// The row's tensor x pipeline x data layout (Megatron's order, tp-dp-pp; 1F1B), micro-batches
// per pipeline and checkpointed kinds.
ParallelRun parallel_run_for(const RunSetup& setup, const MeasuredRun& run);
// One iteration of a row with tensor or pipeline parallelism on the run scenario's cluster.
ParallelIterationCost parallel_cost_for_run(const Scenario& run_scenario, const RunSetup& setup,
                                            const MeasuredRun& run);
// The plan the row ran: one micro-batch per rank, every operator as the setup says.
Plan plan_for_run(const Scenario& run_scenario, const RunSetup& setup, const MeasuredRun& run);

// The cluster with `ranks` GPUs of the same kind: in one node when they fit in it (re-deriving
// the ring timing from the topology unless the cluster gives it), else on as many nodes of the
// scenario's kind, joined by its NICs (the cluster must describe them: "nic", "nics_per_node").
Cluster cluster_with_ranks(const Scenario& base, int ranks);

}  // namespace osdp
