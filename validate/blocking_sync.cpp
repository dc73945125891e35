#include "validate/blocking_sync.hpp"

#include <algorithm>
#include <utility>

#include "model/parallel_iteration.hpp"
#include "validate/measurement.hpp"
#include "validate/parallel_gpt.hpp"

namespace osdp::validate {
namespace {

// The 3D model's time for the tensor-parallel collectives of one step of `run`.
double model_tensor_collectives_s(const GptShape& probe, const Cluster& cluster,
                                  const ParallelRun& run) {
  const ParallelIterationCost cost =
      parallel_iteration_cost(probe.spec(), Training{}, cluster, CostSettings{}, run, "calibration",
                              PipelineRecord::summary);
  double seconds = 0;
  for (const ChunkCost& chunk : cost.chunks) {
    seconds += chunk.forward_communication_s + chunk.backward_communication_s;
  }
  return seconds * run.micro_batches;
}

}  // namespace

std::vector<double> time_blocking_sync_steps(Communicator& comm, const GptShape& probe,
                                             const NamedTensors& initial, int batch_size,
                                             int steps) {
  std::vector<double> step_wait_s;
  const int n = comm.size();
  const int t = blocking_sync_tensor_degree(n);
  if (t < 2 || steps < 1 || !tensor_degree_fits(probe, t)) return step_wait_s;
  const ParallelLayout layout({t, 1, n / t});
  ParallelGpt model(probe, layout, comm, initial, ParallelRuntimeOptions{});
  // Every rank of a tensor group trains the same rows; the first step warms up.
  for (int step = 0; step <= steps; ++step) {
    const ParallelStepMetrics metrics =
        model.train_step(make_token_batch(probe, batch_size, /*seed=*/3, step));
    if (step == 0) continue;
    // Every rank's wait for its group's sums (a ring all-gather: one slot per rank); the
    // data-parallel reduction across the pairs is not the skew's.
    at::Tensor waits = at::zeros({n}, at::kDouble);
    waits[comm.rank()] = metrics.tensor_wait_s;
    comm.run(CollectiveKind::all_gather, waits);
    step_wait_s.push_back(waits.mean().item<double>());
  }
  return step_wait_s;
}

BlockingSyncFigures blocking_sync_figures(const GptShape& probe, int batch_size,
                                          std::vector<double> step_wait_s, const Cluster& cluster) {
  BlockingSyncFigures figures;
  const int tensor_degree = blocking_sync_tensor_degree(cluster.ranks);
  if (tensor_degree < 2 || step_wait_s.empty()) return figures;
  figures.tensor_degree = tensor_degree;
  figures.batch_size = batch_size;
  figures.steps = static_cast<int>(step_wait_s.size());
  figures.step_wait_s = std::move(step_wait_s);
  figures.measured_wait_s = median_of(figures.step_wait_s);

  ParallelRun run;
  run.degrees = {tensor_degree, 1, cluster.ranks / tensor_degree};
  run.micro_batch = batch_size;
  Cluster without_skew = cluster;
  without_skew.gpu.blocking_sync_s = 0.0;
  Cluster unit_skew = cluster;
  unit_skew.gpu.blocking_sync_s = 1.0;
  figures.model_wait_s = model_tensor_collectives_s(probe, without_skew, run);
  figures.model_syncs = model_tensor_collectives_s(probe, unit_skew, run) - figures.model_wait_s;
  if (figures.model_syncs > 0) {
    figures.per_sync_s =
        std::max(0.0, figures.measured_wait_s - figures.model_wait_s) / figures.model_syncs;
  }
  return figures;
}

int blocking_sync_tensor_degree(int ranks) {
  if (ranks < 2) return 0;
  return ranks % 2 == 0 ? 2 : ranks;
}

BlockingSyncFigures measure_blocking_sync(Communicator& comm, const GptShape& probe,
                                          const NamedTensors& initial, int batch_size, int steps,
                                          const Cluster& cluster) {
  return blocking_sync_figures(probe, batch_size,
                               time_blocking_sync_steps(comm, probe, initial, batch_size, steps),
                               cluster);
}

}  // namespace osdp::validate
