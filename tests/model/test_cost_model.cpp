// The paper cost model reproduces DESIGN section 1's formulas exactly; the extended model's
// terms behave as documented.
#include <catch2/catch.hpp>

#include "model/cost_model.hpp"

using namespace osdp;

namespace {

struct Fixture {
  Workload workload;
  Cluster cluster;
  Training training;

  Fixture() : workload(Workload::chain("one", {make_operator()})) {
    cluster.ranks = 8;
    cluster.gpus_per_node = 8;
    cluster.world = GroupTiming::uniform({5e-6, 8.3e-11});
    cluster.intra_node = cluster.world;
    cluster.inter_node = cluster.world;
    cluster.gpu.memory_bandwidth_Bps = 6.72e11;
    training.memory_limit_bytes = 8.0 * (1 << 30);
  }

  static Operator make_operator() {
    Operator op;
    op.name = "op0";
    op.parameter_bytes = 50331648;
    op.gradient_bytes = 50331648;
    op.optimizer_bytes = 201326592 - 2 * 50331648;
    op.activation_bytes_per_sample = 12582912;
    op.input_activation_bytes_per_sample = 1048576;
    op.output_bytes_per_sample = 1048576;
    op.extra_bytes = 4096;
    op.compute_s_per_sample = 0.0021;
    return op;
  }
  CostModel model(CostModelKind kind) const {
    return CostModel(workload, cluster, training, {kind, 2});
  }
};

}  // namespace

TEST_CASE("paper model: DP and ZDP formulas", "[model][cost]") {
  const Fixture f;
  const CostModel model = f.model(CostModelKind::paper);
  const double n = 8, alpha = 5e-6, beta = 8.3e-11, s = 50331648, g = 0.0021;
  for (int b : {1, 3, 16}) {
    const auto dp = model.option_cost(0, OperatorChoice::whole(Mode::dp));
    const auto zdp = model.option_cost(0, OperatorChoice::whole(Mode::zdp));
    CHECK(dp.time_s.at(b) == Approx(2 * (n - 1) * (alpha + s / n * beta) + b * g).epsilon(1e-12));
    CHECK(zdp.time_s.at(b) == Approx(3 * (n - 1) * (alpha + s / n * beta) + b * g).epsilon(1e-12));
    CHECK(dp.persistent_bytes.at(b) == Approx(201326592 + b * 12582912.0 + 4096));
    CHECK(zdp.persistent_bytes.at(b) == Approx(201326592 / n + b * 12582912.0 + 4096));
    CHECK(dp.transient_bytes.at(b) == 0);
    CHECK(zdp.transient_bytes.at(b) == 0);
  }
}

TEST_CASE("extended model: gather buffers shrink with slices", "[model][cost]") {
  const Fixture f;
  const CostModel model = f.model(CostModelKind::extended);
  const auto whole = model.option_cost(0, {Mode::zdp, 1, 1, Checkpoint::none});
  const auto sliced = model.option_cost(0, {Mode::zdp, 4, 4, Checkpoint::none});
  // A gathered slice of S/k bytes plus the slice's full gradient; the slice is also what may be
  // in flight beside another operator.
  CHECK(whole.transient_bytes.fixed == Approx(50331648.0 + 50331648.0));
  CHECK(sliced.transient_bytes.fixed == Approx((50331648.0 + 50331648.0) / 4));
  CHECK(sliced.gather_buffer_bytes == Approx(50331648.0 / 4));
  // The plan's peak adds one more largest buffer for the unit in flight.
  const PlanCost plan = model.plan_cost({1, {{Mode::zdp, 4, 4, Checkpoint::none}}, 0, {}});
  CHECK(plan.peak.prefetch_bytes == Approx(50331648.0 / 4));
  CHECK(plan.peak_memory_bytes ==
        Approx(sliced.persistent_bytes.at(1) + sliced.transient_bytes.at(1) + 50331648.0 / 4));
  CHECK(sliced.slicing_overhead_s > 0);
  // With prefetch, the slices' own compute hides their later gathers; without, slicing is not
  // free: more latency and the per-slice overhead.
  CHECK(sliced.time_s.at(1) < whole.time_s.at(1));
  CostSettings serial{CostModelKind::extended, 2};
  serial.overlap.forward_prefetch = false;
  serial.overlap.backward_prefetch = BackwardPrefetch::none;
  const CostModel unprefetched(f.workload, f.cluster, f.training, serial);
  CHECK(unprefetched.option_cost(0, {Mode::zdp, 4, 4, Checkpoint::none}).time_s.at(1) >
        unprefetched.option_cost(0, {Mode::zdp, 1, 1, Checkpoint::none}).time_s.at(1));
}

