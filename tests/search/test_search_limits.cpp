// The search's optimality gap and time limit: a gap returns a plan within it of the optimum
// (brute force), and a hard instance stops at the time limit with a valid plan and an honest
// proven gap instead of running for minutes.
#include <catch2/catch.hpp>
#include <chrono>

#include "search/exact.hpp"
#include "tests/search/instances.hpp"

namespace osdp::testing {
namespace {

// Distinct operators whose sharding costs nearly the same time per byte saved (as with
// profiled layers in the paper's input form): choosing which to shard is a subset sum, and
// proving the last digits of the optimum takes the branch and bound very long.
Instance subset_sum_instance(int operators, std::uint64_t seed) {
  Random random(seed);
  std::vector<Operator> chain(static_cast<std::size_t>(operators));
  for (int i = 0; i < operators; ++i) {
    Operator& op = chain[static_cast<std::size_t>(i)];
    op.name = "op" + std::to_string(i);
    const double count = static_cast<double>(random.integer(2'000'000, 16'000'000));
    op.parameter_count = count;
    op.parameter_bytes = 4 * count;
    op.gradient_bytes = 4 * count;
    op.optimizer_bytes = 8 * count;
    op.activation_bytes_per_sample = 8e6;
    op.compute_s_per_sample = random.uniform(0.001, 0.004);
  }
  Cluster cluster;
  cluster.ranks = 8;
  cluster.gpus_per_node = 8;
  cluster.world = GroupTiming::uniform(AlphaBeta{5e-6, 8.3e-11});
  Training training;
  training.min_batch_size = 1;
  training.max_batch_size = 1;
  return Instance(Workload::chain("subset-sum", chain), cluster, training, CostModelKind::paper);
}

// A limit halfway between all-ZDP and all-DP at b = 1.
double middle_limit(const Instance& instance) {
  const MemoryRange range = memory_range(instance.model, exact_spec({}), 1);
  return (range.least_bytes + range.most_bytes) / 2;
}

}  // namespace

TEST_CASE("with an optimality gap the plan is within it of the optimum", "[search][gap]") {
  const double gap = 0.02;
  int compared = 0;
  const std::vector<OptionKind> kinds = option_kinds();
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const OptionKind& kind = kinds[seed % kinds.size()];
    auto instance = brute_forceable_instance(seed * 131, kind, CostModelKind::extended, 2);
    const double limit = *instance->training.memory_limit_bytes;
    const BruteForce brute = brute_force(instance->model, kind.spec, 2, limit);
    SearchSpec spec = kind.spec;
    spec.optimality_gap = gap;
    const auto found = solve_batch(instance->model, spec, 2, limit);
    REQUIRE(found.has_value() == brute.best_time_s.has_value());
    if (!found) continue;
    INFO("seed " << seed << ", kind " << kind.name);
    CHECK(found->cost.iteration_time_s >= *brute.best_time_s * (1 - 1e-12));
    CHECK(found->cost.iteration_time_s <= *brute.best_time_s / (1 - gap) * (1 + 1e-12));
    CHECK(fits(found->cost.peak_memory_bytes, limit));
    ++compared;
  }
  CHECK(compared >= 20);
}

TEST_CASE("a finished search proves its gap, an exact one proves optimality", "[search][gap]") {
  Instance instance = subset_sum_instance(60, 7);
  const double limit = middle_limit(instance);
  SearchSpec spec = exact_spec({});
  spec.optimality_gap = 1e-3;
  const SearchResult loose = search(instance.model, spec, limit);
  REQUIRE(loose.best);
  CHECK_FALSE(loose.stats.stopped_early);
  CHECK(loose.proven_gap <= 1e-3 + 1e-12);
}

TEST_CASE("the time limit stops a hard search with a valid plan and its proven gap",
          "[search][gap]") {
  Instance instance = subset_sum_instance(200, 11);
  const double limit = middle_limit(instance);
  SearchSpec spec = exact_spec({});
  spec.time_limit_s = 0.2;
  const auto start = std::chrono::steady_clock::now();
  const SearchResult stopped = search(instance.model, spec, limit);
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Not a speed test: the limit is honoured to within a few checks of the clock, where the
  // unbounded exact search ran for minutes.
  CHECK(elapsed_s < 5.0);
  REQUIRE(stopped.best);
  CHECK(stopped.stats.stopped_early);
  REQUIRE(stopped.per_batch.size() == 1);
  CHECK(stopped.per_batch[0].stopped_early);
  CHECK(fits(stopped.best->cost.peak_memory_bytes, limit));
  CHECK(stopped.proven_gap > 0);
  CHECK(stopped.proven_gap < 0.01);

  // A looser gap finishes the same instance.
  SearchSpec relaxed = exact_spec({});
  relaxed.optimality_gap = 1e-3;
  const SearchResult finished = search(instance.model, relaxed, limit);
  REQUIRE(finished.best);
  CHECK_FALSE(finished.stats.stopped_early);
  CHECK(finished.proven_gap <= 1e-3 + 1e-12);
  // Both claims hold together: neither plan beats the other's proven bound.
  const double stopped_bound =
      stopped.best->cost.throughput_samples_per_s / (1 - stopped.proven_gap);
  const double finished_bound =
      finished.best->cost.throughput_samples_per_s / (1 - finished.proven_gap);
  CHECK(finished.best->cost.throughput_samples_per_s <= stopped_bound * (1 + 1e-12));
  CHECK(stopped.best->cost.throughput_samples_per_s <= finished_bound * (1 + 1e-12));
}

}  // namespace osdp::testing
