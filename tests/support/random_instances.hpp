// Random planning instances for exactness tests: explicit operator lists (some operators
// repeated, to exercise equivalence classes) on a paper-form cluster. Deterministic per seed.
#pragma once

#include <memory>
#include <random>

#include "model/cost_model.hpp"
#include "model/scenario.hpp"

namespace osdp::exactness {

struct Instance {
  std::shared_ptr<Workload> workload;
  std::shared_ptr<Cluster> cluster;
  std::shared_ptr<Training> training;
  CostSettings settings;

  CostModel model() const { return CostModel(*workload, *cluster, *training, settings); }
};

inline Instance random_instance(unsigned seed, int operators, CostModelKind kind, int nodes = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto log_uniform = [&](double low, double high) { return low * std::pow(high / low, unit(rng)); };
  std::vector<Operator> ops;
  for (int i = 0; i < operators; ++i) {
    if (i > 0 && unit(rng) < 0.3) {  // a copy of an earlier operator
      Operator copy = ops[static_cast<std::size_t>(unit(rng) * ops.size())];
      copy.name = "op" + std::to_string(i);
      ops.push_back(copy);
      continue;
    }
    Operator op;
    op.name = "op" + std::to_string(i);
    op.parameter_bytes = log_uniform(1e6, 4e8);
    op.parameter_count = op.parameter_bytes / 4;
    op.gradient_bytes = op.parameter_bytes;
    op.optimizer_bytes = 2 * op.parameter_bytes;
    op.activation_bytes_per_sample = log_uniform(1e6, 2e8);
    if (unit(rng) < 0.8)
      op.input_activation_bytes_per_sample = op.activation_bytes_per_sample * unit(rng) * 0.3;
    op.output_bytes_per_sample = log_uniform(1e5, 5e7);
    op.extra_bytes = unit(rng) < 0.3 ? log_uniform(1e5, 1e8) : 0.0;
    op.workspace_bytes_per_sample = unit(rng) < 0.3 ? log_uniform(1e5, 5e7) : 0.0;
    op.compute_s_per_sample = log_uniform(1e-4, 2e-2);
    op.splittable = unit(rng) < 0.8;
    ops.push_back(op);
  }
  Instance instance;
  instance.workload = std::make_shared<Workload>(Workload::chain("random", std::move(ops)));
  auto cluster = std::make_shared<Cluster>();
  const int ranks_choices[] = {2, 4, 8};
  cluster->gpus_per_node = ranks_choices[static_cast<int>(unit(rng) * 3)];
  cluster->ranks = cluster->gpus_per_node * nodes;
  cluster->gpu.memory_bandwidth_Bps = 6e11;
  cluster->gpu.kernel_launch_s = 5e-6;
  const AlphaBeta link{log_uniform(1e-6, 3e-5), 1.0 / log_uniform(5e9, 1e11)};
  cluster->world = GroupTiming::uniform(link);
  cluster->intra_node = GroupTiming::uniform({link.alpha_s / 2, link.beta_s_per_byte / 4});
  cluster->inter_node = GroupTiming::uniform({link.alpha_s * 2, link.beta_s_per_byte * 2});
  instance.cluster = cluster;
  instance.training = std::make_shared<Training>();
  instance.settings.kind = kind;
  return instance;
}

}  // namespace osdp::exactness