TEST_CASE("extended model: checkpointing trades memory for recompute", "[model][cost]") {
  const Fixture f;
  const CostModel model = f.model(CostModelKind::extended);
  const auto plain = model.option_cost(0, {Mode::zdp, 1, 1, Checkpoint::none});
  const auto unfused = model.option_cost(0, {Mode::zdp, 1, 1, Checkpoint::unfused});
  const auto fused = model.option_cost(0, {Mode::zdp, 1, 1, Checkpoint::fused});
  CHECK(unfused.persistent_bytes.per_sample == 1048576);
  CHECK(unfused.compute_s.per_sample == Approx(0.0021 + 0.0021 / 3));
  // Unfused pays one more all-gather than fused; fused communicates as much as no checkpoint.
  const double gather = 7 * (5e-6 + 50331648.0 / 8 * 8.3e-11);
  CHECK(unfused.communication_s - fused.communication_s == Approx(gather));
  CHECK(fused.communication_s == Approx(plain.communication_s));
}

TEST_CASE("Z2 keeps the gathered parameters beside the sharded states", "[model][cost]") {
  const Fixture f;
  const CostModel model = f.model(CostModelKind::paper);
  const auto z2 = model.option_cost(0, OperatorChoice::whole(Mode::z2));
  CHECK(model.model_state_bytes(0, OperatorChoice::whole(Mode::z2)) ==
        Approx(50331648 + 201326592 / 8.0));
  CHECK(z2.communication_s == Approx(2 * 7 * (5e-6 + 50331648.0 / 8 * 8.3e-11)));
}

TEST_CASE("split operator: j of k slices sharded", "[model][cost]") {
  const Fixture f;
  const CostModel model = f.model(CostModelKind::paper);
  const double states = 201326592;
  const double half = model.model_state_bytes(0, {Mode::zdp, 4, 2, Checkpoint::none});
  CHECK(half == Approx(states / 2 + states / 2 / 8));
  CHECK_FALSE(model.valid(0, {Mode::dp, 4, 2, Checkpoint::none}));
  CHECK_FALSE(model.valid(0, {Mode::hsdp, 1, 1, Checkpoint::none}));  // one node
}

TEST_CASE("calibrated compute laws: a fixed part, a rate and a slice cost per operator kind",
          "[model][cost]") {
  Operator mlp = Fixture::make_operator();
  mlp.name = "mlp";
  mlp.kind = OperatorKind::mlp;
  mlp.compute_s_per_sample.reset();
  mlp.forward_flops_per_sample = 3e9;
  mlp.backward_flops_per_sample = 6e9;
  Operator attention = mlp;
  attention.name = "attention";
  attention.kind = OperatorKind::attention;
  Operator embedding = mlp;
  embedding.name = "embedding";
  embedding.kind = OperatorKind::embedding;
  embedding.forward_flops_per_sample = embedding.backward_flops_per_sample = 0;
  Fixture f;
  f.workload = Workload::chain("three", {embedding, attention, mlp});
  const double rate = 1e12;
  f.cluster.gpu.compute_flops_per_s = rate;
  f.cluster.gpu.operator_compute["mlp"] = {{1e-3, 2 * rate, 5e-5}, {2e-3, std::nullopt, 7e-5}};
  f.cluster.gpu.operator_compute["embedding"] = {{1e-4, std::nullopt, std::nullopt},
                                                 {3e-4, std::nullopt, std::nullopt}};
  const CostModel model = f.model(CostModelKind::extended);

  // The kind's law where there is one (without a rate: the GPU's), FLOPs / rate otherwise.
  CHECK(model.forward_compute_s(2).fixed == 1e-3);
  CHECK(model.forward_compute_s(2).per_sample == Approx(3e9 / (2 * rate)));
  CHECK(model.backward_compute_s(2).fixed == 2e-3);
  CHECK(model.backward_compute_s(2).per_sample == Approx(6e9 / rate));
  CHECK(model.forward_compute_s(1).fixed == 0);
  CHECK(model.forward_compute_s(1).per_sample == Approx(3e9 / rate));
  CHECK(model.backward_compute_s(0).fixed == 3e-4);
  CHECK(model.backward_compute_s(0).per_sample == 0);
  CHECK(model.compute_s_per_sample(2) == Approx(3e9 / (2 * rate) + 6e9 / rate));
  CHECK(model.calibrated_extra_slice_s(2, true) == 7e-5);
  CHECK_FALSE(model.calibrated_extra_slice_s(1, false));

  // The slices share the fixed part; each slice after the first costs the measured extra, and
  // a checkpointed operator runs its forward (and its slices' extras) twice.
  OperatorChoice choice = OperatorChoice::whole(Mode::zdp);
  choice.slices = choice.sharded_slices = 4;
  choice.checkpoint = Checkpoint::unfused;
  const OptionCost cost = model.option_cost(2, choice);
  CHECK(cost.compute_s.fixed == Approx(2 * 1e-3 + 2e-3));
  CHECK(cost.compute_s.per_sample == Approx(2 * 3e9 / (2 * rate) + 6e9 / rate));
  // The measured extras, and the kernel launches of the 3 extra slices (forward, recompute,
  // two backward each).
  const double launch_s = f.cluster.gpu.kernel_launch_s;
  CHECK(cost.slicing_overhead_s == Approx(3 * (2 * 5e-5 + 7e-5) + 3 * 4 * launch_s));
  CHECK(cost.time_s.serial_s.per_sample + cost.time_s.phases[0].compute_s.per_sample > 0);
  // DESIGN section 1's paper model stays b x gamma_i.
  CHECK(f.model(CostModelKind::paper).option_cost(2, choice).compute_s.fixed == 0);
}

