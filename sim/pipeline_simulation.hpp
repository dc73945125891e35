// One training iteration of a tensor x pipeline x data parallel run on the simulated cluster:
// every rank runs its stage's passes in the schedule's order (model/pipeline_schedule), each
// pass waiting for its input from the neighbouring stage; the activations and their gradients
// cross between stages as flows on the topology (each tensor-parallel rank its slice, Megatron's
// scatter-gather, then the receiving group's all-gather), sharing links with the data-parallel
// rings that reduce each stage's gradients after its last backward and with the sharded modes'
// collectives of every pass (zdp's gathers and reduce-scatters, z2's reduce-scatters), which
// run as rings over the stage's data-parallel group beside its compute; then the tied embedding's
// all-reduce between the first and last stage, and the optimizer step after the slowest rank.
// The passes' durations (compute and tensor-parallel collectives), the bytes and the reductions
// come from the 3D model (model/parallel_iteration); the bubble, the waits and the contention
// come out of the simulation. Runs SimGrid in a forked child, as simulate_plan does.
#pragma once

#include <vector>

#include "model/parallel_iteration.hpp"
#include "model/scenario.hpp"
#include "sim/child_process.hpp"
#include "sim/options.hpp"

namespace osdp::sim {

struct PipelineSimulation {
  double iteration_time_s = 0;  // the slowest rank's reductions done, then the optimizer step
  double pipeline_s = 0;        // the last pass's end
  std::vector<double> stage_finish_s;  // per stage: its ranks' last pass (the latest of them)
  std::vector<double> stage_busy_s;    // per stage: time in passes, transfers included (rank 0)
  double bubble_fraction = 0;          // the busiest stage's idle share of pipeline_s
  // Per stage, its first rank's passes as they ran (what a trace draws: one track per stage),
  // and when its gradient reductions (and the tied embedding's) were done.
  std::vector<std::vector<TimedStep>> stage_passes;
  std::vector<double> stage_synchronised_s;
  long long flows = 0;
  long long collectives = 0;
};

// Throws InputError when the cluster has no topology (the 3D simulation lays the ranks on it).
// `network`: the scenario's "simulation" block's (read_sim_options). Its work is not known
// before it runs (the flows of a collective follow the topology's routing): a simulation still
// running at `deadline` is stopped (DeadlinePassed, sim/child_process.hpp).
PipelineSimulation simulate_pipeline(const Scenario& scenario, const ParallelRun& run,
                                     const ParallelIterationCost& cost, Granularity granularity,
                                     const NetworkConfig& network = {}, Deadline deadline = {});

}  // namespace osdp::sim
