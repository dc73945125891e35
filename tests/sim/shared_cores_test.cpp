// CPU ranks sharing the host's cores (cluster.host_cores): compute and collectives are CPU work
// that the busy threads of a node share fairly.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/json_reader.hpp"
#include "scenarios.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

namespace {

constexpr double alpha_s = 200e-6;
constexpr double beta_s_per_byte = 1.0 / 2e9;

Cluster cpu_cluster(int ranks, std::optional<int> cores) {
  Cluster cluster = logical_cluster(ranks, alpha_s, beta_s_per_byte);
  if (cores) cluster.host_cores = HostCores{*cores};
  return cluster;
}

const std::vector<OperatorChoice>& choices() {
  static const std::vector<OperatorChoice> all{
      OperatorChoice::whole(Mode::dp), OperatorChoice::whole(Mode::zdp),
      OperatorChoice::whole(Mode::z2), OperatorChoice::whole(Mode::zdp, Checkpoint::unfused),
      OperatorChoice{Mode::zdp, 4, 4, Checkpoint::none}};
  return all;
}

}  // namespace

TEST_CASE("core rates: fair shares relative to one busy thread per rank", "[sim][cores]") {
  Cluster cluster = cpu_cluster(2, 2);
  CHECK(core_rate(cluster, 1) == 1.0);
  CHECK(core_rate(cluster, 2) == 1.0);
  CHECK(core_rate(cluster, 4) == 0.5);
  CHECK(shared_core_overlap_slowdown(cluster) == 2.0);
  cluster.host_cores = HostCores{1};  // the laws were measured at half a core each
  CHECK(core_rate(cluster, 1) == 2.0);
  CHECK(core_rate(cluster, 4) == 0.5);
  cluster.host_cores = HostCores{3};
  CHECK(shared_core_overlap_slowdown(cluster) == Approx(4.0 / 3.0));
  cluster.host_cores = HostCores{8};
  CHECK(shared_core_overlap_slowdown(cluster) == 1.0);
  cluster.host_cores.reset();
  CHECK(core_rate(cluster, 64) == 1.0);
}

TEST_CASE("enough cores for every thread: the same iteration as a cluster without sharing",
          "[sim][cores]") {
  const ChainSpec spec;
  const Scenario plain = chain_scenario(spec, cpu_cluster(2, std::nullopt));
  const Scenario roomy = chain_scenario(spec, cpu_cluster(2, 4));
  for (const OperatorChoice& choice : choices()) {
    INFO(describe(choice));
    const SimulationResult a = simulate_plan(plain, uniform_plan(plain, 2, choice), SimOptions{});
    const SimulationResult b = simulate_plan(roomy, uniform_plan(roomy, 2, choice), SimOptions{});
    CHECK(b.iteration_time_s == Approx(a.iteration_time_s).epsilon(1e-6));
    CHECK(b.peak_memory_bytes == a.peak_memory_bytes);
  }
}

TEST_CASE("one core per rank: compute and communication cannot overlap (core time conserved)",
          "[sim][cores]") {
  // Every rank always has a busy thread (its compute, or the collective its compute waits
  // for), so the node's cores are never idle and the iteration is all the CPU work over the
  // cores: compute plus every collective's time alone, however the schedule overlaps them.
  const ChainSpec spec;
  const Scenario shared = chain_scenario(spec, cpu_cluster(2, 2));
  const Scenario no_comm = chain_scenario(spec, logical_cluster(2, 0.0, 0.0));
  for (const OperatorChoice& choice : choices()) {
    INFO(describe(choice));
    const Plan plan = uniform_plan(shared, 2, choice);
    const SimulationResult result = simulate_plan(shared, plan, SimOptions{});
    const SimulationResult compute_only = simulate_plan(no_comm, plan, SimOptions{});
    // The analytic model's collectives: each one's time alone.
    const CostModel model(*shared.workload, shared.cluster, shared.training, shared.cost);
    const double communication_s = model.plan_cost(plan).communication_s;
    CHECK(communication_s > 0);
    CHECK(result.iteration_time_s ==
          Approx(compute_only.iteration_time_s + communication_s).epsilon(1e-6));
  }
}

