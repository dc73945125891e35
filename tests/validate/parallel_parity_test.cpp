// Tensor, pipeline and data parallelism on real ranks (threads over Gloo) train the same
// parameters as one process on the whole batch, for every schedule (GPipe, 1F1B, interleaved)
// and data-parallel mode (dp, z1, z2); the schedules hold the micro-batches their closed forms
// and the 3D model's timeline say.
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

TEST_CASE("sequence parallelism trains the parameters one process trains") {
  ParallelRuntimeOptions options;
  options.sequence_parallel = true;
  for (int tensor : {2, 4}) {
    INFO("tp " << tensor << " with sequence parallelism");
    CHECK(parity(two_layers, {tensor, 1, 1}, options, 4) < 2e-4);
  }
  // Beside data parallelism (SGD: the replicated parameters' partial gradients are summed over
  // the tensor group, not averaged), and through a pipeline whose transfers carry 1/t of the
  // sequence.
  options.adam.kind = AdamSettings::Kind::sgd;
  options.adam.learning_rate = 0.1;
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
  options.adam = {};
  options.micro_batches = 2;
  CHECK(parity(two_layers, {2, 2, 1}, options, 2) < 2e-4);
  // Inside ZeRO-1 and ZeRO-2 data parallelism (the replicated gradients summed on the shards).
  options.data_parallel_mode = Mode::z1;
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
  options.data_parallel_mode = Mode::z2;
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
}

TEST_CASE("activation checkpointing inside layouts trains the parameters one process trains") {
  ParallelRuntimeOptions options;
  options.checkpoint_layers = true;
  CHECK(parity(two_layers, {2, 1, 1}, options, 4) < 2e-4);
  options.micro_batches = 2;
  CHECK(parity(two_layers, {1, 2, 1}, options, 2) < 2e-4);
  options.sequence_parallel = true;
  CHECK(parity(two_layers, {2, 2, 1}, options, 2) < 2e-4);
  options.sequence_parallel = false;
  // ZeRO-2 with a ZDP layer: the recompute runs on the parameters gathered for the backward.
  options.data_parallel_mode = Mode::z2;
  options.zdp_layers = {0};
  CHECK(parity(two_layers, {1, 1, 2}, options, 2) < 2e-4);
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

TEST_CASE("a step's wait keeps its tensor group's sums apart, within the whole wait") {
  for (const ParallelDegrees degrees :
       {ParallelDegrees{2, 1, 1}, ParallelDegrees{2, 1, 2}, ParallelDegrees{1, 1, 2}}) {
    INFO("tp " << degrees.tensor << " x dp " << degrees.data);
    for (const auto& [rank, metrics] : run_parallel(two_layers, degrees, {}, 2).last_step) {
      INFO("rank " << rank);
      CHECK(metrics.tensor_wait_s <= metrics.communication_wait_s);
      if (degrees.tensor > 1) {
        CHECK(metrics.tensor_wait_s > 0);
      } else {
        CHECK(metrics.tensor_wait_s == 0);  // no tensor group, no sums
      }
    }
  }
}

TEST_CASE("a step's waits lie in order inside it and add up to its exposed time by cause") {
  ParallelRuntimeOptions pipelined;
  pipelined.micro_batches = 2;
  ParallelRuntimeOptions zdp_layer;
  zdp_layer.data_parallel_mode = Mode::z2;
  zdp_layer.zdp_layers = {0};
  const std::vector<std::pair<ParallelDegrees, ParallelRuntimeOptions>> runs = {
      {{2, 1, 1}, {}}, {{1, 2, 1}, pipelined}, {{1, 1, 2}, zdp_layer}, {{2, 2, 1}, pipelined}};
  for (const auto& [degrees, options] : runs) {
    INFO("tp " << degrees.tensor << " x pp " << degrees.pipeline << " x dp " << degrees.data);
    for (const auto& [rank, metrics] : run_parallel(two_layers, degrees, options, 2).last_step) {
      INFO("rank " << rank);
      std::map<std::string, double> by_cause;
      double previous_end_s = 0;
      for (const ParallelStepMetrics::Span& wait : metrics.waits) {
        INFO(wait.label << " at " << wait.start_s << " s for " << wait.duration_s << " s");
        CHECK(wait.duration_s > 0);
        CHECK(wait.start_s >= previous_end_s - 1e-9);  // one compute thread: one wait at a time
        previous_end_s = wait.start_s + wait.duration_s;
        by_cause[wait.label] += wait.duration_s;
      }
      CHECK(previous_end_s <= metrics.iteration_time_s + 1e-6);
      double total_s = 0;
      for (const auto& [cause, seconds] : by_cause) {
        CHECK((cause == "tensor-parallel" || cause == "receive" || cause == "send" ||
               cause == "data-parallel"));
        total_s += seconds;
      }
      CHECK(total_s == Approx(metrics.communication_wait_s).margin(1e-9));
      CHECK(by_cause["receive"] == Approx(metrics.pipeline_wait_s).margin(1e-9));
      CHECK(by_cause["tensor-parallel"] == Approx(metrics.tensor_wait_s).margin(1e-9));
      // Stage 1's first forward needs stage 0's output: it waits for it.
      if (degrees.pipeline == 2 && rank >= degrees.tensor) CHECK(by_cause["receive"] > 0);
      if (degrees.pipeline == 1) CHECK(by_cause["receive"] == 0);
      if (degrees.tensor == 1) CHECK(by_cause["tensor-parallel"] == 0);
      if (degrees.data == 1) CHECK(by_cause["data-parallel"] == 0);
    }
  }
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
  options.layers_per_chunk = {0, 2};  // the first stage holds the embedding alone
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
      // A sent activation or gradient is let go once the receiver is known to have it: under
      // 1F1B a stage holds at most p sends, not all m of them to the step's end.
      if (schedule == PipelineSchedule::one_f_one_b) {
        CHECK(metrics.most_sends_in_flight >= 1);
        CHECK(metrics.most_sends_in_flight <= stages);
      }
      // 1F1B: the last stage alternates from the start (F0 B0 F1 B1 ...).
      if (schedule == PipelineSchedule::one_f_one_b && stage == stages - 1) {
        CHECK(metrics.schedule[0] == "F0");
        CHECK(metrics.schedule[1] == "B0");
      }
    }
  }
}

