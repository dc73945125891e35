// Gradient accumulation in the runtime: m = 3 micro-batches of b = 2 per optimizer step leave
// the parameters of one batch of 6 (the same plan, and the single-process reference on the
// concatenated batch), after one and after two steps, for every mode and a mixed plan; the
// collectives of a step are those model/mode's table runs every micro-batch (m times) or once;
// memory is one micro-batch's activations over the states the plan keeps anyway.
#include <map>
#include <mutex>

#include "model/mode.hpp"
#include "tests/validate/rank_threads.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/reference_gpt.hpp"
#include "validate/sharded_gpt.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;

namespace {

const GptShape tiny{2, 64, 4, 16, 128};
constexpr int micro_batches = 3;
constexpr int micro_batch = 2;
constexpr int steps = 2;
constexpr std::uint64_t data_seed = 17;

Plan uniform(OperatorChoice choice, int batch_size) {
  Plan plan;
  plan.batch_size = batch_size;
  plan.choices.assign(tiny.operators(), choice);
  return plan;
}

struct Run {
  std::vector<NamedTensors> parameters;            // rank 0's, after each step
  std::map<CollectiveKind, int> last_step_counts;  // rank 0's collectives in the last step
};

// `steps` steps of `plan` on `world` thread ranks, `m` micro-batches of plan.batch_size each;
// every rank trains on its m x b consecutive rows of the step's global batch.
Run train(Plan plan, int world, int m, RuntimeOptions options = {}) {
  options.accumulation_steps = m;
  const int rows = plan.batch_size * m;
  Run run;
  std::mutex mutex;
  testing::run_rank_threads(world, [&](Communicator& comm) {
    ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), options);
    std::vector<NamedTensors> after_steps;
    std::vector<CollectiveEvent> events;
    for (int step = 0; step < steps; ++step) {
      const TokenBatch global = make_token_batch(tiny, world * rows, data_seed, step);
      (void)comm.take_events();
      model.train_step(global.rows(comm.rank() * rows, rows));
      events = comm.take_events();
      after_steps.push_back(model.full_parameters());  // a collective, after the step's events
    }
    std::lock_guard lock(mutex);
    if (comm.rank() != 0) return;
    run.parameters = std::move(after_steps);
    for (const auto& event : events) ++run.last_step_counts[event.kind];
  });
  return run;
}

// m micro-batches of b against one batch of m x b with the same plan, after every step.
double accumulation_error(const Plan& plan, int world, RuntimeOptions options = {}) {
  Plan whole = plan;
  whole.batch_size = plan.batch_size * micro_batches;
  const Run accumulated = train(plan, world, micro_batches, options);
  const Run one_batch = train(whole, world, 1, options);
  double error = 0;
  for (int step = 0; step < steps; ++step) {
    error = std::max(
        error, parity_difference(accumulated.parameters[step], one_batch.parameters[step], tiny));
  }
  return error;
}

Plan mixed_plan() {
  Plan plan = uniform(OperatorChoice::whole(Mode::dp), micro_batch);
  plan.choices[0] = OperatorChoice::whole(Mode::zdp);
  plan.choices[1] = {Mode::zdp, 2, 1, Checkpoint::unfused};  // attention: 2 head groups
  plan.choices[2] = {Mode::z2, 4, 2, Checkpoint::fused};     // mlp: 4 slices, 2 of them Z2
  plan.choices[3] = {Mode::z1, 2, 1, Checkpoint::none};
  plan.choices[4] = OperatorChoice::whole(Mode::dp, Checkpoint::unfused);
  plan.choices[5] = {Mode::zdp, 2, 2, Checkpoint::fused};  // head split along hidden
  return plan;
}

