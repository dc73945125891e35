// Parity: whatever the plan, 3 optimizer steps leave the parameters of a single-process run on
// the concatenated batch (within 1e-5 relative).
#include "model/input_error.hpp"
#include "tests/validate/tiny_parity.hpp"
#include "validate/reference_gpt.hpp"
#include "validate/sharded_gpt.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;

using testing::batch_per_rank;
using testing::data_seed;
using testing::parity_error;
using testing::steps;
using testing::tiny;

namespace {

Plan uniform(OperatorChoice choice) {
  Plan plan;
  plan.batch_size = batch_per_rank;
  plan.choices.assign(tiny.operators(), choice);
  return plan;
}

}  // namespace

TEST_CASE("the reference moves the parameters", "[validate][parity]") {
  const NamedTensors initial = initial_gpt_parameters(tiny, 5);
  // A parity tolerance of 1e-5 means something only if training changes the parameters a lot
  // more than that.
  CHECK(parity_difference(testing::reference_parameters(2), initial, tiny) > 1e-2);
}

TEST_CASE("parity: all-DP and all-ZDP", "[validate][parity]") {
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::dp)), 2) < 1e-5);
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::zdp)), 2) < 1e-5);
}

TEST_CASE("parity: the DP gradients in one bucket after the backward", "[validate][parity]") {
  RuntimeOptions bucket;
  bucket.dp_all_reduce_after_backward = true;
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::dp)), 2, bucket) < 1e-5);
  Plan mixed = uniform(OperatorChoice::whole(Mode::dp));
  mixed.choices[2] = OperatorChoice::whole(Mode::zdp);
  mixed.choices[3] = {Mode::zdp, 2, 1, Checkpoint::unfused};  // a DP slice beside a sharded one
  CHECK(parity_error(mixed, 3, bucket) < 1e-5);
}

TEST_CASE("parity: all-Z2 and ZDP on 3 ranks without prefetch", "[validate][parity]") {
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::z2)), 2) < 1e-5);
  RuntimeOptions no_prefetch;
  no_prefetch.prefetch_depth = 0;
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::zdp)), 3, no_prefetch) < 1e-5);
}

TEST_CASE("parity: mixed plan with checkpointing and slices", "[validate][parity]") {
  Plan plan = uniform(OperatorChoice::whole(Mode::dp));
  plan.choices[0] = OperatorChoice::whole(Mode::zdp);
  plan.choices[1] = {Mode::zdp, 2, 1, Checkpoint::unfused};  // attention: 2 head groups
  plan.choices[2] = {Mode::zdp, 4, 4, Checkpoint::fused};    // mlp: 4 slices
  plan.choices[3] = {Mode::z2, 4, 2, Checkpoint::unfused};
  plan.choices[4] = OperatorChoice::whole(Mode::dp, Checkpoint::unfused);
  plan.choices[5] = {Mode::zdp, 2, 2, Checkpoint::none};  // head split along hidden
  CHECK(parity_error(plan, 2) < 1e-5);
}

TEST_CASE("parity under every backward prefetch policy", "[validate][parity]") {
  Plan mixed = uniform(OperatorChoice::whole(Mode::zdp));
  mixed.choices[1] = {Mode::zdp, 2, 2, Checkpoint::unfused};
  mixed.choices[2] = {Mode::zdp, 2, 1, Checkpoint::fused};
  mixed.choices[3] = OperatorChoice::whole(Mode::dp);
  mixed.choices[4] = {Mode::z2, 2, 2, Checkpoint::unfused};
  for (const BackwardPrefetch policy :
       {BackwardPrefetch::pre, BackwardPrefetch::post, BackwardPrefetch::none}) {
    INFO("backward_prefetch " << backward_prefetch_name(policy));
    RuntimeOptions options;
    options.backward_prefetch = policy;
    CHECK(parity_error(mixed, 2, options) < 1e-5);
    options.prefetch_depth = 2;
    CHECK(parity_error(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::fused)), 2, options) <
          1e-5);
  }
}

TEST_CASE("parity: all-Z1 (ZeRO-1), and Z1 mixed with DP and slices", "[validate][parity]") {
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::z1)), 2) < 1e-5);
  Plan mixed = uniform(OperatorChoice::whole(Mode::z1, Checkpoint::unfused));
  mixed.choices[0] = OperatorChoice::whole(Mode::dp);
  mixed.choices[2] = {Mode::z1, 2, 1, Checkpoint::none};
  mixed.choices[3] = OperatorChoice::whole(Mode::zdp);
  CHECK(parity_error(mixed, 3) < 1e-5);
}

TEST_CASE("parity: checkpointed ZDP, unfused and fused", "[validate][parity]") {
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::unfused)), 2) < 1e-5);
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::fused)), 2) < 1e-5);
}

TEST_CASE("parity: HSDP on 2 nodes of 2 ranks", "[validate][parity]") {
  Plan plan = uniform(OperatorChoice::whole(Mode::hsdp));
  plan.choices[0] = OperatorChoice::whole(Mode::dp);
  RuntimeOptions options;
  options.gpus_per_node = 2;
  CHECK(parity_error(plan, 4, options) < 1e-5);
}

TEST_CASE("a plan the runtime cannot split is an input error", "[validate]") {
  Plan plan = uniform(OperatorChoice::whole(Mode::dp));
  plan.choices[1] = {Mode::zdp, 3, 1, Checkpoint::none};  // 4 heads do not split in 3
  REQUIRE_THROWS_AS(parity_error(plan, 1), InputError);
}

TEST_CASE("parity under SGD with momentum (checks the gradient scale)", "[validate][parity]") {
  RuntimeOptions sgd;
  sgd.adam.kind = AdamSettings::Kind::sgd;
  sgd.adam.learning_rate = 0.5;
  const NamedTensors initial = initial_gpt_parameters(tiny, 5);
  const ReferenceRun expected =
      train_reference_gpt(tiny, initial, 2 * batch_per_rank, data_seed, steps, sgd.adam);
  REQUIRE(parity_difference(expected.parameters, initial, tiny) > 1e-3);
  Plan plan = uniform(OperatorChoice::whole(Mode::zdp));
  plan.choices[2] = OperatorChoice::whole(Mode::dp, Checkpoint::unfused);
  plan.choices[3] = {Mode::z2, 2, 1, Checkpoint::fused};
  NamedTensors result;
  testing::run_rank_threads(2, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial, sgd);
    for (int step = 0; step < steps; ++step) {
      const TokenBatch global = make_token_batch(tiny, 2 * batch_per_rank, data_seed, step);
      model.train_step(global.rows(comm.rank() * batch_per_rank, batch_per_rank));
    }
    NamedTensors parameters = model.full_parameters();
    if (comm.rank() == 0) result = std::move(parameters);
  });
  // SGD has no degenerate direction: compare every parameter, key biases included.
  CHECK(max_relative_difference(result, expected.parameters) < 1e-5);
}

TEST_CASE(
    "parity: flash-style attention (scores recomputed in backward) trains the same "
    "parameters",
    "[validate][parity][flash]") {
  const AttentionKernel flash = AttentionKernel::flash;
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::dp)), 2, {}, flash) < 1e-5);
  CHECK(parity_error(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::fused)), 2, {}, flash) <
        1e-5);
  Plan sliced = uniform(OperatorChoice::whole(Mode::dp));
  sliced.choices[1] = {Mode::zdp, 2, 1, Checkpoint::unfused};  // attention by heads, 2 slices
  CHECK(parity_error(sliced, 2, {}, flash) < 1e-5);
}
