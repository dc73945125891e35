// Gradient accumulation in the runtime: m = 3 micro-batches of b = 2 per optimizer step leave
// the parameters of one batch of 6 (the same plan, and the single-process reference on the
// concatenated batch), after one and after two steps, for every mode and a mixed plan; the
// collectives of a step are those model/mode's table runs every micro-batch (m times) or once;
// memory is one micro-batch's activations over the states the plan keeps anyway.
#include <cmath>
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

// Adam moves a coordinate whose exact gradient is (nearly) zero by a learning rate's worth of
// its rounding noise (parity_test leaves out the key biases, whose gradient is exactly zero;
// here a LayerNorm bias coordinate with a gradient of rounding size does the same), so under
// Adam the models are compared as a whole: |a - b| / |b| over all parameters but the key biases.
double model_difference(const NamedTensors& a, const NamedTensors& b) {
  double difference_sq = 0;
  double norm_sq = 0;
  for (std::size_t t = 0; t < a.size(); ++t) {
    at::Tensor x = a[t].second.detach().clone();
    at::Tensor y = b[t].second.detach().clone();
    REQUIRE(a[t].first == b[t].first);
    if (a[t].first.ends_with("qkv.bias")) {
      x.narrow(0, tiny.hidden, tiny.hidden).zero_();
      y.narrow(0, tiny.hidden, tiny.hidden).zero_();
    }
    difference_sq += (x - y).pow(2).sum().item<double>();
    norm_sq += y.pow(2).sum().item<double>();
  }
  return std::sqrt(difference_sq / norm_sq);
}

RuntimeOptions sgd_options() {
  RuntimeOptions sgd;
  sgd.adam.kind = AdamSettings::Kind::sgd;
  sgd.adam.learning_rate = 0.5;
  return sgd;
}

struct Errors {
  double sgd = 0;   // largest per-tensor relative difference, every parameter
  double adam = 0;  // model_difference
};

// m micro-batches of b against one batch of m x b with the same plan, after each step, under
// SGD with momentum (which sees the gradients' scale, so the loss's 1/m too) and under Adam.
Errors accumulation_error(const Plan& plan, int world, RuntimeOptions options = {}) {
  Plan whole = plan;
  whole.batch_size = plan.batch_size * micro_batches;
  Errors errors;
  for (const bool sgd : {true, false}) {
    RuntimeOptions run_options = options;
    run_options.adam = sgd ? sgd_options().adam : AdamSettings{};
    const Run accumulated = train(plan, world, micro_batches, run_options);
    const Run one_batch = train(whole, world, 1, run_options);
    for (int step = 0; step < steps; ++step) {
      double& error = sgd ? errors.sgd : errors.adam;
      error = std::max(
          error,
          sgd ? max_relative_difference(accumulated.parameters[step], one_batch.parameters[step])
              : model_difference(accumulated.parameters[step], one_batch.parameters[step]));
    }
  }
  return errors;
}

// Both within a tight float tolerance.
bool equal(const Errors& errors) {
  INFO("SGD " << errors.sgd << ", Adam " << errors.adam);
  CHECK(errors.sgd < 1e-5);
  CHECK(errors.adam < 1e-6);
  return errors.sgd < 1e-5 && errors.adam < 1e-6;
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
    equal(accumulation_error(uniform(OperatorChoice::whole(mode), micro_batch), 2));
  }
}

TEST_CASE("accumulation: a mixed plan with slices and checkpointing", "[validate][accumulation]") {
  equal(accumulation_error(mixed_plan(), 2));
  // Checkpointed ZDP, unfused, without forward prefetch and with the post backward policy.
  RuntimeOptions options;
  options.prefetch_depth = 0;
  options.backward_prefetch = BackwardPrefetch::post;
  equal(accumulation_error(
      uniform(OperatorChoice::whole(Mode::zdp, Checkpoint::unfused), micro_batch), 2, options));
}

TEST_CASE("accumulation: HSDP on 2 nodes of 2 ranks", "[validate][accumulation]") {
  Plan plan = uniform(OperatorChoice::whole(Mode::hsdp), micro_batch);
  plan.choices[0] = OperatorChoice::whole(Mode::dp);
  RuntimeOptions options;
  options.gpus_per_node = 2;
  equal(accumulation_error(plan, 4, options));
}