TEST_CASE("the extended model charges shared cores as the simulator runs them", "[sim][cores]") {
  const ChainSpec spec;
  for (int cores : {2, 3}) {
    const Scenario scenario = chain_scenario(spec, cpu_cluster(2, cores));
    const CostModel model(*scenario.workload, scenario.cluster, scenario.training, scenario.cost);
    for (const OperatorChoice& choice : choices()) {
      INFO(describe(choice) << ", " << cores << " cores");
      const Plan plan = uniform_plan(scenario, 2, choice);
      const SimulationResult result = simulate_plan(scenario, plan, SimOptions{});
      CHECK(model.plan_cost(plan).iteration_time_s ==
            Approx(result.iteration_time_s).epsilon(0.05));
    }
  }
}

namespace {

Cluster ticking_cluster(int cores, double tick_s) {
  Cluster cluster = cpu_cluster(2, cores);
  cluster.host_cores->scheduler_tick_s = tick_s;
  return cluster;
}

struct Interval {
  double start_s, end_s;
};

// The trace's compute (tid 0) or communication (tid 1) events of one rank, in seconds.
std::vector<Interval> track(const Json& trace, int rank, int tid) {
  std::vector<Interval> events;
  for (const Json& event : trace.at("traceEvents")) {
    if (event.value("ph", "") != "X" || event.value("pid", -1) != rank ||
        event.value("tid", -1) != tid) {
      continue;
    }
    const double start_s = 1e-6 * event.at("ts").get<double>();
    events.push_back({start_s, start_s + 1e-6 * event.at("dur").get<double>()});
  }
  return events;
}

}  // namespace

TEST_CASE("a scheduler tick changes nothing where a core is free", "[sim][cores]") {
  const ChainSpec spec;
  const Scenario untimed = chain_scenario(spec, ticking_cluster(4, 0.0));
  const Scenario ticking = chain_scenario(spec, ticking_cluster(4, 4e-3));
  for (const OperatorChoice& choice : choices()) {
    INFO(describe(choice));
    const SimulationResult a =
        simulate_plan(untimed, uniform_plan(untimed, 2, choice), SimOptions{});
    const SimulationResult b =
        simulate_plan(ticking, uniform_plan(ticking, 2, choice), SimOptions{});
    CHECK(b.iteration_time_s == Approx(a.iteration_time_s).epsilon(1e-9));
    CHECK(b.exposed_comm_total_s() == Approx(a.exposed_comm_total_s()).margin(1e-12));
  }
}

TEST_CASE("a collective issued while every core computes starts at the next scheduler tick",
          "[sim][cores]") {
  // 2 ranks on 2 cores: a collective issued while both compute cannot end before the tick that
  // follows its issue, unless a compute ends first (its core is then free).
  const double tick_s = 4e-3;
  ChainSpec spec;
  spec.parameter_bytes = 2e6;  // collectives of well under a tick
  const Scenario scenario = chain_scenario(spec, ticking_cluster(2, tick_s));
  const std::string path = std::string(OSDP_BINARY_DIR) + "/sim-trace-tick.json";
  int held = 0;
  for (const OperatorChoice& choice : choices()) {
    INFO(describe(choice));
    simulate_plan(scenario, uniform_plan(scenario, 2, choice), SimOptions{}, path);
    const Json trace = read_json_file(path);
    const std::vector<Interval> computes[2] = {track(trace, 0, 0), track(trace, 1, 0)};
    for (const Interval& collective : track(trace, 0, 1)) {
      const double next_tick_s = (std::floor(collective.start_s / tick_s + 1e-9) + 1) * tick_s;
      bool every_core_busy = true;  // one compute of each rank spans issue to tick
      for (const auto& rank_computes : computes) {
        every_core_busy =
            every_core_busy &&
            std::any_of(rank_computes.begin(), rank_computes.end(), [&](const Interval& c) {
              return c.start_s < collective.start_s - 1e-9 && c.end_s > next_tick_s + 1e-9;
            });
      }
      if (!every_core_busy) continue;
      ++held;
      CHECK(collective.end_s >= next_tick_s - 1e-9);
    }
  }
  CHECK(held > 0);
}

