// Each mode issues the collectives DESIGN section 1 gives it, in one training step:
// DP one all-reduce; ZDP 2 all-gathers + 1 reduce-scatter; checkpoint(FSDP(op)) 3 + 1;
// FSDP(checkpoint(op)) 2 + 1; Z2 1 + 1; a split operator's slices each in their own mode.
#include <map>
#include <mutex>

#include "tests/validate/rank_threads.hpp"
#include "validate/sharded_gpt.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;

namespace {

const GptShape tiny{2, 64, 4, 16, 128};

std::map<CollectiveKind, int> count_collectives(const Plan& plan) {
  std::map<CollectiveKind, int> counts;
  std::mutex mutex;
  testing::run_rank_threads(2, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), {});
    const TokenBatch batch = make_token_batch(tiny, 4, 3, 0).rows(comm.rank() * 2, 2);
    model.train_step(batch);  // warm-up
    (void)comm.take_events();
    model.train_step(batch);
    const auto events = comm.take_events();
    std::lock_guard lock(mutex);
    if (comm.rank() != 0) return;
    for (const auto& event : events) ++counts[event.kind];
  });
  return counts;
}

Plan uniform(OperatorChoice choice) {
  Plan plan;
  plan.batch_size = 2;
  plan.choices.assign(tiny.operators(), choice);
  return plan;
}

}  // namespace

TEST_CASE("collectives per mode and checkpointing", "[validate][collectives]") {
  const int n = tiny.operators();  // 6
  using K = CollectiveKind;
  auto counts = count_collectives(uniform(OperatorChoice::whole(Mode::dp)));
  CHECK(counts[K::all_reduce] == n);
  CHECK(counts[K::all_gather] == 0);
  counts = count_collectives(uniform(OperatorChoice::whole(Mode::zdp)));
  CHECK(counts[K::all_gather] == 2 * n);
  CHECK(counts[K::reduce_scatter] == n);
  CHECK(counts[K::all_reduce] == 0);
  counts = count_collectives(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::unfused)));
  CHECK(counts[K::all_gather] == 3 * n);
  CHECK(counts[K::reduce_scatter] == n);
  counts = count_collectives(uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::fused)));
  CHECK(counts[K::all_gather] == 2 * n);
  counts = count_collectives(uniform(OperatorChoice::whole(Mode::z2, Checkpoint::unfused)));
  CHECK(counts[K::all_gather] == n);
  CHECK(counts[K::reduce_scatter] == n);
}

TEST_CASE("a split operator gathers and reduces slice by slice", "[validate][collectives]") {
  using K = CollectiveKind;
  // 4 slices, 3 of them ZDP: 3 x 2 gathers and 3 reduce-scatters, one all-reduce for the DP one.
  Plan plan = uniform(OperatorChoice::whole(Mode::dp));
  plan.choices[2] = {Mode::zdp, 4, 3, Checkpoint::none};
  auto counts = count_collectives(plan);
  CHECK(counts[K::all_gather] == 6);
  CHECK(counts[K::reduce_scatter] == 3);
  CHECK(counts[K::all_reduce] == tiny.operators());
}
