// The calibration's tensor-parallel step of its probe: the sums the model counts, the waits the
// ranks measured, and the skew per sum that follows from them.
#include "validate/blocking_sync.hpp"

#include <mutex>

#include "model/json_reader.hpp"
#include "model/scenario.hpp"
#include "tests/validate/rank_threads.hpp"
// After libtorch's headers: c10 defines a CHECK of its own (glog's) that Catch's must replace.
#include <catch2/catch.hpp>

namespace osdp::validate {
namespace {

Cluster cpu_ranks(int ranks) {
  Json json = Json::parse(R"({"name": "cpu ranks", "gpu": {"compute": "20GFLOP/s"},
    "collective": {"alpha_s": 1e-4, "beta_s_per_byte": 1e-9}})");
  json["ranks"] = ranks;
  return load_cluster(JsonReader(json, "cluster.json"));
}

BlockingSyncFigures measure(const GptShape& shape, int ranks) {
  BlockingSyncFigures figures;
  std::mutex mutex;
  const Cluster cluster = cpu_ranks(ranks);
  testing::run_rank_threads(ranks, [&](Communicator& comm) {
    const BlockingSyncFigures mine = measure_blocking_sync(
        comm, shape, initial_gpt_parameters(shape, 1), /*batch_size=*/2, /*steps=*/3, cluster);
    std::lock_guard lock(mutex);
    if (comm.rank() == 0) figures = mine;
  });
  return figures;
}

}  // namespace

TEST_CASE("the blocking sync is the ranks' wait beyond the model's sums, per sum") {
  const GptShape two_layers{2, 64, 4, 16, 128};
  const BlockingSyncFigures figures = measure(two_layers, 2);
  CHECK(figures.tensor_degree == 2);
  CHECK(figures.steps == 3);
  CHECK(figures.step_wait_s.size() == 3);
  // Per layer an attention and an MLP, a sum after each forward and each backward; the
  // embedding's forward sum; the head's first cross-entropy sum and its backward sum.
  CHECK(figures.model_syncs == Approx(2 * 2 * 2 + 1 + 2));
  CHECK(figures.model_wait_s > 0);
  CHECK(figures.measured_wait_s > 0);
  CHECK(figures.per_sync_s == Approx(std::max(0.0, figures.measured_wait_s - figures.model_wait_s) /
                                     figures.model_syncs));
  // Three ranks divide neither the 4 heads nor the vocabulary: not measured.
  CHECK(measure(two_layers, 3).tensor_degree == 0);
}

TEST_CASE("on four ranks the blocking sync is a pair's, every pair at once") {
  const GptShape two_layers{2, 64, 4, 16, 128};
  CHECK(blocking_sync_tensor_degree(1) == 0);
  CHECK(blocking_sync_tensor_degree(2) == 2);
  CHECK(blocking_sync_tensor_degree(3) == 3);
  CHECK(blocking_sync_tensor_degree(4) == 2);
  CHECK(blocking_sync_tensor_degree(8) == 2);
  const BlockingSyncFigures figures = measure(two_layers, 4);
  CHECK(figures.tensor_degree == 2);
  CHECK(figures.step_wait_s.size() == 3);
  // A pair's sums, as on two ranks: the data-parallel reduction across the pairs is not one.
  CHECK(figures.model_syncs == Approx(2 * 2 * 2 + 1 + 2));
  CHECK(figures.measured_wait_s > 0);
}

TEST_CASE("blocks of blocking-sync steps pool into one median") {
  const GptShape two_layers{2, 64, 4, 16, 128};
  const Cluster cluster = cpu_ranks(2);
  // Blocks timed apart (a calibration's start, middle and end), pooled: their median, not
  // their mean (0.038 s).
  const std::vector<double> steps{0.030, 0.090, 0.010, 0.040, 0.020};
  const BlockingSyncFigures figures = blocking_sync_figures(two_layers, 4, steps, cluster);
  CHECK(figures.tensor_degree == 2);
  CHECK(figures.batch_size == 4);
  CHECK(figures.steps == 5);
  CHECK(figures.step_wait_s == steps);
  CHECK(figures.measured_wait_s == Approx(0.030));
  CHECK(figures.model_syncs == Approx(2 * 2 * 2 + 1 + 2));
  CHECK(figures.per_sync_s ==
        Approx(std::max(0.0, 0.030 - figures.model_wait_s) / figures.model_syncs));
  // A cluster that charges a skew already: ignored, the figure is the skew beyond the sums.
  Cluster skewed = cluster;
  skewed.gpu.blocking_sync_s = 0.5e-3;
  CHECK(blocking_sync_figures(two_layers, 4, steps, skewed).per_sync_s ==
        Approx(figures.per_sync_s));
  // No steps (the probe did not split) or one rank: not measured.
  CHECK(blocking_sync_figures(two_layers, 4, {}, cluster).tensor_degree == 0);
  CHECK(blocking_sync_figures(two_layers, 4, steps, cpu_ranks(1)).tensor_degree == 0);
}

}  // namespace osdp::validate