TEST_CASE("interleaved 1F1B (v chunks per stage) trains the parameters one process trains") {
  ParallelRuntimeOptions options;
  options.schedule = PipelineSchedule::interleaved;
  options.chunks_per_stage = 2;
  options.micro_batches = 4;
  // 4 chunks of one layer: stage 0 holds layers 0 and 2, stage 1 layers 1 and 3 (the head).
  CHECK(parity(four_layers, {1, 2, 1}, options, 4) < 2e-4);
  CHECK(parity(four_layers, {2, 2, 1}, options, 4) < 2e-4);
  CHECK(parity(four_layers, {1, 2, 2}, options, 4) < 2e-4);
  // m = p: every forward first (Megatron's special case).
  options.micro_batches = 2;
  CHECK(parity(four_layers, {1, 2, 1}, options, 2) < 2e-4);
  // v = 3 with the embedding and the head in chunks of their own; stage 1's chunks send to
  // stage 0's next ones (the wrap-around).
  options.chunks_per_stage = 3;
  options.micro_batches = 4;
  options.layers_per_chunk = {0, 1, 1, 1, 1, 0};
  CHECK(parity(four_layers, {1, 2, 1}, options, 4) < 2e-4);
  // One stage: every transfer is from the stage to itself.
  options.chunks_per_stage = 2;
  options.micro_batches = 2;
  options.layers_per_chunk = {};
  CHECK(parity(four_layers, {1, 1, 1}, options, 2) < 2e-4);
}

TEST_CASE("interleaved 1F1B holds the chunks' micro-batches the schedule and the 3D model say") {
  const int stages = 2;
  const int chunks_per_stage = 2;
  const int micro_batches = 4;
  ParallelRuntimeOptions options;
  options.schedule = PipelineSchedule::interleaved;
  options.chunks_per_stage = chunks_per_stage;
  options.micro_batches = micro_batches;
  const ParallelRun run = run_parallel(four_layers, {1, stages, 1}, options, micro_batches);
  // The 3D model's count of the same schedule (model/pipeline_schedule's event simulation).
  PipelineWork work;
  work.stages = stages;
  work.chunks_per_stage = chunks_per_stage;
  work.micro_batches = micro_batches;
  work.forward_s.assign(work.chunks(), 1.0);
  work.backward_s.assign(work.chunks(), 2.0);
  work.transfer_s.assign(work.chunks() - 1, 0.0);
  const PipelineTimeline timeline = run_pipeline(PipelineSchedule::interleaved, work);
  for (const auto& [rank, metrics] : run.last_step) {
    const int stage = rank;
    INFO("stage " << stage);
    CHECK(metrics.schedule.size() == 2u * micro_batches * chunks_per_stage);
    const int warm_up = 2 * (stages - stage - 1) + (chunks_per_stage - 1) * stages;
    CHECK(metrics.most_micro_batches_in_flight ==
          std::min(micro_batches * chunks_per_stage, warm_up + 1));
    CHECK(metrics.most_micro_batches_in_flight == timeline.peak_in_flight[stage]);
    // Megatron's order: the first p micro-batches through chunk 0, then through chunk 1.
    CHECK(metrics.schedule[0] == "F0:0");
    CHECK(metrics.schedule[stages] == "F0:1");
  }
}

TEST_CASE("ZeRO-2 inside a layout (FSDP + PP, parameters kept gathered) trains what DDP trains") {
  ParallelRuntimeOptions options;
  options.data_parallel_mode = Mode::z2;
  CHECK(parity(two_layers, {1, 1, 2}, options, 2) < 2e-4);
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
  // Gradients reduce-scattered every micro-batch and accumulated in the shard.
  options.micro_batches = 2;
  CHECK(parity(two_layers, {1, 1, 2}, options, 4) < 2e-4);
  CHECK(parity(two_layers, {1, 2, 2}, options, 2) < 2e-4);
  options.schedule = PipelineSchedule::interleaved;
  options.chunks_per_stage = 2;
  options.micro_batches = 4;
  CHECK(parity(four_layers, {1, 2, 2}, options, 4) < 2e-4);
  // Under SGD the gradients' scale shows (Adam normalises it away).
  options = {};
  options.data_parallel_mode = Mode::z2;
  options.adam.kind = AdamSettings::Kind::sgd;
  options.adam.learning_rate = 0.1;
  CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
}

