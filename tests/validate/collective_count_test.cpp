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

// The schedule of one training step (after a warm-up) on each of 2 ranks, and rank 0's
// collectives in the order the communication thread ran them.
struct StepSchedules {
  std::vector<std::vector<ScheduleEntry>> per_rank;
  std::vector<CollectiveKind> rank0_collectives;
};

StepSchedules schedules(const Plan& plan, RuntimeOptions options) {
  StepSchedules result;
  result.per_rank.resize(2);
  std::mutex mutex;
  testing::run_rank_threads(2, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), options);
    const TokenBatch batch = make_token_batch(tiny, 4, 3, 0).rows(comm.rank() * 2, 2);
    model.train_step(batch);  // warm-up
    (void)comm.take_events();
    StepMetrics metrics = model.train_step(batch);
    const auto events = comm.take_events();
    std::lock_guard lock(mutex);
    result.per_rank[comm.rank()] = std::move(metrics.schedule);
    if (comm.rank() != 0) return;
    for (const auto& event : events) result.rank0_collectives.push_back(event.kind);
  });
  return result;
}

std::string names(const std::vector<CollectiveKind>& kinds) {
  std::string text;
  for (const CollectiveKind kind : kinds) text += std::string(collective_name(kind)) + " ";
  return text;
}

// Position of the `occurrence`-th (0-based) entry equal to `entry`, or -1.
int position(const std::vector<ScheduleEntry>& schedule, ScheduleEntry entry, int occurrence) {
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    if (schedule[i] == entry && occurrence-- == 0) return static_cast<int>(i);
  }
  return -1;
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
  // ZeRO-1: no gather for compute, even recomputing; the updated shards after the step.
  counts = count_collectives(uniform(OperatorChoice::whole(Mode::z1, Checkpoint::unfused)));
  CHECK(counts[K::all_gather] == n);
  CHECK(counts[K::reduce_scatter] == n);
  CHECK(counts[K::all_reduce] == 0);
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

TEST_CASE("backward prefetch: pre, post and none issue the next gather where FSDP does",
          "[validate][collectives]") {
  using A = ScheduleEntry::Action;
  using K = CollectiveKind;
  const Plan plan = uniform(OperatorChoice::whole(Mode::zdp));
  const int n = tiny.operators();
  std::map<BackwardPrefetch, std::vector<ScheduleEntry>> by_policy;
  for (const BackwardPrefetch policy :
       {BackwardPrefetch::pre, BackwardPrefetch::post, BackwardPrefetch::none}) {
    INFO("backward_prefetch " << backward_prefetch_name(policy));
    RuntimeOptions options;
    options.backward_prefetch = policy;
    const StepSchedules run = schedules(plan, options);
    // Every rank issues the same collectives in the same order.
    const bool ranks_agree = run.per_rank[0] == run.per_rank[1];
    REQUIRE(ranks_agree);
    const auto& schedule = run.per_rank[0];
    for (int i = n - 1; i >= 1; --i) {
      INFO("operator " << i);
      // The second computation of each operator is its backward, the second gather of the
      // operator below it is that operator's backward gather.
      const int computed = position(schedule, {A::computed, i, 0}, 1);
      const int reduce = position(schedule, {A::reduce, i, 0}, 0);
      const int next_gather = position(schedule, {A::gather, i - 1, 0}, 1);
      REQUIRE(computed >= 0);
      REQUIRE(reduce > computed);
      REQUIRE(next_gather >= 0);
      switch (policy) {
        case BackwardPrefetch::pre:
          CHECK(next_gather < computed);
          break;
        case BackwardPrefetch::post:
          CHECK(next_gather > computed);
          CHECK(next_gather < reduce);
          break;
        case BackwardPrefetch::none:
          CHECK(next_gather > reduce);
          break;
      }
    }
    // The communication thread runs them in that order: behind the last forward gather, none
    // alternates gather and reduce-scatter; pre and post put the next gather before each
    // reduce-scatter.
    std::vector<K> backward(run.rank0_collectives.begin() + n, run.rank0_collectives.end());
    REQUIRE(backward.size() == static_cast<std::size_t>(2 * n));
    std::vector<K> expected;
    if (policy == BackwardPrefetch::none) {
      for (int i = 0; i < n; ++i) {
        expected.push_back(K::all_gather);
        expected.push_back(K::reduce_scatter);
      }
    } else {
      expected = {K::all_gather};
      for (int i = 0; i + 1 < n; ++i) {
        // push_back, not insert of a list: GCC 12 warns falsely (-Wstringop-overflow) on that.
        expected.push_back(K::all_gather);
        expected.push_back(K::reduce_scatter);
      }
      expected.push_back(K::reduce_scatter);
    }
    CHECK(names(backward) == names(expected));
    by_policy[policy] = schedule;
  }
  const bool pre_differs = by_policy[BackwardPrefetch::pre] != by_policy[BackwardPrefetch::post];
  const bool post_differs = by_policy[BackwardPrefetch::post] != by_policy[BackwardPrefetch::none];
  CHECK(pre_differs);
  CHECK(post_differs);
}