TEST_CASE("the optimizer step uses the calibrated update bandwidth when there is one",
          "[model][cost]") {
  Fixture f;
  const OperatorChoice dp = OperatorChoice::whole(Mode::dp);
  const double states = f.workload.op(0).model_state_bytes();
  CHECK(f.model(CostModelKind::extended).optimizer_step_s(0, dp) == Approx(2 * states / 6.72e11));
  f.cluster.gpu.optimizer_bandwidth_Bps = 1e11;
  CHECK(f.model(CostModelKind::extended).optimizer_step_s(0, dp) == Approx(2 * states / 1e11));
  CHECK(f.model(CostModelKind::paper).optimizer_step_s(0, dp) == 0);
  // A sharded rank updates its shard only; Z2's gathered copy is not an optimizer state.
  const CostModel extended = f.model(CostModelKind::extended);
  const double shard = extended.optimizer_step_s(0, OperatorChoice::whole(Mode::zdp));
  CHECK(shard == Approx(2 * states / 8 / 1e11));
  CHECK(extended.optimizer_step_s(0, OperatorChoice::whole(Mode::z2)) == Approx(shard));
  OperatorChoice half{Mode::zdp, 2, 1};
  CHECK(extended.optimizer_step_s(0, half) == Approx(2 * (states / 2 + states / 2 / 8) / 1e11));
}

TEST_CASE("the straggler slowdown scales the extended model's compute, not the paper's",
          "[model][cost]") {
  Fixture f;
  const OperatorChoice zdp = OperatorChoice::whole(Mode::zdp);
  const OptionCost before = f.model(CostModelKind::extended).option_cost(0, zdp);
  const double update_before = f.model(CostModelKind::extended).optimizer_step_s(0, zdp);
  f.cluster.gpu.straggler_slowdown = 1.25;
  const CostModel extended = f.model(CostModelKind::extended);
  const OptionCost after = extended.option_cost(0, zdp);
  CHECK(after.compute_s.per_sample == Approx(1.25 * before.compute_s.per_sample));
  CHECK(after.communication_s == Approx(before.communication_s));
  CHECK(extended.optimizer_step_s(0, zdp) == Approx(1.25 * update_before));
  CHECK(f.model(CostModelKind::paper).option_cost(0, zdp).compute_s.per_sample == Approx(0.0021));
}

TEST_CASE("ZeRO-1: whole parameters and gradients, sharded optimizer states, DP's volume",
          "[model][cost]") {
  const Fixture f;
  const CostModel model = f.model(CostModelKind::extended);
  const double n = 8, p = 50331648, g = 50331648, o = 201326592 - 2 * 50331648;
  const OperatorChoice z1 = OperatorChoice::whole(Mode::z1);
  CHECK(model.model_state_bytes(0, z1) == Approx(p + g + o / n));
  const auto dp = model.option_cost(0, OperatorChoice::whole(Mode::dp));
  const auto cost = model.option_cost(0, z1);
  // A reduce-scatter and an all-gather are the two halves of DP's ring all-reduce.
  CHECK(cost.communication_s == Approx(dp.communication_s).epsilon(1e-12));
  // Nothing gathered for compute, no full gradient beside a shard.
  CHECK(cost.gather_buffer_bytes == 0);
  CHECK(cost.transient_bytes.fixed == 0);
  // The update covers this rank's 1/N of the states.
  CHECK(model.optimizer_step_s(0, z1) ==
        Approx(model.optimizer_step_s(0, OperatorChoice::whole(Mode::dp)) / n));
  // Checkpointing adds no gather: ZeRO-1 holds the parameters.
  CHECK(
      model.option_cost(0, OperatorChoice::whole(Mode::z1, Checkpoint::unfused)).communication_s ==
      Approx(cost.communication_s).epsilon(1e-12));
}

