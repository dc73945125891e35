// The ranks' arrival skew at blocking tensor-parallel sums, measured on a training step: the
// calibration's probe trained tensor-parallel (validate/parallel_gpt) in pairs of neighbouring
// ranks, every pair at once and data parallel across them, as the tensor-innermost layouts group
// them (an odd count of ranks: one group of all), what its ranks waited for their group's sums
// beyond the 3D model's time for them, per sum the model counts. On CPU ranks that share a
// machine's cores the late rank's threads are scheduled late and every sum after a stretch of
// compute waits for it: about 1.5 ms a sum on a 2-core VM, where the sums themselves take
// 0.3-1 ms. A stretch of matrix products does not show it (bench/sync_probe); a step of a GPT
// does. Why pairs on 4 ranks: a group of all 4 on the 2 cores waited 2.2 ms a sum (2026-11-29),
// which tp 2 x dp 2 and tp 2 x pp 2 then paid on each pair's sums, simulated 11-30 % slow in
// three runs; a pair's, 1.4 ms, left them -6 to +15 %.
#pragma once

#include <vector>

#include "model/cluster.hpp"
#include "validate/communicator.hpp"
#include "validate/gpt_parameters.hpp"

namespace osdp::validate {

struct BlockingSyncFigures {
  int tensor_degree = 0;  // 0: not measured (one rank, or a probe the ranks do not divide)
  int batch_size = 0;
  int steps = 0;               // measured, after one warm-up step
  double measured_wait_s = 0;  // a step's wait for the sums: ranks' mean, median over steps
  double model_wait_s = 0;     // the 3D model's time for them with no skew
  double model_syncs = 0;      // the sums that pay the skew, per step
  double per_sync_s = 0;       // max(0, measured - model) / syncs: the cluster's blocking_sync_s
  std::vector<double> step_wait_s;  // each measured step's ranks' mean wait
};

// A collective over `comm` (every rank calls it). `cluster` is the calibrated cluster of
// comm.size() ranks, whose blocking_sync_s is ignored.
BlockingSyncFigures measure_blocking_sync(Communicator& comm, const GptShape& probe,
                                          const NamedTensors& initial, int batch_size, int steps,
                                          const Cluster& cluster);

// The tensor-parallel groups' size on `ranks` ranks: 2 on an even count, all of them on an odd
// one (0 on one rank: nothing to measure).
int blocking_sync_tensor_degree(int ranks);

// The two halves of measure_blocking_sync, so that a calibration can time its steps in blocks
// spread over its run (this VM's speed drifts from one second to the next) and figure the skew
// once its cluster is known.
// A collective over `comm`: `steps` tensor-parallel steps after a warm-up, each the ranks' mean
// wait for their group's sums; none where the probe does not split over the group.
std::vector<double> time_blocking_sync_steps(Communicator& comm, const GptShape& probe,
                                             const NamedTensors& initial, int batch_size,
                                             int steps);
// The figures from steps timed on `cluster`'s ranks, in groups of
// blocking_sync_tensor_degree(cluster.ranks) (the skew per sum against the 3D model's time for the
// same sums); not measured (tensor_degree 0) if none were.
BlockingSyncFigures blocking_sync_figures(const GptShape& probe, int batch_size,
                                          std::vector<double> step_wait_s, const Cluster& cluster);

}  // namespace osdp::validate
