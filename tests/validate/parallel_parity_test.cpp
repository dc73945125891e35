// Tensor, pipeline and data parallelism on real ranks (threads over Gloo) train the same
// parameters as one process on the whole batch, for every schedule; the schedules hold the
// micro-batches their closed forms say.
#include <map>
#include <mutex>

#include "model/input_error.hpp"
#include "tests/validate/rank_threads.hpp"
#include "validate/parallel_gpt.hpp"
#include "validate/reference_gpt.hpp"
// After libtorch's headers: c10 defines a CHECK of its own (glog's) that Catch's must replace.
#include <catch2/catch.hpp>

namespace osdp::validate {
namespace {

constexpr int steps = 3;
constexpr std::uint64_t data_seed = 17;
constexpr std::uint64_t init_seed = 5;

struct ParallelRun {
  NamedTensors parameters;                       // rank 0's full parameters
  std::map<int, ParallelStepMetrics> last_step;  // per rank
};

ParallelRun run_parallel(const GptShape& shape, ParallelDegrees degrees,
                         ParallelRuntimeOptions options, int rows_per_data_rank) {
  const ParallelLayout layout(degrees);
  ParallelRun run;
  std::mutex mutex;
  testing::run_rank_threads(layout.world(), [&](Communicator& comm) {
    ParallelGpt model(shape, layout, comm, initial_gpt_parameters(shape, init_seed), options);
    const int data_rank = layout.coordinates_of(comm.rank()).data(layout.degrees());
    ParallelStepMetrics metrics;
    for (int step = 0; step < steps; ++step) {
      const TokenBatch global =
          make_token_batch(shape, degrees.data * rows_per_data_rank, data_seed, step);
      metrics = model.train_step(global.rows(data_rank * rows_per_data_rank, rows_per_data_rank));
    }
    NamedTensors parameters = model.full_parameters();
    std::lock_guard lock(mutex);
    run.last_step[comm.rank()] = metrics;
    if (comm.rank() == 0) run.parameters = std::move(parameters);
  });
  return run;
}

double parity(const GptShape& shape, ParallelDegrees degrees, ParallelRuntimeOptions options,
              int rows_per_data_rank) {
  const ParallelRun run = run_parallel(shape, degrees, options, rows_per_data_rank);
  const NamedTensors reference =
      train_reference_gpt(shape, initial_gpt_parameters(shape, init_seed),
                          degrees.data * rows_per_data_rank, data_seed, steps, options.adam)
          .parameters;
  return parity_difference(run.parameters, reference, shape);
}

const GptShape two_layers{2, 64, 4, 16, 128};
const GptShape four_layers{4, 32, 4, 16, 64};

}  // namespace

TEST_CASE("tensor parallelism trains the parameters one process trains") {
  for (int tensor : {2, 4}) {
    INFO("tp " << tensor);
    CHECK(parity(two_layers, {tensor, 1, 1}, {}, 4) < 2e-4);
  }
}

TEST_CASE("tensor x data parallelism under SGD (gradients averaged, not only normalised)") {
  ParallelRuntimeOptions options;
  options.adam.kind = AdamSettings::Kind::sgd;
  options.adam.learning_rate = 0.1;
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
}

TEST_CASE("ZeRO-1 inside a layout (DeepSpeed 3D) trains the parameters DDP trains") {
  ParallelRuntimeOptions options;
  options.data_parallel_mode = Mode::z1;
  options.adam.kind = AdamSettings::Kind::sgd;
  options.adam.learning_rate = 0.1;
  CHECK(parity(two_layers, {1, 1, 2}, options, 2) < 2e-4);
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
  options.adam = {};
  options.micro_batches = 2;
  CHECK(parity(two_layers, {1, 2, 2}, options, 2) < 2e-4);
}

TEST_CASE("pipeline parallelism: GPipe and 1F1B train the parameters one process trains") {
  for (auto schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    ParallelRuntimeOptions options;
    options.schedule = schedule;
    options.micro_batches = 4;
    INFO((schedule == PipelineSchedule::gpipe ? "gpipe" : "1f1b"));
    CHECK(parity(two_layers, {1, 2, 1}, options, 4) < 2e-4);
    CHECK(parity(four_layers, {1, 4, 1}, options, 8) < 2e-4);
  }
}

TEST_CASE("tensor x pipeline x data parallelism trains the parameters one process trains") {
  ParallelRuntimeOptions options;
  options.micro_batches = 2;
  CHECK(parity(two_layers, {2, 2, 2}, options, 2) < 2e-4);
  options.layers_per_stage = {0, 2};  // the first stage holds the embedding alone
  CHECK(parity(two_layers, {2, 2, 1}, options, 2) < 2e-4);
}

TEST_CASE("1F1B holds at most p - s micro-batches on stage s, GPipe all m") {
  const int stages = 4;
  const int micro_batches = 8;
  for (auto schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    ParallelRuntimeOptions options;
    options.schedule = schedule;
    options.micro_batches = micro_batches;
    const ParallelRun run = run_parallel(four_layers, {1, stages, 1}, options, micro_batches);
    for (const auto& [rank, metrics] : run.last_step) {
      const int stage = rank;  // one rank per stage
      INFO("stage " << stage);
      CHECK(metrics.schedule.size() == 2u * micro_batches);
      CHECK(metrics.most_micro_batches_in_flight ==
            (schedule == PipelineSchedule::gpipe ? micro_batches : stages - stage));
      // 1F1B: the last stage alternates from the start (F0 B0 F1 B1 ...).
      if (schedule == PipelineSchedule::one_f_one_b && stage == stages - 1) {
        CHECK(metrics.schedule[0] == "F0");
        CHECK(metrics.schedule[1] == "B0");
      }
    }
  }
}

TEST_CASE("layouts the model cannot take are refused with the value and what was expected") {
  CHECK_THROWS_AS(split_layers(four_layers, 3, {1, 1}), InputError);
  CHECK_THROWS_AS(split_layers(four_layers, 2, {1, 2}), InputError);
  CHECK_THROWS_AS(split_layers(four_layers, 3, {2, 0, 2}), InputError);
  const auto even = split_layers(four_layers, 3, {});
  CHECK(even[0].count == 2);
  CHECK(even[1].count == 1);
  CHECK(even[2].count == 1);
  // Tensor degree 3 divides neither 4 heads nor the vocabulary.
  CHECK_THROWS_AS(testing::run_rank_threads(3,
                                            [&](Communicator& comm) {
                                              ParallelGpt model(
                                                  two_layers, ParallelLayout({3, 1, 1}), comm,
                                                  initial_gpt_parameters(two_layers, 1), {});
                                            }),
                  InputError);
}

}  // namespace osdp::validate