TEST_CASE("an overlapped phase lasts its communication or its slowed compute, whichever is longer",
          "[model][cost][overlap]") {
  // Compute-bound: 10 ms of compute beside a 4 ms gather at slowdown 1.25 runs 4 ms at 80 %
  // (3.2 ms of work), then 6.8 ms alone: 10.8 ms = compute + gather x (1 - 1/1.25).
  const OverlappedPhase compute_bound{{0.0, 1e-3}, 4e-3, 1.25};
  CHECK(compute_bound.at(10) == Approx(10.8e-3));
  CHECK(compute_bound.exposed_s(10) == 0.0);
  // Communication-bound: 2 ms of compute is done (slowed to 2.5 ms) before the 4 ms gather.
  CHECK(compute_bound.at(2) == Approx(4e-3));
  CHECK(compute_bound.exposed_s(2) == Approx(1.5e-3));
  CHECK(compute_bound.break_even_batch() == Approx(3.2));

  OptionTime a;
  a.serial_s = {1e-3, 0.0};
  a.add_phase(compute_bound);
  OptionTime b = a;
  b.serial_s.fixed += 1e-6;
  CHECK(no_slower(a, b));
  CHECK_FALSE(no_slower(b, a));
  // Faster at small b (less communication), slower at large b (more compute): neither wins.
  OptionTime c;
  c.add_phase({{0.0, 1.2e-3}, 1e-3, 1.25});
  CHECK_FALSE(no_slower(a, c));
  CHECK_FALSE(no_slower(c, a));
}

TEST_CASE(
    "a chain of FSDP operators: compute plus the first gather, or communication plus the "
    "last compute",
    "[model][cost][overlap]") {
  // Four identical operators, one gather per phase each (forward, backward) and a
  // reduce-scatter after backward;
  // cost, no launch gaps, no slowdown; the optimizer step (serial) is left out.
  Fixture f;
  Operator op = Fixture::make_operator();
  op.input_activation_bytes_per_sample.reset();
  op.compute_s_per_sample = 3e-3;
  op.forward_compute_s_per_sample = 1e-3;  // backward 2 ms per sample
  f.workload = Workload::chain("four", {op, op, op, op});
  f.cluster.gpu.kernel_launch_s = 0.0;
  f.cluster.gpu.memory_bandwidth_Bps.reset();
  f.cluster.gpu.overlap_slowdown = 1.0;
  const CostModel model = f.model(CostModelKind::extended);
  const OperatorChoice zdp = OperatorChoice::whole(Mode::zdp);
  const double gather_s = f.cluster.world.time_s(CollectiveKind::all_gather, op.parameter_bytes, 8);
  const double reduce_s =
      f.cluster.world.time_s(CollectiveKind::reduce_scatter, op.parameter_bytes, 8);
  const Plan plan_of{0, std::vector<OperatorChoice>(4, zdp), 0, {}};
  auto iteration_s = [&](int batch) {
    Plan plan = plan_of;
    plan.batch_size = batch;
    return model.plan_cost(plan).iteration_time_s - 4 * model.optimizer_step_s(0, zdp);
  };
  // Compute-bound (compute per phase far above gather + reduce-scatter): every compute, plus
  // the first gather of forward, the first of backward, and the last reduce-scatter.
  const int big = 1000;
  REQUIRE(big * 1e-3 > gather_s + reduce_s);
  CHECK(iteration_s(big) == Approx(4 * big * 3e-3 + 2 * gather_s + reduce_s));
  // Communication-bound (batch 0: no compute): the lanes' work, all of it.
  CHECK(iteration_s(0) == Approx(4 * 2 * gather_s + 4 * reduce_s));
  // Nothing overlaps in the paper model.
  CHECK(f.model(CostModelKind::paper).plan_cost(plan_of).iteration_time_s ==
        Approx(4 * (2 * gather_s + reduce_s)));
}