TEST_CASE("short slices beside compute wait for the tick: more exposed communication",
          "[sim][cores]") {
  // ZDP in 4 slices issues a gather a slice, each beside the other slice's compute: on 2 busy
  // cores each waits for a tick (the testbed's in-step gathers took one tick each).
  const ChainSpec spec;
  const OperatorChoice sliced{Mode::zdp, 4, 4, Checkpoint::none};
  const Scenario untimed = chain_scenario(spec, ticking_cluster(2, 0.0));
  const Scenario ticking = chain_scenario(spec, ticking_cluster(2, 4e-3));
  const SimulationResult a = simulate_plan(untimed, uniform_plan(untimed, 2, sliced), SimOptions{});
  const SimulationResult b = simulate_plan(ticking, uniform_plan(ticking, 2, sliced), SimOptions{});
  CHECK(b.exposed_comm_total_s() > a.exposed_comm_total_s() + 1e-3);
}

namespace {

// 4 ranks on `cores` cores of one node, collectives free: what is left is the cores' sharing.
Scenario four_ranks_free_collectives(int cores, double tick_s) {
  Cluster cluster = logical_cluster(4, 0.0, 0.0);
  cluster.host_cores = HostCores{cores, tick_s};
  return chain_scenario(ChainSpec{}, cluster);
}

}  // namespace

TEST_CASE("more ranks than cores: the ranks take turns, a tick each, and the cores stay busy",
          "[sim][cores]") {
  // Sharing every core at once and taking turns do the same CPU work on cores that are never
  // idle while a rank can compute, so the iteration keeps its time (up to the last turn); but
  // the ranks that had the cores first now wait at each collective for the others.
  const double tick_s = 4e-3;
  const Scenario sharing = four_ranks_free_collectives(2, 0.0);
  const Scenario turns = four_ranks_free_collectives(2, tick_s);
  for (const OperatorChoice& choice : choices()) {
    INFO(describe(choice));
    const SimulationResult a = simulate_plan(sharing, uniform_plan(sharing, 4, choice), {});
    const SimulationResult b = simulate_plan(turns, uniform_plan(turns, 4, choice), {});
    CHECK(a.exposed_comm_total_s() == Approx(0.0).margin(1e-12));
    CHECK(b.iteration_time_s == Approx(a.iteration_time_s).margin(tick_s));
    REQUIRE(b.exposed_comm_total_s_per_rank.size() == 4);
    CHECK(b.exposed_comm_total_s_per_rank[0] == Approx(b.exposed_comm_total_s()));
    const std::vector<double>& waits_s = b.exposed_comm_total_s_per_rank;
    CHECK(std::accumulate(waits_s.begin(), waits_s.end(), 0.0) > tick_s / 2);
    // The validator's figure: the rank that waited least.
    CHECK(b.critical_rank_exposed_comm_s() == *std::min_element(waits_s.begin(), waits_s.end()));
    // ZDP meets at every operator's gathers: who arrives last changes hands, every rank waits.
    if (choice.mode == Mode::zdp) {
      for (double wait_s : waits_s) CHECK(wait_s > 0);
    }
  }
}

TEST_CASE("as many cores as ranks: no turns, whatever the tick", "[sim][cores]") {
  const Scenario untimed = four_ranks_free_collectives(4, 0.0);
  const Scenario ticking = four_ranks_free_collectives(4, 4e-3);
  for (const OperatorChoice& choice : choices()) {
    INFO(describe(choice));
    const SimulationResult a = simulate_plan(untimed, uniform_plan(untimed, 4, choice), {});
    const SimulationResult b = simulate_plan(ticking, uniform_plan(ticking, 4, choice), {});
    CHECK(b.iteration_time_s == Approx(a.iteration_time_s).epsilon(1e-9));
    CHECK(b.exposed_comm_total_s() == Approx(a.exposed_comm_total_s()).margin(1e-12));
  }
}