TEST_CASE("OSDP inside 3D (ZDP layers beside z2, dp or z1) trains what DDP trains") {
  for (const Mode base : {Mode::z2, Mode::dp, Mode::z1}) {
    INFO(mode_name(base) << " with ZDP layers");
    ParallelRuntimeOptions options;
    options.data_parallel_mode = base;
    options.zdp_layers = {0};
    options.micro_batches = 2;
    CHECK(parity(two_layers, {1, 1, 2}, options, 4) < 2e-4);
    CHECK(parity(two_layers, {2, 1, 2}, options, 4) < 2e-4);
    // Under a pipeline: stage 0 holds layer 0 (ZDP), stage 1 layer 1 (the base mode); then
    // both ZDP, and a stage of ZDP layers only (dp and z1: no bucket on it).
    CHECK(parity(two_layers, {1, 2, 2}, options, 2) < 2e-4);
    options.zdp_layers = {0, 1};
    CHECK(parity(two_layers, {1, 2, 2}, options, 2) < 2e-4);
    CHECK(parity(four_layers, {1, 2, 2}, options, 2) < 2e-4);
    options.schedule = PipelineSchedule::gpipe;
    CHECK(parity(two_layers, {1, 2, 2}, options, 2) < 2e-4);
    options.schedule = PipelineSchedule::interleaved;
    options.chunks_per_stage = 2;
    options.micro_batches = 4;
    options.zdp_layers = {1, 2};
    CHECK(parity(four_layers, {1, 2, 2}, options, 4) < 2e-4);
    // Under SGD the gradients' scale shows (Adam normalises it away); then with sequence
    // parallelism (the replicated gradients summed over the tensor ranks on the ZDP shards and
    // in the bucket alike) and checkpointing.
    options = {};
    options.data_parallel_mode = base;
    options.zdp_layers = {1};
    options.micro_batches = 2;
    options.adam.kind = AdamSettings::Kind::sgd;
    options.adam.learning_rate = 0.1;
    CHECK(parity(two_layers, {2, 1, 2}, options, 4) < 2e-4);
    options.sequence_parallel = true;
    options.checkpoint_layers = true;
    CHECK(parity(two_layers, {2, 1, 2}, options, 2) < 2e-4);
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
  // Rank 0's error, "path: value, expected" (empty: none). Every rank refuses alike; the
  // barriers keep a rank that refused from closing its connections while another still opens
  // or uses them.
  auto refused = [](ParallelDegrees degrees, const ParallelRuntimeOptions& options) {
    const ParallelLayout layout(degrees);
    std::vector<std::string> errors(layout.world());
    testing::run_rank_threads(layout.world(), [&](Communicator& comm) {
      comm.barrier();
      try {
        ParallelGpt model(four_layers, layout, comm, initial_gpt_parameters(four_layers, 1),
                          options);
      } catch (const InputError& error) {
        errors[comm.rank()] = error.json_path() + ": " + error.value() + ", " + error.expected();
      }
      comm.barrier();
    });
    return errors.front();
  };
  ParallelRuntimeOptions interleaved;
  interleaved.schedule = PipelineSchedule::interleaved;
  interleaved.chunks_per_stage = 2;
  interleaved.micro_batches = 3;  // not a multiple of the 2 stages
  const std::string odd = refused({1, 2, 1}, interleaved);
  INFO(odd);
  CHECK(odd.find("$.layout.micro_batches: 3") == 0);
  CHECK(odd.find("tp 1 x pp 2 x dp 1, interleaved") != std::string::npos);
  ParallelRuntimeOptions chunked_1f1b;
  chunked_1f1b.chunks_per_stage = 2;
  CHECK(refused({1, 2, 1}, chunked_1f1b).find("$.layout.chunks_per_stage: 2") == 0);
  interleaved.micro_batches = 4;
  interleaved.chunks_per_stage = 4;  // 8 chunks for 4 layers, an embedding and a head
  CHECK(refused({1, 2, 1}, interleaved).find("$.layout.pipeline: 8") == 0);
  // Tensor degree 3 divides neither 4 heads nor the vocabulary.
  CHECK(refused({3, 1, 1}, {}).find("$.layout.tensor: 3") == 0);
  CHECK(refused({1, 2, 1}, {}).empty());
  // ZDP layers only the model's.
  ParallelRuntimeOptions zdp_layer_9;
  zdp_layer_9.data_parallel_mode = Mode::z2;
  zdp_layer_9.zdp_layers = {9};
  CHECK(refused({1, 1, 2}, zdp_layer_9).find("$.layout.zdp_layers: 9") == 0);
}

}  // namespace osdp::validate
