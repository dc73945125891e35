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

namespace {

// More GPUs than one node of the scenario's cluster has: nodes of its kind, its NICs between.
Cluster scaled_out(const Scenario& base, int ranks) {
  Cluster cluster = base.cluster;
  if (!cluster.topology || cluster.topology->nodes != 1 ||
      cluster.topology->nic.bandwidth_Bps <= 0) {
    throw InputError(base.cluster_source.file, base.cluster_source.path("topology"),
                     fmt::format("{} GPUs", ranks),
                     fmt::format("at most the cluster's {} GPUs, or a one-node topology with its "
                                 "\"nic\" (and \"nics_per_node\") to scale it out to more nodes",
                                 cluster.ranks));
  }
  Topology& topology = *cluster.topology;
  if (ranks % topology.node.gpus != 0) {
    throw InputError(base.cluster_source.file, base.cluster_source.path("topology.gpus_per_node"),
                     std::to_string(topology.node.gpus),
                     fmt::format("a divisor of the run's {} GPUs", ranks));
  }
  topology.nodes = ranks / topology.node.gpus;
  derive_group_timings(cluster);
  cluster.ranks = ranks;
  cluster.gpus_per_node = topology.node.gpus;
  return cluster;
}

}  // namespace

Cluster cluster_with_ranks(const Scenario& base, int ranks) {
  Cluster cluster = base.cluster;
  if (ranks == cluster.ranks) return cluster;
  if (ranks > cluster.ranks) return scaled_out(base, ranks);
  const bool given_timing =
      base.cluster_document.is_object() && base.cluster_document.contains("collective");
  if (cluster.topology) {
    Topology& topology = *cluster.topology;
    if (topology.nodes != 1 || topology.node.kind == NodeKind::pcie) {
      throw InputError(base.cluster_source.file, base.cluster_source.path("topology"),
                       std::string(node_kind_name(topology.node.kind)),
                       "one node of NVLink or NVSwitch GPUs, so that a run on fewer GPUs "
                       "uses the same links");
    }
    topology.node.gpus = ranks;
    const DerivedTimings derived = derive_timings(topology);
    if (!given_timing) cluster.world = group_timing_for(cluster, derived.world, 1, 0.0);
    cluster.intra_node = cluster.world;
    cluster.inter_node = cluster.world;
  }
  cluster.ranks = ranks;
  cluster.gpus_per_node = ranks;
  return cluster;
}

bool uses_model_parallelism(const MeasuredRun& run) {
  return run.tensor_parallelism != 1 || run.pipeline_parallelism != 1;
}

ParallelRun parallel_run_for(const RunSetup& setup, const MeasuredRun& run) {
  ParallelRun parallel;
  parallel.degrees = {run.tensor_parallelism, run.pipeline_parallelism, run.data_parallelism, 0};
  parallel.micro_batch = run.micro_batch;
  parallel.micro_batches = run.accumulation_steps();
  parallel.schedule = PipelineSchedule::one_f_one_b;
  parallel.checkpointed_kinds = setup.checkpointed_kinds;
  return parallel;
}

ParallelIterationCost parallel_cost_for_run(const Scenario& run_scenario, const RunSetup& setup,
                                            const MeasuredRun& run) {
  return parallel_iteration_cost(*run_scenario.gpt, run_scenario.training, run_scenario.cluster,
                                 run_scenario.cost, parallel_run_for(setup, run),
                                 run_scenario.file);
}

Scenario scenario_for_run(const Scenario& base, const MeasuredTable& table,
                          const MeasuredRun& run) {
  const int gpus = run.tensor_parallelism * run.pipeline_parallelism * run.data_parallelism;
  if (run.heads % run.tensor_parallelism != 0) {
    fail_table_cell(table, run, "tensor parallelism", std::to_string(run.tensor_parallelism),
                    fmt::format("a divisor of the attention heads ({})", run.heads));
  }
  if (run.layers < run.pipeline_parallelism) {
    fail_table_cell(table, run, "pipeline parallelism", std::to_string(run.pipeline_parallelism),
                    fmt::format("at most the layers ({})", run.layers));
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
  scenario.cluster = cluster_with_ranks(base, gpus);
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
