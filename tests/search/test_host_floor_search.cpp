// Host floors make an option's time piecewise linear in the batch size: the exact search (its
// dominance pruning and operator classes) must still equal brute force.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "search/exact.hpp"
#include "search/options.hpp"
#include "tests/search/instances.hpp"
#include "tests/support/random_instances.hpp"

using namespace osdp;

namespace {

// The random instance with its operators' compute moved to floored per-kind laws: MLPs and
// attentions alternate, each kind's floor about a call's law at batch 2 (so that small batches
// sit on it and large ones above it).
exactness::Instance floored_instance(unsigned seed, int operators) {
  exactness::Instance instance =
      exactness::random_instance(seed, operators, CostModelKind::extended);
  const double rate = 1e12;
  std::vector<Operator> ops;
  std::map<OperatorKind, double> forward_s;
  for (int i = 0; i < instance.workload->size(); ++i) {
    Operator op = instance.workload->op(i);
    op.kind = i % 2 == 0 ? OperatorKind::mlp : OperatorKind::attention;
    op.forward_flops_per_sample = *op.compute_s_per_sample / 3 * rate;
    op.backward_flops_per_sample = 2 * op.forward_flops_per_sample;
    op.compute_s_per_sample.reset();
    forward_s.emplace(op.kind, op.forward_flops_per_sample / rate);
    ops.push_back(op);
  }
  instance.workload = std::make_shared<Workload>(Workload::chain("floored", std::move(ops)));
  for (const auto& [kind, seconds] : forward_s) {
    ComputeLaw forward{1e-4, rate, std::nullopt};
    forward.host_floor_s = 1e-4 + 2 * seconds;
    ComputeLaw backward{2e-4, rate, std::nullopt};
    backward.host_floor_s = 2 * forward.host_floor_s;
    instance.cluster->gpu.operator_compute[std::string(operator_kind_name(kind))] = {forward,
                                                                                     backward};
  }
  return instance;
}

// Every combination, with the peak as tests/search/instances.hpp writes it out.
double brute_force_s(const CostModel& model, const SearchSpec& spec, int batch, double limit) {
  return osdp::testing::brute_force(model, spec, batch, limit)
      .best_time_s.value_or(std::numeric_limits<double>::infinity());
}

}  // namespace

TEST_CASE("exact search equals brute force with host floors", "[search][exact][floor]") {
  int compared = 0;
  for (unsigned seed = 1; seed <= 24; ++seed) {
    const exactness::Instance instance = floored_instance(seed, 5);
    const CostModel model = instance.model();
    SearchSpec spec;
    spec.optimality_gap = 0;
    spec.time_limit_s = 1e9;
    spec.modes = {Mode::dp, Mode::zdp, Mode::z2};
    spec.checkpoint = SearchSpec::CheckpointPolicy::automatic;
    for (int batch : {1, 2, 3, 6}) {
      const double least = min_peak_memory_bytes(model, spec, batch);
      for (double factor : {1.0, 1.3, 3.0}) {
        const double limit = least * factor;
        const double best = brute_force_s(model, spec, batch, limit);
        const auto found = solve_batch(model, spec, batch, limit);
        INFO("seed " << seed << " batch " << batch << " factor " << factor);
        if (!std::isfinite(best)) {
          CHECK_FALSE(found.has_value());
          continue;
        }
        REQUIRE(found.has_value());
        CHECK(found->cost.iteration_time_s == Approx(best).epsilon(1e-9));
        ++compared;
      }
    }
  }
  CHECK(compared > 200);
}
