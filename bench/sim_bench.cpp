// sim_bench: wall time, events per second and the simulation process's peak RSS for one
// simulated iteration of N&D 96 layers (hidden 1536, 16 heads, 194 operators), FSDP at batch 4:
// on 16 GPUs (2 x 8 A100, NVSwitch) in step mode, and on 1,024 GPUs (128 x 8) in scale mode,
// once on A100 nodes under one network switch and once on the leaf-spine H100 cluster of
// scenarios/clusters/h100-80gb-128x8-leaf-spine.json, and on 8,192 GPUs of that fabric (1,024
// servers; issue 22's target: 60 s).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>

#include "model/scenario.hpp"
#include "sim/simulate.hpp"

namespace {

using namespace osdp;

Cluster a100_nodes(int nodes) {
  Topology topology;
  topology.nodes = nodes;
  topology.node.kind = NodeKind::nvswitch;
  topology.node.gpus = 8;
  topology.node.gpu_link = {230e9, 2e-6};
  topology.nics_per_node = 1;
  topology.nic = {12.5e9, 5e-6};
  Cluster cluster;
  cluster.name = "a100";
  cluster.topology = topology;
  cluster.ranks = topology.ranks();
  cluster.gpus_per_node = 8;
  cluster.gpu.compute_flops_per_s = 150e12;
  cluster.gpu.memory_bandwidth_Bps = 1555e9;
  cluster.gpu.memory_bytes = 40.0 * (1LL << 30);
  cluster.gpu.kernel_launch_s = 4e-6;
  const DerivedTimings derived = derive_timings(topology);
  cluster.world = GroupTiming::uniform(derived.world);
  cluster.intra_node = GroupTiming::uniform(derived.intra_node);
  cluster.inter_node = GroupTiming::uniform(derived.inter_node);
  return cluster;
}

// The scenario clusters, found from this source file (the benchmark takes no arguments);
// `nodes` > 0 scales the cluster out to that many servers.
Cluster scenario_cluster(const std::string& file, int nodes = 0) {
  const auto path =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "scenarios" / "clusters" / file;
  Json document = read_json_file(path.string());
  if (nodes > 0) document["topology"]["nodes"] = nodes;
  return load_cluster(JsonReader(document, path.string()));
}

Scenario nd_96_scenario(const Cluster& cluster) {
  Scenario scenario;
  scenario.name = "nd-96l-1536h";
  scenario.training.precision = Precision::mixed;
  GptSpec spec;
  spec.name = "nd-96l-1536h";
  spec.layers = 96;
  spec.hidden_sizes = {1536};
  spec.heads = 16;
  scenario.workload = std::make_shared<const Workload>(make_gpt(spec, scenario.training));
  scenario.cluster = cluster;
  return scenario;
}

void simulate_iteration(benchmark::State& state, const Cluster& cluster,
                        sim::Granularity granularity) {
  const Scenario scenario = nd_96_scenario(cluster);
  Plan plan;
  plan.batch_size = 4;
  plan.choices.assign(scenario.workload->size(), OperatorChoice::whole(Mode::zdp));
  sim::SimOptions options;
  options.granularity = granularity;
  sim::SimulationResult result;
  for (auto _ : state) {
    result = sim::simulate_plan(scenario, plan, options);
  }
  rusage usage{};
  getrusage(RUSAGE_CHILDREN, &usage);
  state.counters["events"] = static_cast<double>(result.events());
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(result.events()) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["flows"] = static_cast<double>(result.flows);
  state.counters["child_peak_rss_MiB"] = usage.ru_maxrss / 1024.0;
  state.SetLabel(fmt::format("simulated iteration {:.4f} s", result.iteration_time_s));
}

void BM_nd96_16gpu_step(benchmark::State& state) {
  simulate_iteration(state, a100_nodes(2), sim::Granularity::step);
}
void BM_nd96_1024gpu_scale(benchmark::State& state) {
  simulate_iteration(state, a100_nodes(128), sim::Granularity::scale);
}
void BM_nd96_1024gpu_scale_leaf_spine(benchmark::State& state) {
  simulate_iteration(state, scenario_cluster("h100-80gb-128x8-leaf-spine.json"),
                     sim::Granularity::scale);
}

// Issue 22's scale: 8,192 H100s, 1,024 servers on the same leaf-spine fabric.
void BM_nd96_8192gpu_scale_leaf_spine(benchmark::State& state) {
  simulate_iteration(state, scenario_cluster("h100-80gb-128x8-leaf-spine.json", 1024),
                     sim::Granularity::scale);
}

BENCHMARK(BM_nd96_16gpu_step)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_nd96_1024gpu_scale)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_nd96_1024gpu_scale_leaf_spine)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);
BENCHMARK(BM_nd96_8192gpu_scale_leaf_spine)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // A flag Google Benchmark does not know is bad input: exit 2, as every osdp program.
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
