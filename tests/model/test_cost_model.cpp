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
  const PlanCost plan = model.plan_cost({1, {{Mode::zdp, 4, 4, Checkpoint::none}}});
  CHECK(plan.peak.prefetch_bytes == Approx(50331648.0 / 4));
  CHECK(plan.peak_memory_bytes ==
        Approx(sliced.persistent_bytes.at(1) + sliced.transient_bytes.at(1) + 50331648.0 / 4));
  // Slicing is not free: more latency and the per-slice overhead.
  CHECK(sliced.time_s.at(1) > whole.time_s.at(1));
  CHECK(sliced.slicing_overhead_s > 0);
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
  CHECK(cost.slicing_overhead_s == Approx(3 * (2 * 5e-5 + 7e-5)));
  CHECK(cost.time_s.per_sample == Approx(cost.compute_s.per_sample));
  const OperatorChoice whole = OperatorChoice::whole(Mode::zdp);
  const OptionCost whole_cost = model.option_cost(2, whole);
  CHECK(whole_cost.time_s.fixed - whole_cost.communication_s - model.optimizer_step_s(2, whole) ==
        Approx(3e-3));
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
  CHECK(model.option_cost(0, OperatorChoice::whole(Mode::z1, Checkpoint::unfused)).communication_s ==
        Approx(cost.communication_s).epsilon(1e-12));
}
