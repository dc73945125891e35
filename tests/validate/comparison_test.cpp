#include "validate/comparison.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;

namespace {

PlanMeasurement measured(const std::string& name, double time_s, double peak_bytes) {
  return {name, {{time_s, 0.0, peak_bytes, 1.0}, {0.9 * time_s, 0.0, 0.5 * peak_bytes, 1.0}}};
}

}  // namespace

TEST_CASE("comparison: errors, ranking and outputs", "[validate][comparison]") {
  Scenario scenario;
  scenario.cluster.ranks = 2;
  Plan plan;
  plan.batch_size = 2;
  plan.choices.assign(2, OperatorChoice::whole(Mode::dp));
  const std::vector<PlanRun> plans{{"a", plan}, {"b", plan}, {"c", plan}};
  // The slowest rank's time and the highest rank's peak are the plan's.
  const std::vector<PlanMeasurement> measurements{measured("a", 1.0, 100), measured("b", 2.0, 200),
                                                  measured("c", 3.0, 300)};
  std::vector<SimulatedFigures> simulated{{1.1, 95, 0}, {1.8, 210, 0}, {3.3, 300, 0}};
  Comparison comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  REQUIRE(comparison.rows.size() == 3);
  CHECK(comparison.rows[0].time_error_percent() == Approx(10.0));
  CHECK(comparison.rows[1].time_error_percent() == Approx(-10.0));
  CHECK(comparison.rows[0].memory_error_percent() == Approx(-5.0));
  CHECK(comparison.median_abs_time_error_percent() == Approx(10.0));
  CHECK(comparison.median_abs_memory_error_percent() == Approx(5.0));
  CHECK(comparison.ranking_agrees());
  CHECK(comparison.pairs == 3);
  // b simulated slower than c: two of three pairs still agree.
  simulated[1].iteration_time_s = 3.5;
  comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  CHECK_FALSE(comparison.ranking_agrees());
  CHECK(comparison.concordant_pairs == 2);
  // The pair ordered differently (b 2 s, c 3 s) measured 50 % apart.
  CHECK(comparison.widest_discordant_gap_percent == Approx(50.0));
  CHECK(comparison_table(comparison).find("the others measured at most 50.0 % apart") !=
        std::string::npos);
  // A simulated tie orders nothing, whichever plan measured faster.
  simulated[1].iteration_time_s = 1.1;
  comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  CHECK(comparison.ranking_agrees());
  const Json json = comparison_json(comparison);
  CHECK(json["plans"][0]["measured_iteration_time_s"] == 1.0);
  CHECK(json["plans"][2]["simulated_peak_memory_bytes"] == 300.0);
  CHECK(comparison_csv(comparison).find("a,2,1,1.1,") != std::string::npos);
}