TEST_CASE("a fused recompute prefetches nothing while it holds its gather",
          "[validate][collectives]") {
  using A = ScheduleEntry::Action;
  const Plan plan = uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::fused));
  for (const BackwardPrefetch policy : {BackwardPrefetch::pre, BackwardPrefetch::post}) {
    INFO("backward_prefetch " << backward_prefetch_name(policy));
    RuntimeOptions options;
    options.backward_prefetch = policy;
    const auto schedule = schedules(plan, options).per_rank[0];
    for (int i = tiny.operators() - 1; i >= 1; --i) {
      INFO("operator " << i);
      // Forward, recompute, backward: the gather of the operator below comes with the backward
      // (pre: before its compute, post: after it), never with the recompute.
      const int recomputed = position(schedule, {A::computed, i, 0}, 1);
      const int back_computed = position(schedule, {A::computed, i, 0}, 2);
      const int next_gather = position(schedule, {A::gather, i - 1, 0}, 1);
      REQUIRE(recomputed >= 0);
      REQUIRE(back_computed > recomputed);
      CHECK(next_gather > recomputed);
      if (policy == BackwardPrefetch::pre) {
        CHECK(next_gather < back_computed);
      } else {
        CHECK(next_gather > back_computed);
      }
    }
  }
}

TEST_CASE("a step's waits for collectives add up to its exposed communication, inside the step",
          "[validate][collectives]") {
  // ZDP with an unfused recompute: gathers in forward, before the recompute and again before
  // backward, some of them waited for.
  const Plan plan = uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::unfused));
  std::vector<StepMetrics> steps(2);
  testing::run_rank_threads(2, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), {});
    const TokenBatch batch = make_token_batch(tiny, 4, 3, 0).rows(comm.rank() * 2, 2);
    model.train_step(batch);  // warm-up
    steps[comm.rank()] = model.train_step(batch);
  });
  for (const StepMetrics& step : steps) {
    double waited_s = 0;
    double previous_end_s = 0;
    for (const CollectiveWait& wait : step.waits) {
      CHECK(wait.duration_s > 0);
      CHECK(wait.start_s >= previous_end_s);  // one compute thread: in order, never overlapping
      // Named as the simulator names the collective: a ZDP plan gathers and reduce-scatters.
      const bool gather = wait.collective.rfind("all-gather ", 0) == 0;
      const bool reduction = wait.collective.rfind("reduce-scatter ", 0) == 0;
      CHECK((gather || reduction));
      const std::string unit = wait.collective.substr(wait.collective.find(' ') + 1);
      CHECK((unit == "embedding" || unit == "head" || unit.rfind("layer", 0) == 0));
      previous_end_s = wait.start_s + wait.duration_s;
      waited_s += wait.duration_s;
    }
    CHECK(previous_end_s <= step.iteration_time_s);
    CHECK(waited_s == Approx(step.exposed_communication_s).margin(1e-12));
  }
}
