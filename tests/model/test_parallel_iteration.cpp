// One 3D-parallel iteration (model/parallel_iteration): Megatron's closed forms where they hold —
// tensor-parallel bytes per layer (2 all-reduces of b s h forward, 2 backward, 2 more under
// recompute), a rank's activations per layer (s b h (10 + 24 / t) + 5 a s^2 b / t bytes in fp16),
// the first stage holding p micro-batches under 1F1B — and the iteration's parts adding up.
#include <algorithm>
#include <catch2/catch.hpp>

#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "model/parallel_iteration.hpp"
#include "model/scenario.hpp"
#include "tests/support/gpt_spec.hpp"

namespace osdp {
namespace {

Scenario vtrain() {
  return load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/vtrain-a100-dp.json");
}

GptSpec spec_of(int layers, int hidden, int heads, int sequence) {
  return testing::gpt_spec(layers, hidden, heads, sequence, 128);  // vTrain's padding
}

ParallelRun run_of(int tensor, int pipeline, int data, int micro_batch, int micro_batches,
                   bool checkpoint) {
  ParallelRun run;
  run.degrees = {tensor, pipeline, data, 0};
  run.micro_batch = micro_batch;
  run.micro_batches = micro_batches;
  if (checkpoint) run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
  return run;
}

// GPT 12 x 1024 (16 heads, sequence 1024) on tensor 2 x three stages of four layers (the middle
// one holds layers only), micro-batch 2: the cost and the tensor-parallel pair's ring.
struct ThreeStages {
  ParallelIterationCost cost;
  AlphaBeta tensor_link;
  static constexpr double layer_bytes = 2.0 * 1024 * 1024 * 2;  // b s h in fp16
};

ThreeStages three_stages(const Scenario& scenario, const ParallelRun& run) {
  const Cluster six = cluster_with_ranks(scenario, 6);
  return {parallel_iteration_cost(spec_of(12, 1024, 16, 1024), scenario.training, six,
                                  scenario.cost, run, "test"),
          group_ring_timing(*six.topology, 2, 1)};
}

TEST_CASE("tensor-parallel collectives: 2 all-reduces of b s h a layer each way, 2 more recomputed",
          "[parallel]") {
  const Scenario scenario = vtrain();
  for (bool checkpoint : {false, true}) {
    const ThreeStages stages = three_stages(scenario, run_of(2, 3, 1, 2, 6, checkpoint));
    const ChunkCost& middle = stages.cost.chunks[1];
    REQUIRE(middle.ops.size() == 8);
    const double all_reduce_s =
        ring_time_s(CollectiveKind::all_reduce, ThreeStages::layer_bytes, 2, stages.tensor_link);
    CHECK(middle.forward_communication_s == Approx(4 * 2 * all_reduce_s));
    CHECK(middle.backward_communication_s == Approx(4 * (checkpoint ? 4 : 2) * all_reduce_s));
  }
}

TEST_CASE("sequence parallelism: reduce-scatter and all-gather forward, one all-gather more back",
          "[parallel]") {
  const Scenario scenario = vtrain();
  for (bool checkpoint : {false, true}) {
    ParallelRun run = run_of(2, 3, 1, 2, 6, checkpoint);
    run.sequence_parallel = true;
    const ThreeStages stages = three_stages(scenario, run);
    const ParallelIterationCost& cost = stages.cost;
    const ChunkCost& middle = cost.chunks[1];
    REQUIRE(middle.ops.size() == 8);
    const double bytes = ThreeStages::layer_bytes;
    const double gather_s = ring_time_s(CollectiveKind::all_gather, bytes, 2, stages.tensor_link);
    const double scatter_s =
        ring_time_s(CollectiveKind::reduce_scatter, bytes, 2, stages.tensor_link);
    // Per attention or MLP: an all-gather before the column-parallel layer and a
    // reduce-scatter after the row-parallel one; backward their transposes and the all-gather
    // again for the weight's gradient (Megatron keeps 1/t of the input); a recompute repeats
    // the forward's two.
    CHECK(middle.forward_communication_s == Approx(8 * (gather_s + scatter_s)));
    CHECK(middle.backward_communication_s ==
          Approx(8 * ((checkpoint ? 2 : 1) * (gather_s + scatter_s) + gather_s)));
    // The first stage's embedding: a reduce-scatter forward, an all-gather back; the last
    // stage's head: an all-gather forward, a reduce-scatter and the all-gather back.
    ParallelRun plain = run;
    plain.sequence_parallel = false;
    const ParallelIterationCost without = three_stages(scenario, plain).cost;
    CHECK(cost.chunks[0].forward_communication_s - middle.forward_communication_s ==
          Approx(scatter_s));
    CHECK(cost.chunks[2].backward_communication_s - middle.backward_communication_s ==
          Approx(scatter_s + gather_s));
    CHECK(without.chunks[1].forward_communication_s <
          middle.forward_communication_s + 1e-12);  // an all-reduce is its two halves or less
  }
}

TEST_CASE("a blocking sync adds the ranks' arrival skew once per operator pass", "[parallel]") {
  Scenario scenario = vtrain();
  constexpr double sync_s = 1.5e-3;
  for (bool sequence_parallel : {false, true}) {
    for (bool checkpoint : {false, true}) {
      INFO("sequence parallel " << sequence_parallel << ", checkpoint " << checkpoint);
      ParallelRun run = run_of(2, 3, 1, 2, 6, checkpoint);
      run.sequence_parallel = sequence_parallel;
      scenario.cluster.gpu.blocking_sync_s = 0;
      const ParallelIterationCost without = three_stages(scenario, run).cost;
      scenario.cluster.gpu.blocking_sync_s = sync_s;
      const ParallelIterationCost with = three_stages(scenario, run).cost;
      // Four layers a stage, each an attention and an MLP: one skew each forward (the sum, or
      // the reduce-scatter, after its compute; sequence parallelism's all-gathers follow a
      // LayerNorm) and one each backward (two with a recompute); the embedding's forward sum,
      // the head's first cross-entropy sum and its backward sum one each.
      const int layer_passes = 8;
      const int recomputes = checkpoint ? layer_passes : 0;
      const std::vector<std::pair<int, int>> syncs{
          {layer_passes + 1, layer_passes + recomputes},
          {layer_passes, layer_passes + recomputes},
          {layer_passes + 1, layer_passes + recomputes + 1}};
      for (int c = 0; c < 3; ++c) {
        INFO("stage " << c);
        CHECK(with.chunks[c].forward_communication_s - without.chunks[c].forward_communication_s ==
              Approx(syncs[c].first * sync_s));
        CHECK(with.chunks[c].backward_communication_s -
                  without.chunks[c].backward_communication_s ==
              Approx(syncs[c].second * sync_s));
      }
    }
  }
  // Without tensor parallelism there is no sum to wait at.
  ParallelRun pipeline_only = run_of(1, 3, 2, 2, 6, false);
  scenario.cluster.gpu.blocking_sync_s = 0;
  const double without_s = three_stages(scenario, pipeline_only).cost.iteration_time_s;
  scenario.cluster.gpu.blocking_sync_s = sync_s;
  CHECK(three_stages(scenario, pipeline_only).cost.iteration_time_s == without_s);
}

TEST_CASE("a rank's activations per layer are Megatron's s b h (10 + 24/t) + 5 a s^2 b / t",
          "[parallel]") {
  const Scenario scenario = vtrain();  // mixed precision: 2-byte activations, dropout masks
  const GptSpec spec = spec_of(8, 2048, 16, 512);
  const double s = 512, h = 2048, a = 16;
  for (int t : {1, 2, 4, 8}) {
    const Cluster cluster = cluster_with_ranks(scenario, t);
    const ParallelIterationCost cost = parallel_iteration_cost(
        spec, scenario.training, cluster, scenario.cost, run_of(t, 1, 1, 1, 1, false), "test");
    const Operator& attention = cost.workload->op(1);
    const Operator& mlp = cost.workload->op(2);
    CAPTURE(t);
    CHECK(attention.activation_bytes_per_sample + mlp.activation_bytes_per_sample ==
          Approx(s * h * (10.0 + 24.0 / t) + 5.0 * a * s * s / t));
    CHECK(attention.parameter_count == Approx((4 * h * h + 3 * h) / t + 3 * h));
    CHECK(mlp.forward_flops_per_sample == Approx(16 * s * h * h / t));
  }
}

TEST_CASE("1F1B: stage r holds p - r micro-batches, the first stage's activations are p of them",
          "[parallel]") {
  const Scenario scenario = vtrain();
  const GptSpec spec = spec_of(8, 1024, 16, 1024);
  const Cluster cluster = cluster_with_ranks(scenario, 4);
  const ParallelIterationCost cost = parallel_iteration_cost(
      spec, scenario.training, cluster, scenario.cost, run_of(1, 4, 1, 1, 8, true), "test");
  for (int r = 0; r < 4; ++r) {
    CHECK(cost.stages[r].peak_in_flight == 4 - r);
    const ChunkCost& chunk = cost.chunks[r];
    CHECK(cost.stages[r].peak_memory_bytes ==
          Approx(cost.stages[r].model_state_bytes + (4 - r) * chunk.saved_activation_bytes +
                 chunk.largest_transient_bytes));
  }
  // Each chunk's layer count is its attention operators', and they cover the model once.
  int layers = 0;
  for (const ChunkCost& chunk : cost.chunks) {
    int attention = 0;
    for (int op : chunk.ops) attention += cost.workload->op(op).kind == OperatorKind::attention;
    CHECK(chunk.layers == attention);
    layers += chunk.layers;
  }
  CHECK(layers == spec.layers);
  // Parameters are conserved across stages (one tensor-parallel rank: the whole model).
  double parameters = 0;
  for (const StageCost& stage : cost.stages) parameters += stage.parameters;
  CHECK(parameters == Approx(cost.workload->parameter_count()));
}

TEST_CASE("a stage without the head peaks at an MLP backward's temporaries, the last at the loss's",
          "[parallel]") {
  const Scenario scenario = vtrain();  // mixed precision: 2-byte activations
  const GptSpec spec = spec_of(8, 1024, 16, 1024);
  const double b = 2, s = 1024, h = 1024, f = 4096, e = 2;
  for (int t : {1, 2}) {
    const Cluster cluster = cluster_with_ranks(scenario, 4 * t);
    const ParallelIterationCost cost = parallel_iteration_cost(
        spec, scenario.training, cluster, scenario.cost, run_of(t, 4, 1, 2, 8, false), "test");
    const Operator& mlp = cost.workload->op(2);
    const Operator& head = cost.workload->op(cost.workload->size() - 1);
    CAPTURE(t);
    // The gradients of the b s f / t inner activation and of the GeLU's input, and one weight
    // matrix's gradient (h x f / t) before it joins the accumulated one.
    const double mlp_backward_bytes =
        2.0 * b * s * f / t * e + h * f / t * mlp.gradient_bytes / mlp.parameter_count;
    for (int c = 1; c < 3; ++c)
      CHECK(cost.chunks[c].largest_transient_bytes == Approx(mlp_backward_bytes));
    CHECK(cost.chunks[3].largest_transient_bytes == Approx(b * head.workspace_bytes_per_sample));
    CHECK(b * head.workspace_bytes_per_sample > mlp_backward_bytes);
  }
}

TEST_CASE("the iteration is the pipeline, then the slowest stage's reduction, then the step",
          "[parallel]") {
  const Scenario scenario = vtrain();
  const GptSpec spec = spec_of(8, 1024, 16, 1024);
  const Cluster cluster = cluster_with_ranks(scenario, 8);
  SECTION("no pipeline: m forwards and backwards back to back") {
    const ParallelIterationCost cost = parallel_iteration_cost(
        spec, scenario.training, cluster, scenario.cost, run_of(2, 1, 4, 2, 3, true), "test");
    const ChunkCost& only = cost.chunks[0];
    CHECK(cost.pipeline_s == Approx(3 * (only.forward_s + only.backward_s)));
    CHECK(cost.iteration_time_s == Approx(cost.pipeline_s + cost.stages[0].gradient_reduce_s +
                                          cost.stages[0].optimizer_step_s));
    CHECK(cost.samples_per_iteration == 2 * 3 * 4);
  }
  SECTION("a pipeline: its makespan and transfers") {
    const ParallelIterationCost cost = parallel_iteration_cost(
        spec, scenario.training, cluster, scenario.cost, run_of(1, 4, 2, 1, 8, true), "test");
    CHECK(cost.transfer_s > 0);
    double slowest = 0;
    double step = 0;
    for (int r = 0; r < 4; ++r) {
      slowest = std::max(slowest, cost.timeline.finish_s[r] + cost.stages[r].gradient_reduce_s);
      step = std::max(step, cost.stages[r].optimizer_step_s);
    }
    CHECK(cost.iteration_time_s == Approx(slowest + step));
    // Unequal stages: the first holds the embedding, the last the head, so the last is slower.
    CHECK(cost.chunks[3].forward_s > cost.chunks[1].forward_s);
  }
}

TEST_CASE("a pass's data-parallel stream hides behind its compute, or shares its cores",
          "[parallel]") {
  // The CPU testbed: 2 ranks, each a compute and a communication thread, on 2 cores. z2
  // reduce-scatters every operator's gradients beside the backward.
  Scenario scenario = load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d.json");
  ParallelRun run = run_of(1, 1, 2, 2, 3, false);
  run.modes.assign(2 * scenario.gpt->layers + 2, Mode::z2);
  const auto cost_on = [&](const Cluster& cluster) {
    return parallel_iteration_cost(*scenario.gpt, scenario.training, cluster, scenario.cost, run,
                                   "test");
  };
  REQUIRE(scenario.cluster.host_cores);
  Cluster shared_cores = scenario.cluster;
  shared_cores.gpu.blocking_sync_s = 0.0;  // the ranks issue every collective together
  const ParallelIterationCost shared_cost = cost_on(shared_cores);
  const ChunkCost& shared = shared_cost.chunks.at(0);
  const double compute_s = shared.forward_compute_s + shared.backward_compute_s;
  const double stream_s = shared.forward_data_parallel_s + shared.backward_data_parallel_s;
  REQUIRE(stream_s > 0);
  REQUIRE(stream_s < compute_s);
  const double m = run.micro_batches;
  const double drain_s = shared_cost.stages.at(0).stream_drain_s;
  const auto passes_s = [m](const ChunkCost& chunk) {
    return m * (chunk.forward_s - chunk.forward_communication_s + chunk.backward_s -
                chunk.backward_communication_s);
  };
  // Four busy threads on two cores: each runs at half speed while both run, so the passes and
  // the stream's last reduction after them last the compute and the stream back to back.
  CHECK(passes_s(shared) + drain_s == Approx(m * (compute_s + stream_s)));
  CHECK(drain_s > 0);
  // Each collective starting up to the blocking sync after its issue (the other rank's): no
  // shorter, and at most that much longer per collective.
  REQUIRE(scenario.cluster.gpu.blocking_sync_s > 0);
  const ParallelIterationCost late_cost = cost_on(scenario.cluster);
  const double late_s = passes_s(late_cost.chunks.at(0)) + late_cost.stages.at(0).stream_drain_s;
  const double collectives = m * static_cast<double>(shared.backward_collectives.size());
  CHECK(late_s > m * (compute_s + stream_s));
  CHECK(late_s <= m * (compute_s + stream_s) + collectives * scenario.cluster.gpu.blocking_sync_s);
  // Ranks that do not share cores (GPUs): the compute is not slowed; the passes last their
  // compute and their waits for the previous reduction (one in flight).
  Cluster own_cores = scenario.cluster;
  own_cores.host_cores.reset();
  own_cores.gpu.overlap_slowdown = 1.0;
  const ChunkCost apart = cost_on(own_cores).chunks.at(0);
  CHECK(passes_s(apart) ==
        Approx(m * (compute_s + apart.forward_stream_wait_s + apart.backward_stream_wait_s)));
  CHECK(apart.forward_stream_wait_s == 0);  // z2 gathers once, before the first micro-batch
}

TEST_CASE("on shared cores a pipeline stage computes faster while its neighbour waits",
          "[parallel]") {
  // 4 CPU ranks on 2 cores, their laws timed with all 4 computing: tp 2 x pp 2 under 1F1B. In
  // the fill and drain one stage computes (2 ranks, a core each): twice as fast.
  Scenario scenario =
      load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d-4ranks.json");
  REQUIRE(scenario.cluster.host_cores);
  REQUIRE(scenario.cluster.host_cores->cores == 2);
  REQUIRE(scenario.cluster.gpus_per_node == 4);
  const ParallelRun run = run_of(2, 2, 1, 2, 4, false);
  const auto cost_on = [&](const Cluster& cluster) {
    return parallel_iteration_cost(*scenario.gpt, scenario.training, cluster, scenario.cost, run,
                                   "test");
  };
  const ParallelIterationCost shared = cost_on(scenario.cluster);
  CHECK(shared.work.rate_by_busy_stages == std::vector<double>{2.0, 1.0});
  PipelineWork all_busy = shared.work;
  all_busy.rate_by_busy_stages.clear();
  const PipelineTimeline unshared = run_pipeline(run.schedule, all_busy);
  CHECK(shared.pipeline_s < unshared.makespan_s);
  // Never faster than every pass at twice the speed.
  PipelineWork doubled = all_busy;
  for (double& s : doubled.forward_s) s /= 2;
  for (double& s : doubled.backward_s) s /= 2;
  for (double& s : doubled.transfer_s) s /= 2;
  CHECK(shared.pipeline_s > run_pipeline(run.schedule, doubled).makespan_s);
  // 2 ranks on 2 cores (pp 2): a waiting stage's core idles, no stage speeds up.
  const Scenario two = load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d.json");
  const ParallelIterationCost pp2 = parallel_iteration_cost(
      *two.gpt, two.training, two.cluster, two.cost, run_of(1, 2, 1, 2, 4, false), "test");
  CHECK(pp2.work.rate_by_busy_stages == std::vector<double>{1.0, 1.0});
  // GPUs compute on their own.
  Cluster own_cores = scenario.cluster;
  own_cores.host_cores.reset();
  CHECK(cost_on(own_cores).work.rate_by_busy_stages.empty());
}

TEST_CASE(
    "on shared cores a tensor group computes faster while the other groups wait at their sums",
    "[parallel]") {
  // 4 CPU ranks on 2 cores, tp 2 x dp 2: two tensor pairs, each waiting at its own sums. While
  // one pair waits the other has a core a rank (twice the laws' rate, timed with all 4 busy).
  Scenario scenario =
      load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d-4ranks.json");
  const Cluster& cluster = scenario.cluster;
  const double compute_s = 0.1;
  for (const double sums_s : {0.01, 0.1, 1.0}) {
    INFO("sums " << sums_s);
    const double rate = desynchronised_compute_rate(cluster, 2, 1, compute_s, sums_s);
    CHECK(rate > 1.0);
    CHECK(rate < 2.0);
    // Its fixed point: the other pair computes a fraction f of the time, f from the rate.
    const double f = compute_s / rate / (compute_s / rate + sums_s);
    CHECK(rate == Approx(f * 1.0 + (1 - f) * 2.0).epsilon(1e-9));
  }
  CHECK(desynchronised_compute_rate(cluster, 2, 1, compute_s, 0.01) <
        desynchronised_compute_rate(cluster, 2, 1, compute_s, 0.1));
  // No sums, one group, a pipeline (its own busy stages), or a core a rank: the laws' rate.
  CHECK(desynchronised_compute_rate(cluster, 2, 1, compute_s, 0.0) == 1.0);
  CHECK(desynchronised_compute_rate(cluster, 4, 1, compute_s, 0.1) == 1.0);
  CHECK(desynchronised_compute_rate(cluster, 2, 2, compute_s, 0.1) == 1.0);
  Cluster roomy = cluster;
  roomy.host_cores->cores = 4;
  CHECK(desynchronised_compute_rate(roomy, 2, 1, compute_s, 0.1) == 1.0);
  Cluster gpus = cluster;
  gpus.host_cores.reset();
  CHECK(desynchronised_compute_rate(gpus, 2, 1, compute_s, 0.1) == 1.0);
  // In the iteration: tp 2 x dp 2's passes are shorter than on GPUs by the compute's share.
  const ParallelRun run = run_of(2, 1, 2, 2, 1, false);
  const auto cost_on = [&](const Cluster& c) {
    return parallel_iteration_cost(*scenario.gpt, scenario.training, c, scenario.cost, run, "test");
  };
  Cluster gpus_alike = cluster;  // the same laws and collectives, no cores shared
  gpus_alike.host_cores.reset();
  const ParallelIterationCost shared = cost_on(cluster);
  const ParallelIterationCost own = cost_on(gpus_alike);
  const ChunkCost& chunk = shared.chunks.front();
  CHECK(chunk.forward_communication_s == Approx(own.chunks.front().forward_communication_s));
  CHECK(shared.pipeline_s < own.pipeline_s);
}

TEST_CASE("the node's data-parallel replicas wait for the slowest one's step", "[parallel]") {
  // The expected largest of g standard normals (tables: 0.5642, 0.8463, 1.0294, 1.4236).
  CHECK(expected_largest_normal(1) == 0.0);
  CHECK(expected_largest_normal(2) == Approx(1 / std::sqrt(std::acos(-1.0))).epsilon(1e-6));
  CHECK(expected_largest_normal(3) == Approx(0.8463).epsilon(1e-3));
  CHECK(expected_largest_normal(4) == Approx(1.0294).epsilon(1e-3));
  CHECK(expected_largest_normal(8) == Approx(1.4236).epsilon(1e-3));

  Scenario scenario =
      load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d-4ranks.json");
  Cluster cluster = scenario.cluster;
  REQUIRE(cluster.gpus_per_node == 4);
  REQUIRE(cluster.host_cores->cores == 2);
  cluster.host_cores->step_straggling = 1.2;
  // Four replicas of one rank: the calibrated figure itself; two: scaled by E[max of 2] /
  // E[max of 4]; one replica (tp 2 x pp 2) meets within the step: none.
  CHECK(replicas_straggling(cluster, 1, 1, 4) == Approx(1.2));
  CHECK(replicas_straggling(cluster, 2, 1, 2) ==
        Approx(1 + 0.2 * expected_largest_normal(2) / expected_largest_normal(4)));
  CHECK(replicas_straggling(cluster, 1, 2, 2) == Approx(replicas_straggling(cluster, 2, 1, 2)));
  CHECK(replicas_straggling(cluster, 2, 2, 1) == 1.0);
  Cluster roomy = cluster;
  roomy.host_cores->cores = 4;
  CHECK(replicas_straggling(roomy, 1, 1, 4) == 1.0);
  Cluster gpus = cluster;
  gpus.host_cores.reset();
  CHECK(replicas_straggling(gpus, 1, 1, 4) == 1.0);

  // In the iteration: dp 4's passes' compute stretches by the factor, its reduction does not.
  const ParallelRun dp4 = run_of(1, 1, 4, 2, 1, false);
  Cluster even = cluster;
  even.host_cores->step_straggling = 1.0;
  const auto cost_on = [&](const Cluster& c, const ParallelRun& run) {
    return parallel_iteration_cost(*scenario.gpt, scenario.training, c, scenario.cost, run, "test");
  };
  const ChunkCost straggled = cost_on(cluster, dp4).chunks.front();
  const ChunkCost alike = cost_on(even, dp4).chunks.front();
  CHECK(straggled.forward_s - straggled.forward_communication_s ==
        Approx(1.2 * (alike.forward_s - alike.forward_communication_s)));
  CHECK(straggled.backward_communication_s == Approx(alike.backward_communication_s));
  const ParallelRun tp2xpp2 = run_of(2, 2, 1, 2, 4, false);
  CHECK(cost_on(cluster, tp2xpp2).iteration_time_s ==
        Approx(cost_on(even, tp2xpp2).iteration_time_s));
}

TEST_CASE("a group smaller than a CPU cluster takes its own measured timings", "[parallel]") {
  // 4 CPU ranks: tensor and data-parallel pairs ring at the pairs' timings where the cluster
  // lists them (every pair at once, as `osdp calibrate` times them), the world at its own.
  Scenario scenario =
      load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d-4ranks.json");
  REQUIRE_FALSE(scenario.cluster.topology);
  REQUIRE(scenario.cluster.ranks == 4);
  Cluster plain = scenario.cluster;
  plain.timing_by_group_size.clear();
  const GroupTiming pair_timing = GroupTiming::uniform({2e-4, 5e-10});
  Cluster pairs = plain;
  pairs.timing_by_group_size[2] = pair_timing;
  Cluster pairs_as_world = plain;  // every group of these layouts is a pair
  pairs_as_world.world = pairs_as_world.intra_node = pairs_as_world.inter_node = pair_timing;
  const auto cost = [&](const Cluster& cluster, const ParallelRun& run) {
    return parallel_iteration_cost(*scenario.gpt, scenario.training, cluster, scenario.cost, run,
                                   "test");
  };
  const ParallelRun tp2xdp2 = run_of(2, 1, 2, 2, 1, false);
  CHECK(cost(pairs, tp2xdp2).iteration_time_s ==
        Approx(cost(pairs_as_world, tp2xdp2).iteration_time_s));
  CHECK(cost(pairs, tp2xdp2).iteration_time_s < cost(plain, tp2xdp2).iteration_time_s);
  const ParallelRun tp2xpp2 = run_of(2, 2, 1, 2, 4, false);
  for (std::size_t c = 0; c < 2; ++c) {
    CHECK(cost(pairs, tp2xpp2).chunks[c].forward_communication_s ==
          Approx(cost(pairs_as_world, tp2xpp2).chunks[c].forward_communication_s));
  }
  const ParallelRun pp2xdp2 = run_of(1, 2, 2, 2, 4, false);
  CHECK(cost(pairs, pp2xdp2).iteration_time_s < cost(plain, pp2xdp2).iteration_time_s);
  // The world's group (dp 4) keeps the world's timings.
  const ParallelRun dp4 = run_of(1, 1, 4, 2, 1, false);
  CHECK(cost(pairs, dp4).iteration_time_s == Approx(cost(plain, dp4).iteration_time_s));
}

TEST_CASE("a ZDP operator waits for its gathers operator by operator", "[parallel]") {
  // The 3D + OSDP layout of local-cpu-3d (dp 2, 2 micro-batches, the first two layers ZDP, the
  // rest z2) on ranks that do not share cores: the first ZDP operator's gather cannot hide
  // behind the embedding's short forward, however long the pass's compute.
  Scenario scenario = load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d.json");
  Cluster own_cores = scenario.cluster;
  own_cores.host_cores.reset();
  own_cores.gpu.overlap_slowdown = 1.0;
  ParallelRun run = run_of(1, 1, 2, 1, 2, false);
  run.modes.assign(2 * scenario.gpt->layers + 2, Mode::z2);
  run.modes[1] = run.modes[2] = run.modes[3] = run.modes[4] = Mode::zdp;
  const ChunkCost chunk = parallel_iteration_cost(*scenario.gpt, scenario.training, own_cores,
                                                  scenario.cost, run, "test")
                              .chunks.at(0);
  REQUIRE(chunk.forward_data_parallel_s < chunk.forward_compute_s);
  CHECK(chunk.forward_stream_wait_s > 0);
  CHECK(chunk.forward_s == Approx(chunk.forward_compute_s + chunk.forward_stream_wait_s));
}

TEST_CASE("a checkpointed ZDP layer gathers once for its recompute and its backward",
          "[parallel]") {
  // The runtime gathers a layer's parameters before its recompute and keeps them through its
  // backward (validate/parallel_gpt): checkpointing adds no data-parallel collective.
  Scenario scenario = load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/local-cpu-3d.json");
  const auto chunk_of = [&](bool checkpoint) {
    ParallelRun run = run_of(1, 1, 2, 1, 2, checkpoint);
    run.modes.assign(2 * scenario.gpt->layers + 2, Mode::zdp);
    return parallel_iteration_cost(*scenario.gpt, scenario.training, scenario.cluster,
                                   scenario.cost, run, "test")
        .chunks.at(0);
  };
  const ChunkCost plain = chunk_of(false);
  const ChunkCost checkpointed = chunk_of(true);
  const auto gathers = [](const std::vector<PassCollective>& collectives) {
    return std::count_if(collectives.begin(), collectives.end(), [](const PassCollective& c) {
      return c.kind == CollectiveKind::all_gather;
    });
  };
  // Every operator gathers forward and backward, and reduce-scatters once.
  const auto operators = static_cast<long>(2 * scenario.gpt->layers + 2);
  CHECK(gathers(plain.forward_collectives) == operators);
  CHECK(gathers(plain.backward_collectives) == operators);
  CHECK(gathers(checkpointed.backward_collectives) == operators);
  CHECK(checkpointed.backward_collectives.size() == plain.backward_collectives.size());
  CHECK(checkpointed.backward_data_parallel_s == Approx(plain.backward_data_parallel_s));
  // The recompute itself still costs compute.
  CHECK(checkpointed.backward_compute_s > plain.backward_compute_s);
}

TEST_CASE("layouts the model or the cluster cannot hold are input errors", "[parallel]") {
  const Scenario scenario = vtrain();
  const GptSpec spec = spec_of(8, 1024, 16, 1024);
  const Cluster cluster = cluster_with_ranks(scenario, 8);
  CHECK_THROWS_AS(parallel_iteration_cost(spec, scenario.training, cluster, scenario.cost,
                                          run_of(2, 2, 1, 1, 1, false), "test"),
                  InputError);  // 4 GPUs of 8
  CHECK_THROWS_AS(parallel_iteration_cost(spec_of(4, 1024, 16, 1024), scenario.training, cluster,
                                          scenario.cost, run_of(1, 8, 1, 1, 8, false), "test"),
                  InputError);  // 8 stages of 4 layers
  ParallelRun interleaved = run_of(1, 4, 2, 1, 6, false);
  interleaved.schedule = PipelineSchedule::interleaved;
  interleaved.chunks_per_stage = 2;
  CHECK_THROWS_AS(
      parallel_iteration_cost(spec, scenario.training, cluster, scenario.cost, interleaved, "test"),
      InputError);  // 6 micro-batches on 4 stages
}

}  // namespace
}  // namespace osdp
