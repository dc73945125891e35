#include "validate/comparison.hpp"

#include "validate/peer_waits.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;

namespace {

PlanMeasurement measured(const std::string& name, double time_s, double peak_bytes) {
  return {name,
          {{time_s, 0.0, peak_bytes, 1.0, {}, 0.0},
           {0.9 * time_s, 0.0, 0.5 * peak_bytes, 1.0, {}, 0.0}}};
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
  std::vector<SimulatedFigures> simulated{{1.1, 95, 0, {}}, {1.8, 210, 0, {}}, {3.3, 300, 0, {}}};
  Comparison comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  REQUIRE(comparison.rows.size() == 3);
  CHECK(comparison.rows[0].time_error_percent() == Approx(10.0));
  CHECK(comparison.rows[1].time_error_percent() == Approx(-10.0));
  CHECK(comparison.rows[0].memory_error_percent() == Approx(-5.0));
  CHECK(comparison.median_abs_time_error_percent() == Approx(10.0));
  CHECK(comparison.max_abs_time_error_percent() == Approx(10.0));
  CHECK(comparison.median_abs_memory_error_percent() == Approx(5.0));
  CHECK(comparison.ranking_agrees());
  CHECK(comparison.pairs == 3);
  // b simulated slower than c: two of three pairs still agree.
  simulated[1].iteration_time_s = 3.5;
  comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  CHECK_FALSE(comparison.ranking_agrees());
  CHECK(comparison.concordant_pairs == 2);
  CHECK(comparison.max_abs_time_error_percent() == Approx(75.0));  // b: 3.5 s against 2 s
  // The pair ordered differently (b 2 s, c 3 s) measured 50 % apart.
  CHECK(comparison.widest_discordant_gap_percent == Approx(50.0));
  CHECK(comparison_table(comparison).find("differs (2 of 3 pairs") != std::string::npos);
  // A simulated tie orders nothing, whichever plan measured faster.
  simulated[1].iteration_time_s = 1.1;
  comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  CHECK(comparison.ranking_agrees());
  const Json json = comparison_json(comparison);
  CHECK(json["plans"][0]["measured_iteration_time_s"] == 1.0);
  CHECK(json["plans"][2]["simulated_peak_memory_bytes"] == 300.0);
  CHECK(comparison_csv(comparison).find("a,2,1,1.1,") != std::string::npos);
  // The table shows each plan's exposed communication, measured (the critical rank's: the one
  // that computed longest and so waited least) and simulated, beside its time; the JSON keeps
  // the longest wait too.
  std::vector<PlanMeasurement> waited = measurements;
  waited[0].ranks[0].exposed_communication_s = 0.0789;
  waited[0].ranks[1].exposed_communication_s = 0.0456;
  simulated[0].exposed_communication_s = 0.0123;
  const Comparison with_waits = compare(scenario, plans, waited, simulated, "simgrid");
  CHECK(with_waits.rows[0].measured_exposed_communication_s == Approx(0.0456));
  CHECK(with_waits.rows[0].measured_longest_exposed_communication_s == Approx(0.0789));
  CHECK(comparison_json(with_waits)["plans"][0]["measured_longest_exposed_communication_s"] ==
        Approx(0.0789));
  const std::string table = comparison_table(with_waits);
  const std::size_t row_a = table.find("\na ");
  REQUIRE(row_a != std::string::npos);
  const std::string line = table.substr(row_a + 1, table.find('\n', row_a + 1) - row_a - 1);
  CHECK(line.find(" 45.6 ") != std::string::npos);
  CHECK(line.find(" 12.3 ") != std::string::npos);
  CHECK(table.find("exposed ms") != std::string::npos);
  // 12.3 ms simulated against 45.6 measured: off by more than 5 ms and 30 %; b and c (no
  // waits, none simulated) within.
  CHECK_FALSE(with_waits.rows[0].exposed_within_target());
  CHECK(table.find("median in 2 of 3 plans") != std::string::npos);
  CHECK(comparison_json(with_waits)["plans"][0]["exposed_within_target"] == false);
  // Within 5 ms of a small wait, or within 30 % of a large one.
  ComparisonRow row;
  row.measured_exposed_communication_s = 0.002;
  row.simulated_exposed_communication_s = 0.0069;
  CHECK(row.exposed_within_target());
  row.simulated_exposed_communication_s = 0.0071;
  CHECK_FALSE(row.exposed_within_target());
  row.measured_exposed_communication_s = 0.100;
  row.simulated_exposed_communication_s = 0.129;
  CHECK(row.exposed_within_target());
  row.simulated_exposed_communication_s = 0.131;
  CHECK_FALSE(row.exposed_within_target());
}

TEST_CASE("comparison: exposed communication per iteration, the rank that set the pace",
          "[validate][comparison]") {
  Scenario scenario;
  scenario.cluster.ranks = 2;
  Plan plan;
  plan.batch_size = 2;
  plan.choices.assign(2, OperatorChoice::whole(Mode::zdp));
  // The ranks take turns being slow: in each iteration the faster one waits 20 ms for the
  // other, which itself waits 2-4 ms for communication. Each rank's median is 20 ms (three of
  // five iterations), but in no iteration did the critical rank wait more than 4 ms.
  PlanMeasurement measurement{"fsdp", {}};
  measurement.ranks.push_back(
      {1.0, 0.020, 100, 1.0, {1, 1, 1, 1, 1}, 0.0, {0.020, 0.002, 0.020, 0.003, 0.020}});
  measurement.ranks.push_back(
      {1.0, 0.020, 100, 1.0, {1, 1, 1, 1, 1}, 0.0, {0.004, 0.020, 0.001, 0.020, 0.020}});
  const SimulatedFigures simulated{1.0, 100, 0.003, {}};
  const Comparison comparison =
      compare(scenario, {{"fsdp", plan}}, {measurement}, {simulated}, "simgrid");
  // Per iteration the least wait: 4, 2, 1, 3 and 20 ms; their median 3 ms.
  CHECK(comparison.rows[0].measured_exposed_communication_s == Approx(0.003));
  // Its middle half over the iterations: 2-4 ms, in the table, the CSV and the JSON.
  CHECK(comparison.rows[0].measured_exposed_spread.first_quartile_s == Approx(0.002));
  CHECK(comparison.rows[0].measured_exposed_spread.third_quartile_s == Approx(0.004));
  CHECK(comparison_table(comparison).find(" 2.0-4.0 ") != std::string::npos);
  // The CSV also says whether the plan is within the target (1), for the plot to colour it.
  CHECK(comparison_csv(comparison).find(",0.002,0.004,1\n") != std::string::npos);
  CHECK(comparison_json(comparison)["plans"][0]["measured_exposed_communication_q3_s"] ==
        Approx(0.004));
  // And the mean of the critical waits (4 + 2 + 1 + 3 + 20) / 5 = 6 ms in the JSON.
  CHECK(comparison_json(comparison)["plans"][0]["measured_exposed_communication_mean_s"] ==
        Approx(0.006));
  // Simulated 3 ms against the measured 3 ms: within the target.
  CHECK(comparison.rows[0].exposed_within_target());
  CHECK(comparison_table(comparison).find("median in 1 of 1 plans") != std::string::npos);
  // The longest stays a rank's median.
  CHECK(comparison.rows[0].measured_longest_exposed_communication_s == Approx(0.020));
  // Without every iteration from every rank: the ranks' medians.
  measurement.ranks[1].exposed_communication_steps_s.pop_back();
  const Comparison medians =
      compare(scenario, {{"fsdp", plan}}, {measurement}, {simulated}, "simgrid");
  CHECK(medians.rows[0].measured_exposed_communication_s == Approx(0.020));
}

TEST_CASE("peer waits: the part of a wait before the group's last rank started the collective",
          "[validate][comparison]") {
  // Collective 0 started here at 1.0 s, on the last rank at 1.3 s; collective 1 at 2.0 s on
  // both. The compute waited 1.1-1.5 s (on collective 0) and 2.0-2.2 s (on collective 1).
  const std::vector<TimeInterval> waits = {{1.1, 1.5}, {2.0, 2.2}};
  CHECK(peer_wait_s(waits, {1.0, 2.0}, {1.3, 2.0}) == Approx(0.2));  // 1.1-1.3 only
  // A wait before this rank's own start (queued behind its own earlier collective) is not a
  // peer's: collective 1 started here at 2.1 s, on the peer at 2.15 s.
  CHECK(peer_wait_s(waits, {1.0, 2.1}, {1.3, 2.15}) == Approx(0.25));
  // Nobody late: nothing.
  CHECK(peer_wait_s(waits, {1.0, 2.0}, {1.0, 2.0}) == 0.0);
  CHECK_THROWS(peer_wait_s(waits, {1.0}, {1.0, 2.0}));
}

TEST_CASE("comparison: the critical wait less the waits for a late peer",
          "[validate][comparison]") {
  Scenario scenario;
  scenario.cluster.ranks = 2;
  Plan plan;
  plan.batch_size = 2;
  plan.choices.assign(2, OperatorChoice::whole(Mode::z2));
  // Each step one rank waits 30 ms at the end for the other, which itself waited 12 ms during
  // its forward, 10 ms of them for the first rank's gathers (that rank started late).
  PlanMeasurement measurement{"zero2", {}};
  measurement.ranks.push_back(
      {1.0, 0.030, 100, 1.0, {1, 1, 1}, 0.0, {0.030, 0.012, 0.030}, {0.029, 0.010, 0.028}});
  measurement.ranks.push_back(
      {1.0, 0.012, 100, 1.0, {1, 1, 1}, 0.0, {0.012, 0.030, 0.014}, {0.010, 0.029, 0.011}});
  const SimulatedFigures simulated{1.0, 100, 0.002, {}};
  Comparison comparison =
      compare(scenario, {{"zero2", plan}}, {measurement}, {simulated}, "simgrid");
  const ComparisonRow& row = comparison.rows[0];
  // The critical wait: 12, 12 and 14 ms, median 12 ms; 2 ms simulated is outside the target.
  CHECK(row.measured_exposed_communication_s == Approx(0.012));
  CHECK_FALSE(row.exposed_within_target());
  // Less each rank's peer waits: per step min(1, 2) = 1, min(2, 1) = 1, min(2, 3) = 2 ms.
  REQUIRE(row.measured_exposed_without_peer_waits_s.has_value());
  CHECK(*row.measured_exposed_without_peer_waits_s == Approx(0.001));
  CHECK(row.exposed_without_peer_waits_within_target());
  CHECK(comparison.plans_with_peer_waits() == 1);
  CHECK(comparison.plans_with_exposed_without_peer_waits_within_target() == 1);
  CHECK(comparison_table(comparison).find("ranks out of pace") != std::string::npos);
  CHECK(comparison_json(comparison)["plans"][0]["measured_exposed_without_peer_waits_s"] ==
        Approx(0.001));
  // A rank without the split: no figure, no line.
  measurement.ranks[1].peer_wait_steps_s.clear();
  comparison = compare(scenario, {{"zero2", plan}}, {measurement}, {simulated}, "simgrid");
  CHECK_FALSE(comparison.rows[0].measured_exposed_without_peer_waits_s.has_value());
  CHECK(comparison_table(comparison).find("ranks out of pace") == std::string::npos);
  CHECK_FALSE(
      comparison_json(comparison)["plans"][0].contains("measured_exposed_without_peer_waits_s"));
}

TEST_CASE("comparison: a layout's stages, peak memory and bubble by pipeline stage",
          "[validate][comparison]") {
  Scenario scenario;
  scenario.cluster.ranks = 4;
  PlanRun run{"tp2-pp2", Plan{}};
  run.plan.batch_size = 2;
  ParallelRun layout;
  layout.degrees = {2, 2, 1};  // tp-dp-pp: ranks 0 and 1 are stage 0, ranks 2 and 3 stage 1
  run.layout = layout;
  PlanMeasurement measurement{"tp2-pp2", {}};
  const double peaks[] = {100, 120, 90, 80};
  const double waits_s[] = {0.002, 0.001, 0.004, 0.003};
  const double exposed_s[] = {0.030, 0.020, 0.010, 0.015};
  for (int rank = 0; rank < 4; ++rank) {
    measurement.ranks.push_back({1.0, exposed_s[rank], peaks[rank], 1.0, {}, waits_s[rank]});
  }
  SimulatedFigures simulated{0.9, 110, 0.01, {{110, 0.001}, {99, 0.005}}};
  const Comparison comparison = compare(scenario, {run}, {measurement}, {simulated}, "simgrid");
  REQUIRE(comparison.rows.size() == 1);
  const ComparisonRow& row = comparison.rows.front();
  // Exposed communication: each stage's least (its critical rank: 20 and 10 ms), the stage
  // waiting most of those (20 ms); the longest of any rank beside it.
  CHECK(row.measured_exposed_communication_s == Approx(0.020));
  CHECK(row.measured_longest_exposed_communication_s == Approx(0.030));
  // Each stage: the highest peak and the longest wait of its two tensor-parallel ranks.
  REQUIRE(row.measured_stages.size() == 2);
  CHECK(row.measured_stages[0].peak_memory_bytes == 120);
  CHECK(row.measured_stages[0].bubble_s == Approx(0.002));
  CHECK(row.measured_stages[1].peak_memory_bytes == 90);
  CHECK(row.measured_stages[1].bubble_s == Approx(0.004));
  const std::string table = stage_table(comparison);
  CHECK(table.find("bubble ms") != std::string::npos);
  // Stage 1: 90 bytes measured against 99 simulated (+10 %), 4 ms against 5 ms.
  CHECK(table.find("+10.0         4.0         5.0") != std::string::npos);
  const Json json = comparison_json(comparison);
  CHECK(json["plans"][0]["stages"][1]["measured_bubble_s"] == Approx(0.004));
  CHECK(json["plans"][0]["stages"][0]["simulated_peak_memory_bytes"] == 110.0);
  // Plans without a layout have no stage lines.
  Plan plain;
  plain.batch_size = 2;
  const Comparison without =
      compare(scenario, {{"ddp", plain}}, {measurement}, {simulated}, "simgrid");
  CHECK(stage_table(without).empty());
}

TEST_CASE("measurements: JSON round trip keeps each rank's pipeline wait",
          "[validate][comparison]") {
  PlanMeasurement measurement{"pp2", {{1.0, 0.2, 300e6, 2.5, {0.9, 1.1}, 0.05, {0.1, 0.3}}}};
  const std::vector<PlanMeasurement> back =
      measurements_from_json(measurements_to_json({measurement}));
  REQUIRE(back.size() == 1);
  REQUIRE(back[0].ranks.size() == 1);
  CHECK(back[0].ranks[0].pipeline_wait_s == 0.05);
  CHECK(back[0].ranks[0].iteration_times_s == std::vector<double>{0.9, 1.1});
  CHECK(back[0].ranks[0].exposed_communication_steps_s == std::vector<double>{0.1, 0.3});
  CHECK(back[0].ranks[0].peer_wait_steps_s.empty());  // none measured: none written
  PlanMeasurement split = measurement;
  split.ranks[0].peer_wait_steps_s = {0.05, 0.0};
  Json with_peers = measurements_to_json({split});
  CHECK(measurements_from_json(with_peers)[0].ranks[0].peer_wait_steps_s ==
        std::vector<double>{0.05, 0.0});
  with_peers[0]["ranks"][0]["peer_wait_steps_s"].push_back(0.01);
  CHECK_THROWS_WITH(measurements_from_json(with_peers, "m.json"),
                    Catch::Contains("peer_wait_steps_s") &&
                        Catch::Contains("one value per entry of exposed_communication_steps_s"));
  // Written before the field existed: it reads as no wait.
  Json old = measurements_to_json({measurement});
  old[0]["ranks"][0].erase("pipeline_wait_s");
  CHECK(measurements_from_json(old)[0].ranks[0].pipeline_wait_s == 0.0);
  // A wait that is no time is refused with its path.
  Json bad = measurements_to_json({measurement});
  bad[0]["ranks"][0]["exposed_communication_steps_s"][1] = -1.0;
  CHECK_THROWS_WITH(
      measurements_from_json(bad, "m.json"),
      Catch::Contains("exposed_communication_steps_s") && Catch::Contains("seconds from 0 s"));
  // A peak memory of nothing (or a step of 1e-300 s) is a unit slip, not a measurement.
  Json empty = measurements_to_json({measurement});
  empty[0]["ranks"][0]["peak_memory_bytes"] = 0;
  CHECK_THROWS_WITH(measurements_from_json(empty, "m.json"),
                    Catch::Contains("peak_memory_bytes") && Catch::Contains("above zero"));
  Json instant = measurements_to_json({measurement});
  instant[0]["ranks"][0]["iteration_times_s"][0] = 1e-300;
  CHECK_THROWS_WITH(
      measurements_from_json(instant, "m.json"),
      Catch::Contains("iteration_times_s") && Catch::Contains("a measured step time"));
}

TEST_CASE("spread: quartiles of the measured iterations", "[validate][comparison]") {
  const Spread spread = spread_of({5.0, 1.0, 3.0, 2.0, 4.0});
  CHECK(spread.median_s == Approx(3.0));
  CHECK(spread.first_quartile_s == Approx(2.0));
  CHECK(spread.third_quartile_s == Approx(4.0));
  CHECK(spread_of({1.0, 2.0}).first_quartile_s == Approx(1.25));
  CHECK(spread.overlaps(spread_of({3.0, 4.5, 6.0})));  // middle half 3.75-5.25
  CHECK_FALSE(spread.overlaps(spread_of({4.5, 5.0, 6.0})));
  // The mean keeps a heavy tail that the median drops.
  CHECK(spread.mean_s == Approx(3.0));
  const Spread tailed = spread_of({1.0, 1.0, 1.0, 9.0});
  CHECK(tailed.median_s == Approx(1.0));
  CHECK(tailed.mean_s == Approx(3.0));
  CHECK(spread_of({}).mean_s == 0.0);
}

TEST_CASE("ranking: plans whose middle halves overlap are ties", "[validate][comparison]") {
  Scenario scenario;
  scenario.cluster.ranks = 2;
  Plan plan;
  plan.batch_size = 2;
  plan.choices.assign(2, OperatorChoice::whole(Mode::dp));
  const std::vector<PlanRun> plans{{"a", plan}, {"b", plan}, {"c", plan}};
  // Per iteration the slower rank counts: rank 1 is never the slower here.
  const auto measured = [](const std::string& name, std::vector<double> times_s) {
    RankFigures rank0{0, 0, 100, 1.0, times_s, 0.0};
    for (double& time_s : times_s) time_s *= 0.5;
    RankFigures rank1{0, 0, 100, 1.0, times_s, 0.0};
    return PlanMeasurement{name, {rank0, rank1}};
  };
  const std::vector<PlanMeasurement> measurements{measured("a", {1.0, 1.1, 1.2, 1.3}),
                                                  measured("b", {2.0, 2.4, 2.6, 3.0}),
                                                  measured("c", {2.5, 2.7, 2.9, 3.2})};
  CHECK(measurements[1].iteration_time_s() == Approx(2.5));
  // b (2.5 s) and c (2.8 s) overlap: the simulator ordering them otherwise is not a
  // disagreement; a against either is.
  std::vector<SimulatedFigures> simulated{{1.0, 100, 0, {}}, {3.0, 100, 0, {}}, {2.9, 100, 0, {}}};
  Comparison comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  CHECK(comparison.pairs == 3);
  CHECK(comparison.separated_pairs == 2);
  CHECK(comparison.concordant_pairs == 2);
  CHECK(comparison.ranking_agrees());
  CHECK(comparison_table(comparison).find("1 pair within each other's middle half") !=
        std::string::npos);
  // a simulated slower than c: a separated pair ordered otherwise.
  simulated[0].iteration_time_s = 3.5;
  comparison = compare(scenario, plans, measurements, simulated, "simgrid");
  CHECK_FALSE(comparison.ranking_agrees());
  const Json json = comparison_json(comparison);
  CHECK(json["separated_pairs"] == 2);
  CHECK(json["plans"][1]["measured_iteration_time_q1_s"].get<double>() == Approx(2.3));
}

TEST_CASE("the speed reference reads the drift from its own probe only", "[validate][speed]") {
  SpeedReference reference;
  reference.probe.layers = 2;
  reference.probe.hidden = 320;
  reference.batch_size = 4;
  reference.compute_s = 0.020;
  // The validated model's kinds are the compute check's, not the reference's.
  std::vector<validate::ComputeCheck> checks{
      {"attention", 4, 2, 0.050, 0.060, false},
      {"attention", 4, 2, 0.008, 0.009, true},
      {"mlp", 4, 2, 0.009, 0.008, true},
  };
  const auto drift = validate::speed_drift(checks, reference);
  REQUIRE(drift);
  CHECK(drift->before_s == Approx(0.017));
  CHECK(drift->after_s == Approx(0.017));
  CHECK(drift->factor() == Approx(0.85));
  // No reference in the cluster, or none timed: no drift.
  CHECK_FALSE(validate::speed_drift(checks, std::nullopt));
  checks.erase(checks.begin() + 1, checks.end());
  CHECK_FALSE(validate::speed_drift(checks, reference));
}
