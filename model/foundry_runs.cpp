#include "model/foundry_runs.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "model/wrapping.hpp"

namespace osdp {
namespace fs = std::filesystem;
namespace {

std::string relative_to(const Scenario& scenario, const std::string& path) {
  fs::path resolved = path;
  if (resolved.is_relative() && !scenario.file.empty()) {
    resolved = fs::path(scenario.file).parent_path() / resolved;
  }
  return resolved.string();
}

// A file the setup names: read (as JSON) from beside the scenario.
Json read_named_file(const Scenario& scenario, const JsonReader& reader, const std::string& key,
                     std::string* path_out) {
  const Json& value = reader.raw(key);
  if (!value.is_string()) reader.fail(key, "the path of a JSON file");
  const std::string path = relative_to(scenario, value.get<std::string>());
  std::error_code error;
  if (!fs::exists(path, error) || error) reader.fail(key, "the path of an existing JSON file");
  *path_out = path;
  return read_json_file(path);
}

Training training_for(const Scenario& base, const FoundryRun& run) {
  Training training = base.training;
  training.precision = run.precision == "fp32" ? Precision::fp32 : Precision::mixed;
  // FSDP MixedPrecision: DEFAULT reduces in fp32, PURE in the parameters' bf16; FULL keeps
  // fp32 parameters for the gathers too, which osdp does not tell apart from DEFAULT (its
  // gathers are costed in bf16).
  training.gradient_reduce =
      run.mixed_precision == "PURE" ? ReducePrecision::parameters : ReducePrecision::fp32;
  training.min_batch_size = run.micro_batch;
  training.max_batch_size = run.micro_batch;
  training.accumulation_steps = run.accumulation_steps;
  training.global_batch_size.reset();
  training.memory_limit_bytes.reset();
  return training;
}

Mode mode_of(const FoundryRun& run) {
  if (run.sharding == "SHARD_GRAD_OP") return Mode::z2;
  if (run.sharding == "NO_SHARD") return Mode::dp;
  if (run.sharding == "HYBRID_SHARD") return Mode::hsdp;
  return Mode::zdp;
}

}  // namespace

void apply_fp8(Cluster& cluster) {
  const double speedup = cluster.gpu.fp8_speedup;
  for (auto& [kind, law] : cluster.gpu.operator_compute) {
    if (kind == "embedding") continue;
    for (ComputeLaw* part : {&law.forward, &law.backward}) {
      if (part->flops_per_s) *part->flops_per_s *= speedup;
    }
  }
  if (cluster.gpu.compute_flops_per_s) *cluster.gpu.compute_flops_per_s *= speedup;
  if (cluster.gpu.peak_flops_per_s) *cluster.gpu.peak_flops_per_s *= speedup;
}

bool describes_foundry_runs(const Scenario& scenario) {
  return scenario.measured_runs.is_object() && scenario.measured_runs.contains("table") &&
         scenario.measured_runs["table"] == "llm-foundry";
}

FoundrySetup read_foundry_setup(const Scenario& scenario) {
  const JsonReader reader(scenario.measured_runs, scenario.file, "$.measured_runs");
  reader.require_only({"table", "models", "gpus"});
  reader.choice("table", {"llm-foundry"});
  FoundrySetup setup;
  const JsonReader models = reader.object("models");
  for (const auto& [size, value] : scenario.measured_runs["models"].items()) {
    std::string path;
    const Json document = read_named_file(scenario, models, size, &path);
    const GptSpec spec = read_gpt_spec(JsonReader(document, path));
    setup.models.emplace(size, spec);
  }
  const JsonReader gpus = reader.object("gpus");
  for (const auto& [type, value] : scenario.measured_runs["gpus"].items()) {
    FoundryGpu gpu;
    gpu.chip = type;
    if (value.is_object()) {
      const JsonReader entry = gpus.object(type);
      entry.require_only({"cluster", "chip"});
      gpu.document = read_named_file(scenario, entry, "cluster", &gpu.file);
      gpu.chip = entry.optional_string("chip").value_or(type);
    } else {
      gpu.document = read_named_file(scenario, gpus, type, &gpu.file);
    }
    gpu.cluster = load_cluster(JsonReader(gpu.document, gpu.file));
    if (!gpu.cluster.gpu.memory_bytes) {
      throw InputError(gpu.file, "$.gpu.memory", "nothing",
                       "the GPU's memory (whether a run fits is the first question)");
    }
    setup.gpus.emplace(type, std::move(gpu));
  }
  if (setup.models.empty()) reader.fail("models", "at least one model size and its file");
  if (setup.gpus.empty()) reader.fail("gpus", "at least one GPU type and its cluster file");
  return setup;
}

Scenario foundry_scenario_for_run(const Scenario& base, const FoundrySetup& setup,
                                  const FoundryRun& run) {
  const auto model = setup.models.find(run.model);
  if (model == setup.models.end()) {
    std::string known;
    for (const auto& [size, spec] : setup.models) known += (known.empty() ? "" : ", ") + size;
    fail_foundry_cell(run, "Model", fmt::format("\"{}\"", run.model),
                      fmt::format("a model size the scenario {} names ({})", base.file, known));
  }
  const auto gpu = setup.gpus.find(run.gpu);
  if (gpu == setup.gpus.end()) {
    std::string known;
    for (const auto& [type, g] : setup.gpus) known += (known.empty() ? "" : ", ") + type;
    fail_foundry_cell(run, "GPU", fmt::format("\"{}\"", run.gpu),
                      fmt::format("a GPU type the scenario {} names ({})", base.file, known));
  }
  Scenario scenario = base;
  GptSpec spec = model->second;
  spec.sequence_length = run.sequence_length;
  scenario.gpt = spec;
  scenario.training = training_for(base, run);
  scenario.workload = std::make_shared<const Workload>(make_gpt(spec, scenario.training));
  // The GPU type's server, then scaled to the row's GPUs as every measured table's rows are.
  Scenario server = scenario;
  server.file = gpu->second.file;
  server.cluster = gpu->second.cluster;
  server.cluster_document = gpu->second.document;
  server.cluster_source = {gpu->second.file, "$"};
  try {
    scenario.cluster = cluster_with_ranks(server, run.gpus);
  } catch (const InputError& error) {
    fail_foundry_cell(run, "# GPUs", std::to_string(run.gpus),
                      fmt::format("GPUs the cluster of {} can hold ({}: {})", run.gpu,
                                  error.json_path(), error.expected()));
  }
  if (!mode_fits_cluster(mode_of(run), scenario.cluster)) {
    fail_foundry_cell(run, "Sharding Strategy", run.sharding,
                      "a sharding the run's GPUs allow (HYBRID_SHARD: " +
                          std::string(mode_cluster_requirement(Mode::hsdp)) + ")");
  }
  if (run.precision == "amp_fp8") {
    if (scenario.cluster.gpu.fp8_speedup == 1.0) {
      fail_foundry_cell(run, "Precision", "\"amp_fp8\"",
                        fmt::format("a precision the cluster of {} has a rate for (its gpu has "
                                    "no \"fp8_speedup\")",
                                    run.gpu));
    }
    apply_fp8(scenario.cluster);
  }
  // The model as FSDP wraps it: one unit per transformer block.
  const std::vector<int> sizes =
      unit_sizes(*scenario.workload, WrappingRule{WrappingRule::Kind::per_block});
  scenario.workload = std::make_shared<const Workload>(wrap_workload(*scenario.workload, sizes));
  return scenario;
}

Plan foundry_plan_for_run(const Scenario& run_scenario, const FoundryRun& run) {
  Plan plan;
  plan.batch_size = run.micro_batch;
  plan.accumulation_steps = run.accumulation_steps;
  const Mode mode = mode_of(run);
  for (const Operator& unit : run_scenario.workload->operators()) {
    const bool block =
        !unit.members.empty() && unit.members.front().kind == OperatorKind::attention;
    Checkpoint checkpoint = Checkpoint::none;
    if (run.activation_checkpointing && block && unit.input_activation_bytes_per_sample) {
      // Inside the FSDP unit the recompute uses the backward's gather (fused) wherever it gathers.
      checkpoint =
          mode == Mode::zdp || mode == Mode::hsdp ? Checkpoint::fused : Checkpoint::unfused;
    }
    plan.choices.push_back(OperatorChoice::whole(mode, checkpoint));
  }
  return plan;
}

FoundryPrediction predict_foundry_run(const Scenario& base, const FoundrySetup& setup,
                                      const FoundryRun& run) {
  const Scenario scenario = foundry_scenario_for_run(base, setup, run);
  const Plan plan = foundry_plan_for_run(scenario, run);
  const CostModel costs(*scenario.workload, scenario.cluster, scenario.training, scenario.cost);
  FoundryPrediction prediction;
  prediction.cost = costs.plan_cost(plan);
  prediction.memory_bytes = *scenario.cluster.gpu.memory_bytes;
  return prediction;
}

}  // namespace osdp
