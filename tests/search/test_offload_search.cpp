// CPU offload as a search decision: per operator under --offload auto (the exactness against
// brute force covers it among the option kinds of instances.hpp), all of it under on, never
// worse than off; the fsdp_offload and zero2_offload baselines are the plans it describes; and
// a host too small for what the best plan offloads makes the search fall back, saying so.
#include <catch2/catch.hpp>

#include "instances.hpp"
#include "search/strategies.hpp"

namespace osdp::testing {
namespace {

SearchSpec offload_spec(SearchSpec::OffloadPolicy offload) {
  SearchSpec spec;
  spec.modes = {Mode::dp, Mode::zdp, Mode::z2};
  spec.offload = offload;
  spec.time_limit_s = 1e9;
  return spec;
}

double throughput(const SearchResult& result) {
  return result.best ? result.best->cost.throughput_samples_per_s : 0.0;
}

}  // namespace

TEST_CASE("with offload auto the exact search equals brute force", "[search][offload]") {
  OptionKind kind{"dp,zdp,z2,z1 split 2 offload auto",
                  {{Mode::dp, Mode::zdp, Mode::z2, Mode::z1}, {1, 2}}};
  kind.spec.offload = SearchSpec::OffloadPolicy::automatic;
  kind.spec = exact_spec(kind.spec);
  int compared = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const CostModelKind cost = seed % 2 == 0 ? CostModelKind::paper : CostModelKind::extended;
    const int batch = 1 + static_cast<int>(seed % 4);
    auto instance = brute_forceable_instance(seed * 7919, kind, cost, batch);
    const double least = min_peak_memory_bytes(instance->model, kind.spec, batch);
    for (double factor : {1.0, 1.3, 3.0}) {
      const double limit = least * factor;
      INFO("seed " << seed << ", " << cost_model_name(cost) << ", b " << batch << ", factor "
                   << factor);
      const BruteForce brute = brute_force(instance->model, kind.spec, batch, limit);
      const auto found = solve_batch(instance->model, kind.spec, batch, limit);
      REQUIRE(found.has_value() == brute.best_time_s.has_value());
      if (!found) continue;
      CHECK(found->cost.iteration_time_s == Approx(*brute.best_time_s).epsilon(1e-9));
      ++compared;
    }
  }
  CHECK(compared >= 30);
}

TEST_CASE("offload auto is never worse than off, and fits where off cannot", "[search][offload]") {
  for (double limit : {1.0 * kGiB, 2.0 * kGiB, 8.0 * kGiB}) {
    INFO("limit " << limit / kGiB << " GiB");
    const auto instance = paper_instance(nd_gpt(8), limit, CostModelKind::extended);
    const SearchResult off = search(instance->model, offload_spec(SearchSpec::OffloadPolicy::off));
    const SearchResult automatic =
        search(instance->model, offload_spec(SearchSpec::OffloadPolicy::automatic));
    CHECK(throughput(automatic) >= throughput(off) * (1 - 1e-9));
    if (automatic.best) {
      CHECK(instance->model.plan_cost(automatic.best->plan).iteration_time_s ==
            Approx(automatic.best->cost.iteration_time_s));
    }
  }
  // Offload lowers the least memory a plan needs; between the two least peaks only
  // offloading fits.
  const auto probe = paper_instance(nd_gpt(8), 8 * kGiB, CostModelKind::extended);
  const double least_off =
      min_peak_memory_bytes(probe->model, offload_spec(SearchSpec::OffloadPolicy::off), 1);
  const double least_on =
      min_peak_memory_bytes(probe->model, offload_spec(SearchSpec::OffloadPolicy::automatic), 1);
  REQUIRE(least_on < least_off);
  const auto tight =
      paper_instance(nd_gpt(8), 0.5 * (least_on + least_off), CostModelKind::extended);
  const SearchResult off = search(tight->model, offload_spec(SearchSpec::OffloadPolicy::off));
  const SearchResult automatic =
      search(tight->model, offload_spec(SearchSpec::OffloadPolicy::automatic));
  CHECK_FALSE(off.best);
  REQUIRE(automatic.best);
  bool offloads = false;
  for (const OperatorChoice& choice : automatic.best->plan.choices) offloads |= choice.offload;
  CHECK(offloads);
}

TEST_CASE("fsdp_offload and zero2_offload are the plans they describe", "[search][offload]") {
  const auto instance = paper_instance(nd_gpt(4), 4 * kGiB, CostModelKind::extended);
  for (const auto& [name, mode] :
       {std::pair{"fsdp_offload", Mode::zdp}, {"zero2_offload", Mode::z2}}) {
    INFO(name);
    const auto strategy = strategy_from_name(name);
    REQUIRE(strategy);
    const Plan plan = strategy_plan(instance->model, *strategy, 2);
    for (const OperatorChoice& choice : plan.choices) {
      CHECK(choice == OperatorChoice::whole(mode, Checkpoint::none, true));
    }
    const StrategyResult result = schedule_strategy(instance->model, *strategy);
    REQUIRE(result.best);
    CHECK(result.best->cost.host_memory_bytes > 0);
  }
}

TEST_CASE("a host too small for the offloaded states: the search falls back and says so",
          "[search][offload]") {
  auto instance = paper_instance(nd_gpt(8), 8 * kGiB, CostModelKind::extended);
  instance->cluster.host.memory_bytes = 64 * kMiB;
  SearchSpec sharded_on = offload_spec(SearchSpec::OffloadPolicy::on);
  sharded_on.modes = {Mode::zdp, Mode::z2};  // every option offloads
  SearchSpec sharded_off = sharded_on;
  sharded_off.offload = SearchSpec::OffloadPolicy::off;
  const SearchResult on = search(instance->model, sharded_on);
  const SearchResult off = search(instance->model, sharded_off);
  REQUIRE(on.best);
  REQUIRE(off.best);
  CHECK(on.host_memory_note.find("searched again without offload") != std::string::npos);
  CHECK(on.best->plan.choices == off.best->plan.choices);
  CHECK(on.best->cost.host_memory_bytes == 0.0);
  const StrategyResult fsdp_offload =
      schedule_strategy(instance->model, *strategy_from_name("fsdp_offload"));
  CHECK_FALSE(fsdp_offload.best);
}

}  // namespace osdp::testing
