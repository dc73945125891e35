// FSDP units in the runtime: a unit of consecutive operators shares one flat buffer, gathered
// once and reduced once, and training with it leaves the parameters of the single-process run.
#include <map>
#include <mutex>

#include "model/input_error.hpp"
#include "tests/validate/rank_threads.hpp"
#include "tests/validate/tiny_parity.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/reference_gpt.hpp"
#include "validate/sharded_gpt.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;
using namespace osdp::validate::testing;

namespace {

// One unit per block (fsdp_block): embedding | layer0 | layer1 | head.
const std::vector<int> per_block{1, 2, 2, 1};
// The embedding with the first block, the second block with the head (a size-based wrapping's
// shape: the first and last units hold the operators that take token ids and give the loss).
const std::vector<int> halves{3, 3};

Plan of_units(const std::vector<int>& sizes, OperatorChoice choice) {
  Plan plan;
  plan.batch_size = batch_per_rank;
  plan.unit_sizes = sizes;
  plan.choices.assign(sizes.size(), choice);
  return plan;
}

// Rank 0's collectives in one step after a warm-up, and the step's peak over both ranks.
struct StepFigures {
  std::map<CollectiveKind, int> collectives;
  std::int64_t peak_bytes = 0;
};

StepFigures one_step(const Plan& plan) {
  install_counting_allocator();
  StepFigures figures;
  std::mutex mutex;
  testing::run_rank_threads(2, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), {});
    const TokenBatch batch = make_token_batch(tiny, 4, 3, 0).rows(comm.rank() * 2, 2);
    model.train_step(batch);  // warm-up
    (void)comm.take_events();
    const StepMetrics metrics = model.train_step(batch);
    const auto events = comm.take_events();
    std::lock_guard lock(mutex);
    figures.peak_bytes = std::max(figures.peak_bytes, metrics.peak_memory_bytes);
    if (comm.rank() != 0) return;
    for (const auto& event : events) ++figures.collectives[event.kind];
  });
  return figures;
}

}  // namespace

TEST_CASE("units: parity with the single-process run, every mode", "[validate][units]") {
  for (const Mode mode : {Mode::dp, Mode::zdp, Mode::z2, Mode::z1}) {
    INFO("mode " << mode_name(mode));
    CHECK(parity_error(of_units(per_block, OperatorChoice::whole(mode)), 2) < 1e-5);
  }
  // The embedding and the head inside larger units: token ids in, the loss out.
  CHECK(parity_error(of_units(halves, OperatorChoice::whole(Mode::zdp)), 3) < 1e-5);
}

TEST_CASE("units: checkpointed units recompute all their members", "[validate][units]") {
  CHECK(parity_error(of_units(per_block, OperatorChoice::whole(Mode::zdp, Checkpoint::unfused)),
                     2) < 1e-5);
  CHECK(parity_error(of_units(halves, OperatorChoice::whole(Mode::zdp, Checkpoint::fused)), 2) <
        1e-5);
  Plan mixed = of_units(per_block, OperatorChoice::whole(Mode::zdp));
  mixed.choices[0] = OperatorChoice::whole(Mode::dp);
  mixed.choices[1] = OperatorChoice::whole(Mode::z2, Checkpoint::unfused);
  mixed.choices[2] = OperatorChoice::whole(Mode::z1, Checkpoint::fused);
  RuntimeOptions deep;
  deep.prefetch_depth = 2;
  deep.backward_prefetch = BackwardPrefetch::post;
  CHECK(parity_error(mixed, 2, deep) < 1e-5);
}

TEST_CASE("units: one gather and one reduction per unit, whatever its size", "[validate][units]") {
  using K = CollectiveKind;
  const int units = static_cast<int>(per_block.size());
  StepFigures zdp = one_step(of_units(per_block, OperatorChoice::whole(Mode::zdp)));
  CHECK(zdp.collectives[K::all_gather] == 2 * units);
  CHECK(zdp.collectives[K::reduce_scatter] == units);
  StepFigures dp = one_step(of_units(halves, OperatorChoice::whole(Mode::dp)));
  CHECK(dp.collectives[K::all_reduce] == 2);
  StepFigures z1 = one_step(of_units(halves, OperatorChoice::whole(Mode::z1)));
  CHECK(z1.collectives[K::reduce_scatter] == 2);
  CHECK(z1.collectives[K::all_gather] == 2);
}

TEST_CASE("units: a larger unit holds a larger gather buffer", "[validate][units]") {
  // Under ZDP the peak holds the unit in use and the one prefetched beside it: units of 3
  // operators hold more than units of 1 (the model states are the same shards).
  Plan per_operator;
  per_operator.batch_size = 2;
  per_operator.choices.assign(tiny.operators(), OperatorChoice::whole(Mode::zdp));
  const StepFigures small = one_step(per_operator);
  const StepFigures large = one_step(of_units(halves, OperatorChoice::whole(Mode::zdp)));
  CHECK(large.peak_bytes > small.peak_bytes);
}

TEST_CASE("units the runtime cannot run are input errors", "[validate][units]") {
  // Units that do not cover the 6 operators once each.
  CHECK_THROWS_AS(check_runnable(tiny, of_units({1, 2, 2}, OperatorChoice::whole(Mode::zdp)), 2, 1),
                  InputError);
  CHECK_THROWS_AS(check_runnable(tiny, of_units({3, 0, 3}, OperatorChoice::whole(Mode::zdp)), 2, 1),
                  InputError);
  // A unit of several operators is gathered whole, never split.
  CHECK_THROWS_AS(
      check_runnable(tiny, of_units(per_block, {Mode::zdp, 2, 2, Checkpoint::none}), 2, 1),
      InputError);
  // A choice per unit, not per operator.
  Plan miscounted = of_units(per_block, OperatorChoice::whole(Mode::zdp));
  miscounted.choices.resize(tiny.operators(), OperatorChoice::whole(Mode::zdp));
  CHECK_THROWS_AS(check_runnable(tiny, miscounted, 2, 1), InputError);
  // A unit of one operator may still be split.
  Plan split = of_units(per_block, OperatorChoice::whole(Mode::zdp));
  split.choices[3] = {Mode::zdp, 2, 2, Checkpoint::none};  // the head, along the hidden size
  CHECK_NOTHROW(check_runnable(tiny, split, 2, 1));
}
