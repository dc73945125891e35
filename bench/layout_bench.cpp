// 3D parallelism: the layout search over every axis for GPT-175B on 512 A100s (64 DGX A100
// servers, the vTrain 3D scenario's cluster scaled out), and one iteration of the largest
// measured 3D row (175 B, 32 stages, 384 micro-batches) through the 3D iteration model.
//
//   layout_bench [--enforce-targets] [Google Benchmark flags]
//
// Targets (issue 23): the 512-GPU search in at most 2 s, the largest row in at most 10 s. With
// --enforce-targets a missed target makes the exit status 1.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <string>

#include "bench/bench_flags.hpp"
#include "model/measured_runs.hpp"
#include "model/parallel_iteration.hpp"
#include "model/scenario.hpp"
#include "search/layout_search.hpp"

namespace osdp::bench {
namespace {

// GPT-3 175B (96 layers, hidden 12288, 96 heads, sequence 2048) on `gpus` A100s, global batch
// 1536, at most 40 GiB a GPU.
Scenario gpt3_scenario(int gpus) {
  Scenario scenario =
      load_scenario(std::string(OSDP_SOURCE_DIR) + "/scenarios/vtrain-a100-3d.json");
  GptSpec spec = *scenario.gpt;
  spec.name = "gpt-175b";
  spec.layers = 96;
  spec.hidden_sizes = {12288};
  spec.heads = 96;
  spec.sequence_length = 2048;
  scenario.gpt = spec;
  scenario.workload = std::make_shared<const Workload>(make_gpt(spec, scenario.training));
  scenario.training.global_batch_size = 1536;
  scenario.training.min_batch_size = 1;
  scenario.training.max_batch_size = 8;
  scenario.training.memory_limit_bytes = 40.0 * 1024 * 1024 * 1024;
  scenario.cluster = cluster_with_ranks(scenario, gpus);
  return scenario;
}

double search_s = -1;  // not measured until its benchmark runs
double largest_row_s = -1;

void layout_search_512(benchmark::State& state) {
  const Scenario scenario = gpt3_scenario(512);
  for (auto _ : state) {
    const auto started = std::chrono::steady_clock::now();
    const LayoutSearchResult result = search_layouts(scenario, {});
    search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    benchmark::DoNotOptimize(result.evaluations);
    state.counters["evaluations"] = static_cast<double>(result.evaluations);
  }
}
BENCHMARK(layout_search_512)->Unit(benchmark::kMillisecond)->Iterations(3);

void largest_measured_row(benchmark::State& state) {
  // 512 GPUs: tensor 8 x data 2 x pipeline 32, micro-batch 2, global 1536: 384 micro-batches.
  const Scenario scenario = gpt3_scenario(512);
  ParallelRun run;
  run.degrees = {8, 32, 2, 0};
  run.micro_batch = 2;
  run.micro_batches = 384;
  run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
  for (auto _ : state) {
    const auto started = std::chrono::steady_clock::now();
    const ParallelIterationCost cost = parallel_iteration_cost(
        *scenario.gpt, scenario.training, scenario.cluster, scenario.cost, run, scenario.file);
    largest_row_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    benchmark::DoNotOptimize(cost.iteration_time_s);
    state.counters["iteration_s"] = cost.iteration_time_s;
  }
}
BENCHMARK(largest_measured_row)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace osdp::bench

int main(int argc, char** argv) {
  const bool enforce = osdp::bench::take_flag(argc, argv, "--enforce-targets");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  using namespace osdp::bench;
  const bool search_met = target_met(search_s, 2.0);
  const bool row_met = target_met(largest_row_s, 10.0);
  fmt::print("targets: 512-GPU layout search {} (<= 2 s: {}), largest 3D row {} (<= 10 s: {})\n",
             seconds_text(search_s, 3), verdict(search_s, 2.0), seconds_text(largest_row_s, 4),
             verdict(largest_row_s, 10.0));
  return enforce && !(search_met && row_met) ? 1 : 0;
}