// A step's collectives as model/mode's table has them: each collective a slice's mode runs
// (for its checkpointing), m times when it runs every micro-batch, once otherwise; the DP
// slices of an operator share one reduction.
std::map<CollectiveKind, int> table_counts(const Plan& plan, int m) {
  std::map<CollectiveKind, int> counts;
  auto add = [&](Mode mode, Checkpoint checkpoint, int times) {
    const ModeDescription& description = describe_mode(mode);
    for (const ModeCollective& collective : description.collectives) {
      if (!collective_runs(collective, checkpoint)) continue;
      counts[collective.kind] += times * (runs_every_micro_batch(description, collective) ? m : 1);
    }
  };
  for (const OperatorChoice& choice : plan.choices) {
    add(choice.mode, choice.checkpoint, choice.sharded_slices);
    if (choice.sharded_slices < choice.slices) add(Mode::dp, choice.checkpoint, 1);
  }
  return counts;
}

}  // namespace

TEST_CASE("accumulation: 3 micro-batches of 2 equal one batch of 6, every mode",
          "[validate][accumulation][parity]") {
  for (const Mode mode : {Mode::dp, Mode::zdp, Mode::z2, Mode::z1}) {
    INFO("mode " << mode_name(mode));
    CHECK(accumulation_error(uniform(OperatorChoice::whole(mode), micro_batch), 2) < 1e-5);
  }
}

TEST_CASE("accumulation: a mixed plan with slices and checkpointing", "[validate][accumulation]") {
  CHECK(accumulation_error(mixed_plan(), 2) < 1e-5);
  // Checkpointed ZDP, unfused, without forward prefetch and with the post backward policy.
  RuntimeOptions options;
  options.prefetch_depth = 0;
  options.backward_prefetch = BackwardPrefetch::post;
  CHECK(accumulation_error(
            uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::unfused), micro_batch), 2,
            options) < 1e-5);
}

TEST_CASE("accumulation: HSDP on 2 nodes of 2 ranks", "[validate][accumulation]") {
  Plan plan = uniform(OperatorChoice::whole(Mode::hsdp), micro_batch);
  plan.choices[0] = OperatorChoice::whole(Mode::dp);
  RuntimeOptions options;
  options.gpus_per_node = 2;
  CHECK(accumulation_error(plan, 4, options) < 1e-5);
}

TEST_CASE("accumulation matches the single-process reference, gradient scale included",
          "[validate][accumulation]") {
  // SGD is not invariant to the gradients' scale, as Adam is: the loss's 1/m shows here.
  RuntimeOptions sgd;
  sgd.adam.kind = AdamSettings::Kind::sgd;
  sgd.adam.learning_rate = 0.5;
  const int global = 2 * micro_batches * micro_batch;
  const NamedTensors initial = initial_gpt_parameters(tiny, 5);
  const ReferenceRun expected =
      train_reference_gpt(tiny, initial, global, data_seed, steps, sgd.adam);
  REQUIRE(parity_difference(expected.parameters, initial, tiny) > 1e-3);
  const Run run = train(mixed_plan(), 2, micro_batches, sgd);
  CHECK(max_relative_difference(run.parameters.back(), expected.parameters) < 1e-5);
  // Under Adam too (the key biases left out, as in parity_test).
  const ReferenceRun adam = train_reference_gpt(tiny, initial, global, data_seed, steps, {});
  CHECK(parity_difference(train(mixed_plan(), 2, micro_batches).parameters.back(), adam.parameters,
                          tiny) < 1e-5);
}

