// Gradient accumulation in the simulator: every micro-batch runs its compute and (sharded
// modes) its gathers and reduce-scatters; DP all-reduces once, after the last micro-batch.
#include <catch2/catch.hpp>

#include "scenarios.hpp"
#include "sim/program.hpp"
#include "sim/simulate.hpp"

using namespace osdp;
using namespace osdp::sim;
using namespace osdp::sim::test;

namespace {

struct Counts {
  int all_reduces = 0;
  int reduce_scatters = 0;
  int all_gathers = 0;
  double all_reduce_bytes = 0;
  double reduce_scatter_bytes = 0;
  int forwards = 0;
  int backwards = 0;
};

Counts count(const Program& program) {
  Counts counts;
  for (const ProgramItem& item : program.items) {
    if (!item.collective) {
      counts.forwards += item.phase == Phase::forward;
      counts.backwards += item.phase == Phase::backward;
      continue;
    }
    switch (item.kind) {
      case CollectiveKind::all_reduce:
        ++counts.all_reduces;
        counts.all_reduce_bytes += item.bytes;
        break;
      case CollectiveKind::reduce_scatter:
        ++counts.reduce_scatters;
        counts.reduce_scatter_bytes += item.bytes;
        break;
      case CollectiveKind::all_gather:
        ++counts.all_gathers;
        break;
    }
  }
  return counts;
}

Scenario accumulating(int steps, Cluster cluster = logical_cluster(4, 10e-6, 1.0 / 20e9)) {
  Scenario scenario = chain_scenario(ChainSpec{}, std::move(cluster));
  scenario.training.accumulation_steps = steps;
  return scenario;
}

Program program_of(const Scenario& scenario, OperatorChoice choice, int batch,
                   const SimOptions& options = {}) {
  return build_program(scenario.cost_model(), uniform_plan(scenario, batch, choice), options);
}

}  // namespace

TEST_CASE("DP all-reduces once per iteration, ZDP reduce-scatters per micro-batch",
          "[sim][accumulation]") {
  const ChainSpec spec;
  const double all_bytes = spec.operators * spec.parameter_bytes;
  for (int m : {1, 3}) {
    INFO("micro-batches " << m);
    const Scenario scenario = accumulating(m);
    const Counts dp = count(program_of(scenario, OperatorChoice::whole(Mode::dp), 2));
    CHECK(dp.forwards == m * spec.operators);
    CHECK(dp.backwards == m * spec.operators);
    CHECK(dp.all_reduces == spec.operators);
    CHECK(dp.all_reduce_bytes == Approx(all_bytes));
    CHECK(dp.reduce_scatters == 0);

    const Counts zdp = count(program_of(scenario, OperatorChoice::whole(Mode::zdp), 2));
    CHECK(zdp.reduce_scatters == m * spec.operators);
    CHECK(zdp.reduce_scatter_bytes == Approx(m * all_bytes));
    CHECK(zdp.all_gathers == 2 * m * spec.operators);
    CHECK(zdp.all_reduces == 0);

    SimOptions bucket;
    bucket.gradient_all_reduce = GradientAllReduce::after_backward;
    const Counts once = count(program_of(scenario, OperatorChoice::whole(Mode::dp), 2, bucket));
    CHECK(once.all_reduces == 1);
    CHECK(once.all_reduce_bytes == Approx(all_bytes));  // the same bytes, in one bucket
  }
}

TEST_CASE("m micro-batches of b compute what one batch of m x b does", "[sim][accumulation]") {
  // Gamma_i per sample and no fixed part: the compute is the same, the samples too.
  const Scenario four = accumulating(4, logical_cluster(4, 0.0, 0.0));
  const Scenario one = accumulating(1, logical_cluster(4, 0.0, 0.0));
  for (Mode mode : {Mode::dp, Mode::zdp, Mode::z2}) {
    INFO(mode_name(mode));
    const SimulationResult a =
        simulate_plan(four, uniform_plan(four, 2, OperatorChoice::whole(mode)), SimOptions{});
    const SimulationResult b =
        simulate_plan(one, uniform_plan(one, 8, OperatorChoice::whole(mode)), SimOptions{});
    CHECK(a.compute_s == Approx(b.compute_s).epsilon(1e-9));
    CHECK(a.iteration_time_s == Approx(b.iteration_time_s).epsilon(1e-9));
    CHECK(a.throughput_samples_per_s == Approx(b.throughput_samples_per_s).epsilon(1e-9));
    CHECK(a.peak_memory_bytes < b.peak_memory_bytes);  // activations of one micro-batch
  }
}

TEST_CASE("the DP bucket all-reduce after the backward adds its whole time",
          "[sim][accumulation]") {
  const ChainSpec spec;
  const Cluster cluster = logical_cluster(4, 10e-6, 1.0 / 20e9);
  const Scenario scenario = accumulating(2, cluster);
  SimOptions bucket;
  bucket.gradient_all_reduce = GradientAllReduce::after_backward;
  const SimulationResult result =
      simulate_plan(scenario, uniform_plan(scenario, 2, OperatorChoice::whole(Mode::dp)), bucket);
  const double compute = 2 * spec.operators * 2 * spec.compute_s_per_sample;
  const double all_reduce =
      cluster.world.time_s(CollectiveKind::all_reduce, spec.operators * spec.parameter_bytes, 4);
  CHECK(result.iteration_time_s == Approx(compute + all_reduce).epsilon(1e-6));
}

TEST_CASE("a plan chosen for a global batch is simulated with its own accumulation steps",
          "[sim][accumulation][global-batch]") {
  const Scenario scenario = accumulating(1);
  const int steps = 3;
  Plan plan = uniform_plan(scenario, 2, OperatorChoice::whole(Mode::zdp));
  const SimOptions options = read_sim_options(scenario.simulation, scenario.file);
  // The same plan in a scenario that fixes the accumulation steps itself.
  Scenario fixed = scenario;
  fixed.training.accumulation_steps = steps;
  const SimulationResult expected = simulate_plan(fixed, plan, options);
  // The plan carries them (as the scheduler writes it for a global batch).
  plan.accumulation_steps = steps;
  const SimulationResult carried = simulate_plan(scenario, plan, options);
  CHECK(carried.iteration_time_s == Approx(expected.iteration_time_s).epsilon(1e-12));
  // A global batch reached at the plan's micro-batch gives the same steps.
  Scenario global = scenario;
  global.training.global_batch_size = 2 * steps * scenario.cluster.ranks;
  plan.accumulation_steps = 0;
  const SimulationResult reached = simulate_plan(global, plan, options);
  CHECK(reached.iteration_time_s == Approx(expected.iteration_time_s).epsilon(1e-12));
  CHECK(reached.throughput_samples_per_s ==
        Approx(2.0 * steps * scenario.cluster.ranks / reached.iteration_time_s).epsilon(1e-12));
}
