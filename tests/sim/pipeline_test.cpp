// The 3D iteration in SimGrid (sim/pipeline_simulation) against the 3D model's own timeline
// (model/parallel_iteration): where nothing contends, the same iteration; the bubble out of the
// event simulation matches the closed form with equal stages and free transfers.
#include <catch2/catch.hpp>

#include "model/measured_runs.hpp"
#include "model/parallel_iteration.hpp"
#include "sim/pipeline_simulation.hpp"
#include "tests/support/gpt_spec.hpp"

using namespace osdp;

namespace {

Scenario vtrain() {
  return load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/vtrain-a100-dp.json");
}

ParallelRun run_of(int tensor, int pipeline, int data, int micro_batches,
                   PipelineSchedule schedule) {
  ParallelRun run;
  run.degrees = {tensor, pipeline, data, 0};
  run.micro_batch = 2;
  run.micro_batches = micro_batches;
  run.schedule = schedule;
  if (schedule == PipelineSchedule::interleaved) run.chunks_per_stage = 2;
  run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
  return run;
}

// The run on `ranks` GPUs of the scenario's cluster: the 3D model's cost and the simulation.
struct Simulated {
  ParallelIterationCost cost;
  sim::PipelineSimulation simulation;
};

Simulated simulate_on(const Scenario& scenario, const GptSpec& spec, const ParallelRun& run,
                      int ranks) {
  Scenario on = scenario;
  on.cluster = cluster_with_ranks(scenario, ranks);
  ParallelIterationCost cost =
      parallel_iteration_cost(spec, scenario.training, on.cluster, scenario.cost, run, "test");
  sim::PipelineSimulation simulation =
      sim::simulate_pipeline(on, run, cost, sim::Granularity::step);
  return {std::move(cost), std::move(simulation)};
}

}  // namespace

TEST_CASE("the simulated 3D iteration is the model's where nothing contends", "[sim][pipeline]") {
  Scenario scenario = vtrain();
  const GptSpec spec = testing::gpt_spec(8, 1024, 16, 512, 128);
  struct Case {
    int tensor, pipeline, data, micro_batches;
    PipelineSchedule schedule;
  };
  // One server of 8 GPUs on NVSwitch: every transfer and reduction on a GPU's own link.
  for (const Case& c :
       {Case{1, 4, 2, 8, PipelineSchedule::one_f_one_b},
        Case{2, 2, 2, 4, PipelineSchedule::one_f_one_b}, Case{1, 4, 1, 8, PipelineSchedule::gpipe},
        Case{1, 2, 4, 4, PipelineSchedule::interleaved},
        Case{8, 1, 1, 3, PipelineSchedule::one_f_one_b}}) {
    const ParallelRun run = run_of(c.tensor, c.pipeline, c.data, c.micro_batches, c.schedule);
    const auto [cost, simulated] = simulate_on(scenario, spec, run, c.tensor * c.pipeline * c.data);
    CAPTURE(c.tensor, c.pipeline, c.data, c.micro_batches, pipeline_schedule_name(c.schedule));
    CHECK(simulated.pipeline_s == Approx(cost.pipeline_s).epsilon(1e-6));
    CHECK(simulated.iteration_time_s == Approx(cost.iteration_time_s).epsilon(1e-6));
    CHECK(simulated.bubble_fraction == Approx(cost.timeline.bubble_fraction()).margin(1e-6));
    if (c.pipeline > 1) CHECK(simulated.flows > 0);
  }
}

TEST_CASE("data-parallel rings of several stages meet on the NICs in the simulation",
          "[sim][pipeline]") {
  // Two servers, pipeline across them, data-parallel groups within: the stages reduce at
  // different times, so they do not meet; with data-parallel groups across servers the
  // reductions of the tensor-parallel ranks share the NICs, which the model's ring timing
  // already divides. The simulation is never faster than the pipeline it runs.
  Scenario scenario = vtrain();
  const GptSpec spec = testing::gpt_spec(8, 1024, 16, 512, 128);
  const ParallelRun run = run_of(2, 2, 4, 4, PipelineSchedule::one_f_one_b);
  const auto [cost, simulated] = simulate_on(scenario, spec, run, 16);
  CHECK(simulated.pipeline_s == Approx(cost.pipeline_s).epsilon(1e-6));
  CHECK(simulated.iteration_time_s >= simulated.pipeline_s);
  CHECK(simulated.iteration_time_s == Approx(cost.iteration_time_s).epsilon(0.05));
}

namespace {

// Every transformer operator in `layers_mode`, the embedding and the head in `rest_mode`.
ParallelRun with_modes(const GptSpec& spec, const Scenario& scenario, const Cluster& cluster,
                       ParallelRun run, Mode layers_mode, Mode rest_mode) {
  const ParallelIterationCost shape =
      parallel_iteration_cost(spec, scenario.training, cluster, scenario.cost, run, "test");
  for (int op = 0; op < shape.workload->size(); ++op) {
    const OperatorKind kind = shape.workload->op(op).kind;
    const bool layer = kind == OperatorKind::attention || kind == OperatorKind::mlp;
    run.modes.push_back(layer ? layers_mode : rest_mode);
  }
  return run;
}

}  // namespace