TEST_CASE("accumulation: a step's collectives follow the mode table",
          "[validate][accumulation][collectives]") {
  using K = CollectiveKind;
  const int n = tiny.operators();  // 6
  const int m = micro_batches;
  // Written out for the common modes: DP all-reduces once per operator after the last
  // micro-batch (no_sync); ZDP gathers twice and reduce-scatters in every micro-batch (FSDP);
  // Z2 gathers once per micro-batch; Z1 reduce-scatters once and gathers once after the step.
  auto counts = train(uniform(OperatorChoice::whole(Mode::dp), micro_batch), 2, m).last_step_counts;
  CHECK(counts[K::all_reduce] == n);
  CHECK(counts[K::all_gather] == 0);
  counts = train(uniform(OperatorChoice::whole(Mode::zdp), micro_batch), 2, m).last_step_counts;
  CHECK(counts[K::all_gather] == 2 * n * m);
  CHECK(counts[K::reduce_scatter] == n * m);
  CHECK(counts[K::all_reduce] == 0);
  counts = train(uniform(OperatorChoice::whole(Mode::z2), micro_batch), 2, m).last_step_counts;
  CHECK(counts[K::all_gather] == n * m);
  CHECK(counts[K::reduce_scatter] == n * m);
  counts = train(uniform(OperatorChoice::whole(Mode::z1), micro_batch), 2, m).last_step_counts;
  CHECK(counts[K::reduce_scatter] == n);
  CHECK(counts[K::all_gather] == n);
  // And for a mixed plan, from the table itself.
  const Plan mixed = mixed_plan();
  CHECK(train(mixed, 2, m).last_step_counts == table_counts(mixed, m));
  CHECK(train(mixed, 2, 1).last_step_counts == table_counts(mixed, 1));
}

TEST_CASE("accumulation: memory is one micro-batch's activations over the same states",
          "[validate][accumulation][memory]") {
  install_counting_allocator();
  // The step's high-water mark (both rank threads: one process) and rank 0's states.
  auto measure = [](Mode mode, int batch_size, int m) {
    RuntimeOptions options;
    options.accumulation_steps = m;
    const Plan plan = uniform(OperatorChoice::whole(mode), batch_size);
    std::int64_t peak_bytes = 0;
    std::int64_t persistent_bytes = 0;
    std::mutex mutex;
    testing::run_rank_threads(2, [&](Communicator& comm) {
      ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), options);
      const int rows = batch_size * m;
      const TokenBatch batch =
          make_token_batch(tiny, 2 * rows, 3, 0).rows(comm.rank() * rows, rows);
      comm.barrier();
      const StepMetrics metrics = model.train_step(batch);
      std::lock_guard lock(mutex);
      peak_bytes = std::max(peak_bytes, metrics.peak_memory_bytes);
      if (comm.rank() == 0) persistent_bytes = model.persistent_bytes();
    });
    return std::pair{peak_bytes, persistent_bytes};
  };
  for (const Mode mode : {Mode::dp, Mode::zdp}) {
    INFO("mode " << mode_name(mode));
    const auto [accumulated_peak, accumulated_states] = measure(mode, micro_batch, 3);
    const auto [micro_peak, micro_states] = measure(mode, micro_batch, 1);
    const auto [whole_peak, whole_states] = measure(mode, 3 * micro_batch, 1);
    // The accumulated gradient is the gradient the mode keeps anyway (DP's whole, ZDP's shard).
    CHECK(accumulated_states == micro_states);
    CHECK(whole_states == micro_states);
    // One micro-batch's activations live at a time: the peak is micro-batch 2's, not batch 6's.
    CHECK(accumulated_peak == Approx(micro_peak).epsilon(0.02));
    CHECK(whole_peak > accumulated_peak + (whole_peak - micro_peak) / 2);
  }
}

TEST_CASE("accumulation: rows that the micro-batches do not divide are an input error",
          "[validate][accumulation]") {
  // One rank training 4 rows in `m` micro-batches of a DP plan.
  auto step_with = [](int m) {
    RuntimeOptions options;
    options.accumulation_steps = m;
    testing::run_rank_threads(1, [&](Communicator& comm) {
      ShardedGpt model(tiny, uniform(OperatorChoice::whole(Mode::dp), 2), comm,
                       initial_gpt_parameters(tiny, 5), options);
      model.train_step(make_token_batch(tiny, 4, 1, 0));
    });
  };
  REQUIRE_NOTHROW(step_with(2));
  REQUIRE_THROWS_AS(step_with(3), InputError);
  REQUIRE_THROWS_AS(step_with(0), InputError);
}
