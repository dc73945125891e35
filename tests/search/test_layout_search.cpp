// The 3D layout search (search/layout_search): equal to brute force on small instances (every
// layout, micro-batch, schedule, checkpointing, layer split it tries, base mode and vector of
// zdp layer counts per stage), never slower than any of its baselines, and each baseline what it
// claims; the balanced layer split levels the chunks' work.
#include <catch2/catch.hpp>
#include <functional>

#include "model/input_error.hpp"
#include "model/parallel_iteration.hpp"
#include "search/layout_search.hpp"

namespace osdp {
namespace {

// A small GPT on two nodes of two GPUs (NVSwitch inside, one NIC each), mixed precision.
Scenario small_scenario(int layers, const std::string& memory_limit) {
  const Json document = {{"name", "small-3d"},
                         {"model",
                          {{"family", "gpt"},
                           {"layers", layers},
                           {"hidden", 256},
                           {"heads", 4},
                           {"sequence_length", 128},
                           {"vocabulary", 1000}}},
                         {"cluster",
                          {{"name", "two by two"},
                           {"gpu",
                            {{"memory", "1GiB"},
                             {"compute", "20TFLOPS"},
                             {"memory_bandwidth", "500GBps"},
                             {"kernel_launch", "4us"}}},
                           {"topology",
                            {{"kind", "nvswitch"},
                             {"nodes", 2},
                             {"gpus_per_node", 2},
                             {"gpu_link", {{"bandwidth", "100GBps"}, {"latency", "2us"}}},
                             {"nics_per_node", 1},
                             {"nic", {{"bandwidth", "25Gbps"}, {"latency", "5us"}}}}}}},
                         {"training",
                          {{"precision", "mixed"},
                           {"optimizer", "adam"},
                           {"memory_limit", memory_limit},
                           {"global_batch_size", 16},
                           {"min_batch_size", 1},
                           {"max_batch_size", 8}}}};
  return scenario_from_json(document, "small-3d.json");
}

// Every configuration the 3D + OSDP space holds, costed; the best throughput that fits.
double brute_force_best(const Scenario& scenario, double limit_bytes) {
  const int gpus = scenario.cluster.ranks;
  const GptSpec& spec = *scenario.gpt;
  double best = 0;
  for (int tensor : {1, 2}) {
    for (int pipeline = 1; pipeline <= gpus / tensor; ++pipeline) {
      if ((gpus / tensor) % pipeline != 0 || pipeline > spec.layers) continue;
      const int data = gpus / (tensor * pipeline);
      for (int batch = 1; batch <= 8; ++batch) {
        if (16 % (batch * data) != 0) continue;
        const int micro_batches = 16 / (batch * data);
        for (PipelineSchedule schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe,
                                          PipelineSchedule::interleaved}) {
          if (pipeline == 1 && schedule != PipelineSchedule::one_f_one_b) continue;
          if (schedule == PipelineSchedule::interleaved &&
              (micro_batches % pipeline != 0 || spec.layers < 2 * pipeline)) {
            continue;
          }
          for (bool checkpoint : {false, true}) {
            ParallelRun run;
            run.degrees = {tensor, pipeline, data, 0};
            run.micro_batch = batch;
            run.micro_batches = micro_batches;
            run.schedule = schedule;
            run.chunks_per_stage = schedule == PipelineSchedule::interleaved ? 2 : 1;
            if (checkpoint) run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
            for (const std::vector<int>& split : layer_splits(scenario, run)) {
              run.layers_per_chunk = split;
              const ParallelIterationCost shape = parallel_iteration_cost(
                  spec, scenario.training, scenario.cluster, scenario.cost, run, "brute");
              std::vector<int> layers(pipeline, 0);
              for (const ChunkCost& chunk : shape.chunks) {
                for (int op : chunk.ops) {
                  if (shape.workload->op(op).kind == OperatorKind::attention) ++layers[chunk.stage];
                }
              }
              for (Mode base : {Mode::dp, Mode::z1, Mode::z2}) {
                std::vector<int> zdp(pipeline, 0);
                // Every vector of zdp counts, odometer style.
                std::function<void(int)> visit = [&](int stage) {
                  if (stage == pipeline) {
                    run.modes = stage_modes(shape, base, zdp);
                    const ParallelIterationCost cost = parallel_iteration_cost(
                        spec, scenario.training, scenario.cluster, scenario.cost, run, "brute");
                    if (cost.peak_memory_bytes <= limit_bytes) {
                      best = std::max(best, cost.samples_per_iteration / cost.iteration_time_s);
                    }
                    return;
                  }
                  for (int count = 0; count <= layers[stage]; ++count) {
                    zdp[stage] = count;
                    visit(stage + 1);
                  }
                };
                visit(0);
              }
            }
          }
        }
      }
    }
  }
  return best;
}

TEST_CASE("3D + OSDP finds the brute force's best on small instances", "[layout]") {
  for (int layers : {2, 4}) {
    for (const char* limit : {"1GiB", "40MiB", "24MiB", "20MiB", "18MiB", "17MiB", "14MiB"}) {
      const Scenario scenario = small_scenario(layers, limit);
      const double limit_bytes = *scenario.training.memory_limit_bytes;
      const LayoutSearchResult result = search_layouts(scenario, {});
      const double expected = brute_force_best(scenario, limit_bytes);
      CAPTURE(layers, limit);
      const std::optional<LayoutPlan>& best = result.strategies.front().second;
      if (expected == 0) {
        CHECK_FALSE(best);
        CHECK(result.least_memory_needed_bytes > limit_bytes);
        continue;
      }
      REQUIRE(best);
      CHECK(best->throughput_samples_per_s == Approx(expected).epsilon(1e-9));
      CHECK(best->peak_memory_bytes <= limit_bytes);
    }
  }
}

TEST_CASE("3D + OSDP is never slower than a 3D baseline, and each baseline is what it says",
          "[layout]") {
  for (const char* limit : {"1GiB", "40MiB", "24MiB", "20MiB", "18MiB", "17MiB"}) {
    const LayoutSearchResult result = search_layouts(small_scenario(4, limit), {});
    REQUIRE(result.strategies.front().first == "3d_osdp");
    const std::optional<LayoutPlan>& osdp = result.strategies.front().second;
    for (const auto& [name, plan] : result.strategies) {
      if (!plan) continue;
      REQUIRE(osdp);
      CAPTURE(limit, name);
      CHECK(osdp->throughput_samples_per_s >= plan->throughput_samples_per_s * (1 - 1e-12));
      const ParallelRun& run = plan->run;
      // The recorded run is the one costed: costing it again gives the plan's figures (its
      // modes, stage table and trace come from it).
      const Scenario scenario = small_scenario(4, limit);
      const ParallelIterationCost again = parallel_iteration_cost(
          *scenario.gpt, scenario.training, scenario.cluster, scenario.cost, run, "test");
      CHECK(again.iteration_time_s == Approx(plan->iteration_time_s).epsilon(1e-12));
      CHECK(again.peak_memory_bytes == Approx(plan->peak_memory_bytes).epsilon(1e-12));
      if (name == "megatron_tp") {
        CHECK(run.degrees.pipeline == 1);
        CHECK(run.degrees.tensor > 1);
      } else if (name == "gpipe") {
        CHECK(run.degrees.tensor == 1);
        CHECK(run.degrees.pipeline > 1);
        CHECK(run.schedule == PipelineSchedule::gpipe);
      } else if (name == "deepspeed_3d") {
        CHECK(run.schedule == PipelineSchedule::one_f_one_b);
        for (Mode mode : run.modes) CHECK((mode == Mode::dp || mode == Mode::z1));
      } else if (name == "fsdp_pp") {
        for (Mode mode : run.modes) CHECK(mode == Mode::z2);
      }
    }
  }
}

TEST_CASE("fixed axes are kept, and axes the model cannot hold are input errors", "[layout]") {
  const Scenario scenario = small_scenario(4, "1GiB");
  LayoutSearchOptions options;
  options.tensor = 2;
  options.pipeline = 2;
  options.schedule = PipelineSchedule::gpipe;
  const LayoutSearchResult result = search_layouts(scenario, options);
  for (const auto& [name, plan] : result.strategies) {
    if (!plan) continue;
    CHECK(plan->run.degrees.tensor == 2);
    CHECK(plan->run.degrees.pipeline == 2);
    CHECK(plan->run.schedule == PipelineSchedule::gpipe);
  }
  options = {};
  options.tensor = 3;
  CHECK_THROWS_AS(search_layouts(scenario, options), InputError);
  options = {};
  options.pipeline = 8;  // more stages than layers
  CHECK_THROWS_AS(search_layouts(scenario, options), InputError);
}

}  // namespace
}  // namespace osdp

namespace osdp {
namespace {

TEST_CASE("the balanced split levels the chunks' work, a layer each at least", "[layout]") {
  // 8 layers, 4 chunks, the head worth 2 layers: the last chunk gets fewer.
  CHECK(balanced_layer_split(8, 4, 0.0, 2.0) == std::vector<int>{3, 2, 2, 1});
  CHECK(balanced_layer_split(8, 4, 0.0, 0.0) == std::vector<int>{2, 2, 2, 2});
  CHECK(balanced_layer_split(4, 4, 0.5, 9.0) == std::vector<int>{1, 1, 1, 1});
  CHECK(balanced_layer_split(10, 1, 3.0, 3.0) == std::vector<int>{10});
  for (int layers = 3; layers <= 40; ++layers) {
    for (int chunks = 1; chunks <= std::min(layers, 8); ++chunks) {
      const std::vector<int> split = balanced_layer_split(layers, chunks, 0.3, 1.7);
      int total = 0;
      for (int n : split) {
        CHECK(n >= 1);
        total += n;
      }
      CHECK(total == layers);
    }
  }
}

}  // namespace
}  // namespace osdp
