#include "model/measured_runs.hpp"

#include <fmt/format.h>

#include "model/input_error.hpp"

namespace osdp {

RunSetup read_run_setup(const Scenario& scenario) {
  RunSetup setup;
  const JsonReader reader(scenario.measured_runs, scenario.file, "$.measured_runs");
  reader.require_only({"mode", "checkpoint"});
  if (reader.has("mode")) {
    setup.mode = *mode_from_name(reader.choice("mode", {"dp", "zdp", "z2"}));
  }
  if (reader.has("checkpoint")) {
    const Json& kinds = reader.raw("checkpoint");
    if (!kinds.is_array()) reader.fail("checkpoint", "a list of operator kinds");
    for (const Json& kind : kinds) {
      bool known = false;
      for (OperatorKind candidate : {OperatorKind::embedding, OperatorKind::attention,
                                     OperatorKind::mlp, OperatorKind::head}) {
        if (kind.is_string() && kind.get<std::string>() == operator_kind_name(candidate)) {
          setup.checkpointed_kinds.push_back(candidate);
          known = true;
        }
      }
      if (!known) {
        reader.fail_value("checkpoint", render_value(kind),
                          "operator kinds among embedding, attention, mlp, head");
      }
    }
  }
  return setup;
}

Cluster cluster_with_ranks(const Scenario& base, int ranks) {
  Cluster cluster = base.cluster;
  if (ranks == cluster.ranks) return cluster;
  const bool given_timing =
      base.cluster_document.is_object() && base.cluster_document.contains("collective");
  if (cluster.topology) {
    Topology& topology = *cluster.topology;
    if (topology.nodes != 1 || topology.node.kind == NodeKind::pcie) {
      throw InputError(base.file, "$.cluster.topology",
                       std::string(node_kind_name(topology.node.kind)),
                       "one node of NVLink or NVSwitch GPUs, so that a run on fewer GPUs "
                       "uses the same links");
    }
    topology.node.gpus = ranks;
    const DerivedTimings derived = derive_timings(topology);
    if (!given_timing) cluster.world = GroupTiming::uniform(derived.world);
    cluster.intra_node = cluster.world;
    cluster.inter_node = cluster.world;
  }
  cluster.ranks = ranks;
  cluster.gpus_per_node = ranks;
  return cluster;
}

Scenario scenario_for_run(const Scenario& base, const MeasuredTable& table,
                          const MeasuredRun& run) {
  if (run.tensor_parallelism != 1) {
    fail_table_cell(table, run, "tensor parallelism", std::to_string(run.tensor_parallelism),
                    "1 (tensor parallelism is not modelled yet)");
  }
  if (run.pipeline_parallelism != 1) {
    fail_table_cell(table, run, "pipeline parallelism", std::to_string(run.pipeline_parallelism),
                    "1 (pipeline parallelism is not modelled yet)");
  }
  if (!base.gpt) {
    throw InputError(base.file, "$.model", "an operator list",
                     "a GPT generator (\"family\": \"gpt\"), whose shape each table row sets");
  }
  if (run.hidden % run.heads != 0) {
    fail_table_cell(table, run, "hidden size", std::to_string(run.hidden),
                    fmt::format("a multiple of the attention heads ({})", run.heads));
  }
  Scenario scenario = base;
  GptSpec spec = *base.gpt;
  spec.name = run.model_size();
  spec.layers = run.layers;
  spec.hidden_sizes = {run.hidden};
  spec.heads = run.heads;
  spec.sequence_length = run.sequence_length;
  scenario.gpt = spec;
  scenario.training.min_batch_size = run.micro_batch;
  scenario.training.max_batch_size = run.micro_batch;
  scenario.training.accumulation_steps = run.accumulation_steps();
  scenario.workload = std::make_shared<const Workload>(make_gpt(spec, scenario.training));
  scenario.cluster = cluster_with_ranks(base, run.data_parallelism);
  return scenario;
}

Plan plan_for_run(const Scenario& run_scenario, const RunSetup& setup, const MeasuredRun& run) {
  Plan plan;
  plan.batch_size = run.micro_batch;
  for (const Operator& op : run_scenario.workload->operators()) {
    Checkpoint checkpoint = Checkpoint::none;
    for (OperatorKind kind : setup.checkpointed_kinds) {
      if (op.kind == kind && op.input_activation_bytes_per_sample) checkpoint = Checkpoint::unfused;
    }
    plan.choices.push_back(OperatorChoice::whole(setup.mode, checkpoint));
  }
  return plan;
}

}  // namespace osdp
