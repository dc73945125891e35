// The paper's DFS baseline against brute force: exact whenever it completes, on random small
// instances of every option kind and both cost models; the time cap returns the incumbent.
#include <catch2/catch.hpp>
#include <chrono>

#include "instances.hpp"
#include "search/baselines.hpp"
#include "search/exact.hpp"

namespace osdp::testing {
namespace {

struct Tally {
  int feasible = 0;
  int infeasible = 0;
};

void check_against_brute_force(const Instance& instance, const SearchSpec& spec, int batch,
                               Tally& tally) {
  const double limit = *instance.training.memory_limit_bytes;
  const BruteForce brute = brute_force(instance.model, spec, batch, limit);
  const BaselineResult dfs = paper_dfs(instance.model, spec, batch, limit);
  REQUIRE_FALSE(dfs.timed_out);
  REQUIRE(dfs.best.has_value() == brute.best_time_s.has_value());
  const auto exact = solve_batch(instance.model, spec, batch, limit);
  REQUIRE(exact.has_value() == brute.best_time_s.has_value());
  if (!brute.best_time_s) {
    ++tally.infeasible;
    return;
  }
  ++tally.feasible;
  CHECK(relative_difference(dfs.best->cost.iteration_time_s, *brute.best_time_s) <= 1e-9);
  CHECK(fits(dfs.best->cost.peak_memory_bytes, limit));
  CHECK(dfs.best->plan.batch_size == batch);
  CHECK(relative_difference(exact->cost.iteration_time_s, *brute.best_time_s) <= 1e-9);
  CHECK(fits(exact->cost.peak_memory_bytes, limit));
}

}  // namespace

TEST_CASE("paper DFS equals brute force on random small instances", "[search][dfs]") {
  Tally tally;
  for (const OptionKind& kind : option_kinds()) {
    for (CostModelKind cost : {CostModelKind::paper, CostModelKind::extended}) {
      for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        const int batch = 1 + static_cast<int>((seed * 5) % 12);
        auto instance = brute_forceable_instance(seed * 7919 + kind.name.size(), kind, cost, batch);
        INFO("kind " << kind.name << ", cost " << cost_model_name(cost) << ", seed " << seed
                     << ", b " << batch << ", n " << instance->workload.size());
        check_against_brute_force(*instance, kind.spec, batch, tally);
      }
    }
  }
  // Both outcomes are exercised.
  CHECK(tally.feasible >= 50);
  CHECK(tally.infeasible >= 3);
}

TEST_CASE("paper DFS prunes: fewer nodes than the full tree", "[search][dfs]") {
  const OptionKind kind = option_kinds()[0];
  auto instance = random_instance(42, 10, kind, CostModelKind::paper, 4);
  const BaselineResult dfs =
      paper_dfs(instance->model, kind.spec, 4, *instance->training.memory_limit_bytes);
  REQUIRE_FALSE(dfs.timed_out);
  // The full binary tree of 10 operators has 2^11 - 1 nodes.
  CHECK(dfs.nodes < (1 << 11) - 1);
}

TEST_CASE("paper DFS stops at its time cap with a valid incumbent", "[search][dfs]") {
  const OptionKind kind = option_kinds()[4];  // dp,zdp,z2 split 2 ckpt auto: many options
  auto instance = random_instance(7, 120, kind, CostModelKind::extended, 8);
  const double limit = *instance->training.memory_limit_bytes;
  const auto start = std::chrono::steady_clock::now();
  const BaselineResult dfs =
      paper_dfs(instance->model, kind.spec, 8, limit, std::chrono::milliseconds(50));
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  CHECK(dfs.timed_out);
  CHECK(elapsed.count() < 2.0);
  if (dfs.best) {
    CHECK(fits(dfs.best->cost.peak_memory_bytes, limit));
    // The incumbent is no better than the optimum.
    const auto exact = solve_batch(instance->model, kind.spec, 8, limit);
    REQUIRE(exact);
    CHECK(exact->cost.iteration_time_s <= dfs.best->cost.iteration_time_s * (1 + 1e-12));
  }
}

}  // namespace osdp::testing
