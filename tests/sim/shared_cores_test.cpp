// CPU ranks sharing the host's cores (cluster.host_cores): compute and collectives are CPU work
// that the busy threads of a node share fairly.
#include <catch2/catch.hpp>

#include "model/cost_model.hpp"
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
