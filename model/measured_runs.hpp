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
#include "model/scenario.hpp"

namespace osdp {

struct RunSetup {
  Mode mode = Mode::dp;
  std::vector<OperatorKind> checkpointed_kinds;
};

RunSetup read_run_setup(const Scenario& scenario);

// The scenario of one row. Rows with tensor or pipeline parallelism above 1 are InputErrors
// naming the row (those strategies are not modelled yet).
Scenario scenario_for_run(const Scenario& base, const MeasuredTable& table, const MeasuredRun& run);
// The plan the row ran: one micro-batch per rank, every operator as the setup says.
Plan plan_for_run(const Scenario& run_scenario, const RunSetup& setup, const MeasuredRun& run);

// The cluster with `ranks` GPUs of the same kind in one node (re-deriving the ring timing from
// the topology unless the cluster gives it).
Cluster cluster_with_ranks(const Scenario& base, int ranks);

}  // namespace osdp
