// Scenarios built in code for the simulator tests: a uniform chain of operators.
#pragma once

#include <memory>

#include "clusters.hpp"
#include "model/scenario.hpp"

namespace osdp::sim::test {

struct ChainSpec {
  int operators = 6;
  double parameter_bytes = 64e6;
  double activation_bytes_per_sample = 32e6;
  double workspace_bytes_per_sample = 4e6;
  double extra_bytes = 1e6;
  double compute_s_per_sample = 3e-3;  // forward one third of it
};

inline Scenario chain_scenario(const ChainSpec& spec, Cluster cluster) {
  std::vector<Operator> operators;
  for (int i = 0; i < spec.operators; ++i) {
    Operator op;
    op.name = "op" + std::to_string(i);
    op.parameter_bytes = spec.parameter_bytes;
    op.parameter_count = spec.parameter_bytes / 4;
    op.gradient_bytes = spec.parameter_bytes;
    op.optimizer_bytes = 2 * spec.parameter_bytes;
    op.activation_bytes_per_sample = spec.activation_bytes_per_sample;
    op.input_activation_bytes_per_sample = spec.activation_bytes_per_sample / 4;
    op.output_bytes_per_sample = spec.activation_bytes_per_sample / 4;
    op.workspace_bytes_per_sample = spec.workspace_bytes_per_sample;
    op.extra_bytes = spec.extra_bytes;
    op.compute_s_per_sample = spec.compute_s_per_sample;
    op.forward_compute_s_per_sample = spec.compute_s_per_sample / 3;
    operators.push_back(op);
  }
  Scenario scenario;
  scenario.name = "chain";
  scenario.workload = std::make_shared<const Workload>(Workload::chain("chain", operators));
  cluster.gpu.kernel_launch_s = 0;
  scenario.cluster = cluster;
  scenario.training.memory_limit_bytes = 1e12;
  return scenario;
}

inline Plan uniform_plan(const Scenario& scenario, int batch, OperatorChoice choice) {
  Plan plan;
  plan.batch_size = batch;
  plan.choices.assign(scenario.workload->size(), choice);
  return plan;
}

}  // namespace osdp::sim::test