TEST_CASE("accumulation matches the single-process reference, gradient scale included",
          "[validate][accumulation]") {
  // SGD is not invariant to the gradients' scale, as Adam is: the loss's 1/m shows here.
  const RuntimeOptions sgd = sgd_options();
  const int global = 2 * micro_batches * micro_batch;
  const NamedTensors initial = initial_gpt_parameters(tiny, 5);
  const ReferenceRun expected =
      train_reference_gpt(tiny, initial, global, data_seed, steps, sgd.adam);
  REQUIRE(parity_difference(expected.parameters, initial, tiny) > 1e-3);
  const Run run = train(mixed_plan(), 2, micro_batches, sgd);
  CHECK(max_relative_difference(run.parameters.back(), expected.parameters) < 1e-5);
  // Under Adam too (compared as a whole: see model_difference).
  const ReferenceRun adam = train_reference_gpt(tiny, initial, global, data_seed, steps, {});
  CHECK(model_difference(train(mixed_plan(), 2, micro_batches).parameters.back(), adam.parameters) <
        1e-6);
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
  for (const int steps_per_iteration : {m, 1}) {
    INFO(steps_per_iteration << " micro-batches");
    auto measured = train(mixed, 2, steps_per_iteration).last_step_counts;
    auto expected = table_counts(mixed, steps_per_iteration);
    for (const K kind : {K::all_gather, K::reduce_scatter, K::all_reduce}) {
      INFO(collective_name(kind));
      CHECK(measured[kind] == expected[kind]);
    }
  }
}

TEST_CASE("accumulation: memory is one micro-batch's activations over the same states",
          "[validate][accumulation][memory]") {
  install_counting_allocator();
  // The step's high-water mark and the states, on one rank: the counting allocator sees the
  // whole process, where two rank threads' phases would line up differently from run to run.
  auto measure = [](Mode mode, int batch_size, int m) {
    RuntimeOptions options;
    options.accumulation_steps = m;
    const Plan plan = uniform(OperatorChoice::whole(mode), batch_size);
    std::pair<std::int64_t, std::int64_t> peak_and_states;
    testing::run_rank_threads(1, [&](Communicator& comm) {
      ShardedGpt model(tiny, plan, comm, initial_gpt_parameters(tiny, 5), options);
      const TokenBatch batch = make_token_batch(tiny, batch_size * m, 3, 0);
      const StepMetrics metrics = model.train_step(batch);
      peak_and_states = {metrics.peak_memory_bytes, model.persistent_bytes()};
    });
    return peak_and_states;
  };
  for (const Mode mode : {Mode::dp, Mode::zdp, Mode::z1}) {
    INFO("mode " << mode_name(mode));
    const auto [accumulated_peak, accumulated_states] = measure(mode, micro_batch, 3);
    const auto [micro_peak, micro_states] = measure(mode, micro_batch, 1);
    const auto [whole_peak, whole_states] = measure(mode, 3 * micro_batch, 1);
    // The accumulated gradient is the gradient the mode keeps anyway.
    CHECK(accumulated_states == micro_states);
    CHECK(whole_states == micro_states);
    // One micro-batch's activations live at a time: the peak is micro-batch 2's, not batch 6's
    // (up to the 6 rows of tokens, and a gradient whose reduction on the communication thread
    // ends a little earlier or later than the compute beside it: 32 KiB seen under load).
    INFO("peak: accumulated " << accumulated_peak << " B, micro-batch " << micro_peak
                              << " B, whole batch " << whole_peak << " B");
    CHECK(whole_peak > micro_peak + 256 * 1024);
    CHECK(std::abs(accumulated_peak - micro_peak) < 64 * 1024);
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

TEST_CASE("one DP bucket after the backward: the same parameters, one all-reduce a step",
          "[validate][accumulation][parity]") {
  // The runtime's "gradient_all_reduce": "after_backward": every DP gradient in one buffer,
  // all-reduced once after the last micro-batch's backward; a mixed plan's other modes as before.
  RuntimeOptions bucket;
  bucket.dp_all_reduce_after_backward = true;
  const Plan all_dp = uniform(OperatorChoice::whole(Mode::dp), micro_batch);
  equal(accumulation_error(all_dp, 2, bucket));
  equal(accumulation_error(mixed_plan(), 2, bucket));
  const Run per_operator = train(all_dp, 2, micro_batches);
  const Run one_bucket = train(all_dp, 2, micro_batches, bucket);
  CHECK(one_bucket.last_step_counts.at(CollectiveKind::all_reduce) == 1);
  CHECK(model_difference(one_bucket.parameters.back(), per_operator.parameters.back()) < 1e-6);
}