TEST_CASE("the sharded modes' per-pass collectives run as flows beside the compute",
          "[sim][pipeline]") {
  Scenario scenario = vtrain();
  const GptSpec spec = testing::gpt_spec(8, 1024, 16, 512, 128);
  SECTION("alone on the links, they take the model's time") {
    // No pipeline: nothing else on the links while a pass gathers and reduce-scatters.
    for (const Mode mode : {Mode::zdp, Mode::z2}) {
      const Cluster cluster = cluster_with_ranks(scenario, 8);
      const ParallelRun run = with_modes(
          spec, scenario, cluster, run_of(1, 1, 8, 3, PipelineSchedule::one_f_one_b), mode, mode);
      const auto [cost, simulated] = simulate_on(scenario, spec, run, 8);
      REQUIRE(!cost.chunks.front().backward_collectives.empty());
      CAPTURE(mode_name(mode));
      CHECK(simulated.pipeline_s == Approx(cost.pipeline_s).epsilon(1e-6));
      CHECK(simulated.iteration_time_s == Approx(cost.iteration_time_s).epsilon(1e-6));
      // Each pass's collectives are collectives of the simulation, beyond the reductions.
      const long long per_pass =
          static_cast<long long>(cost.chunks.front().forward_collectives.size() +
                                 cost.chunks.front().backward_collectives.size());
      CHECK(simulated.collectives >= per_pass * run.micro_batches);
    }
  }
  SECTION("beside the pipeline's transfers they only slow it down") {
    // Two servers, the stages on different servers, the data-parallel groups inside each: the
    // per-pass gathers share the GPUs' links with the transfers.
    const Cluster cluster = cluster_with_ranks(scenario, 16);
    const ParallelRun run =
        with_modes(spec, scenario, cluster, run_of(1, 2, 8, 4, PipelineSchedule::one_f_one_b),
                   Mode::zdp, Mode::dp);
    const auto [cost, simulated] = simulate_on(scenario, spec, run, 16);
    CHECK(simulated.pipeline_s >= cost.pipeline_s * (1 - 1e-6));
    CHECK(simulated.iteration_time_s == Approx(cost.iteration_time_s).epsilon(0.1));
  }
}

TEST_CASE("data-parallel groups that share a PCIe tree's uplinks: the model divides them too",
          "[sim][pipeline]") {
  // 8 TITAN RTX on 2 sockets x 2 switches x 2 GPUs. With tensor parallelism 2 the groups of
  // tensor ranks 0 and 1 each hold one GPU of two switches, so their rings cross the same
  // uplinks at the same time; the simulation routes them there, the model divides the uplink.
  Scenario scenario =
      load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/paper-titan-8g-nd-48l-1536h.json");
  const GptSpec spec = testing::gpt_spec(8, 1024, 16, 512, 128);
  const Cluster cluster = cluster_with_ranks(scenario, 8);
  struct Case {
    int tensor, pipeline, data;
    Mode layers_mode;
  };
  for (const Case& c :
       {Case{2, 2, 2, Mode::zdp}, Case{4, 1, 2, Mode::dp}, Case{2, 1, 4, Mode::z2}}) {
    const ParallelRun run =
        with_modes(spec, scenario, cluster,
                   run_of(c.tensor, c.pipeline, c.data, 4, PipelineSchedule::one_f_one_b),
                   c.layers_mode, Mode::dp);
    const auto [cost, simulated] = simulate_on(scenario, spec, run, 8);
    CAPTURE(c.tensor, c.pipeline, c.data, mode_name(c.layers_mode));
    CHECK(simulated.iteration_time_s == Approx(cost.iteration_time_s).epsilon(0.01));
  }
}

TEST_CASE("z2's gathers before the first micro-batch delay a stage's first pass, in both",
          "[sim][pipeline]") {
  // Two stages of z2 layers on one NVSwitch server: each stage gathers its kept parameters
  // before its first pass; the second stage's gathers run while it waits for its first input.
  Scenario scenario = vtrain();
  const GptSpec spec = testing::gpt_spec(8, 1024, 16, 512, 128);
  const Cluster cluster = cluster_with_ranks(scenario, 8);
  const ParallelRun run =
      with_modes(spec, scenario, cluster, run_of(1, 2, 4, 4, PipelineSchedule::one_f_one_b),
                 Mode::z2, Mode::z2);
  const auto [cost, simulated] = simulate_on(scenario, spec, run, 8);
  for (const StageCost& stage : cost.stages) {
    REQUIRE(stage.prologue_s > 0);
    for (const StageCost::Reduction& reduction : stage.reductions) {
      CHECK(reduction.kind != CollectiveKind::all_gather);  // gathers are the prologue's
    }
  }
  // The first stage starts once its gathers are done; the second when its input arrives.
  CHECK(cost.timeline.stages[0].front().start_s == Approx(cost.stages[0].prologue_s));
  CHECK(cost.timeline.stages[1].front().start_s >= cost.timeline.stages[0].front().end_s);
  CHECK(simulated.pipeline_s == Approx(cost.pipeline_s).epsilon(1e-6));
  CHECK(simulated.iteration_time_s == Approx(cost.iteration_time_s).epsilon(1e-6));
}
