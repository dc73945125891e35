// Test instances for the search: random operator lists on paper-form clusters (deterministic
// seeds), the paper's GPT scenarios, a brute-force reference solver and the option kinds the
// tests sweep.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/scenario.hpp"
#include "model/workload.hpp"
#include "search/exact.hpp"
#include "search/options.hpp"

namespace osdp::testing {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// The model and everything it points at, kept at a stable address.
struct Instance {
  Workload workload;
  Cluster cluster;
  Training training;
  CostModel model;

  Instance(Workload w, Cluster c, Training t, CostModelKind kind)
      : workload(std::move(w)),
        cluster(std::move(c)),
        training(t),
        model(workload, cluster, training, CostSettings{kind, 2}) {}
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
};

// A small portable random source: the same numbers on every standard library.
class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  double uniform(double lo, double hi) {
    const double unit = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * unit;
  }
  double log_uniform(double lo, double hi) { return std::exp(uniform(std::log(lo), std::log(hi))); }
  int integer(int lo, int hi) {  // inclusive
    return lo + static_cast<int>(engine_() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return uniform(0.0, 1.0) < p; }

 private:
  std::mt19937_64 engine_;
};

// A paper-form operator: sizes drawn over the range of GPT layers (1e6 .. 2e8 parameters).
inline Operator random_operator(Random& random, const std::string& name) {
  Operator op;
  op.name = name;
  op.parameter_count = std::round(random.log_uniform(1e6, 2e8));
  op.parameter_bytes = 4 * op.parameter_count;
  op.gradient_bytes = 4 * op.parameter_count;
  op.optimizer_bytes = 8 * op.parameter_count;
  op.activation_bytes_per_sample = std::round(random.log_uniform(1e6, 4e8));
  if (random.chance(0.75)) {
    op.input_activation_bytes_per_sample =
        std::round(op.activation_bytes_per_sample * random.uniform(0.05, 0.4));
  }
  op.output_bytes_per_sample = std::round(random.log_uniform(1e6, 5e7));
  op.extra_bytes = random.chance(0.3) ? std::round(random.uniform(0, 2e7)) : 0.0;
  op.workspace_bytes_per_sample = random.chance(0.5) ? std::round(random.uniform(0, 2e7)) : 0.0;
  op.compute_s_per_sample = random.log_uniform(1e-4, 2e-2);
  op.splittable = random.chance(0.8);
  return op;
}

// `count` operators; a share of them (at least `least_copy_share`) are copies of a few templates
// (identical operators).
inline std::vector<Operator> random_operators(Random& random, int count,
                                              double least_copy_share = 0.0) {
  std::vector<Operator> templates;
  const int template_count = random.integer(1, 3);
  for (int t = 0; t < template_count; ++t) {
    templates.push_back(random_operator(random, "template"));
  }
  const double copy_share = random.uniform(least_copy_share, std::max(0.7, least_copy_share));
  std::vector<Operator> operators;
  for (int i = 0; i < count; ++i) {
    // Copies repeat the templates in order, as a model's layers do: an operator's time
    // depends on its neighbours' compute (what hides its gathers), so identical operators
    // with alike neighbours form one class, as in a GPT.
    Operator op =
        random.chance(copy_share) ? templates[i % template_count] : random_operator(random, "");
    op.name = "op" + std::to_string(i);
    operators.push_back(op);
  }
  return operators;
}

// Paper-form cluster: one alpha-beta for every collective. Two nodes when `nodes` is 2 (HSDP).
inline Cluster random_cluster(Random& random, int ranks, int nodes = 1) {
  Cluster cluster;
  cluster.name = "random";
  cluster.ranks = ranks;
  cluster.gpus_per_node = ranks / nodes;
  cluster.gpu.memory_bytes = 24 * kGiB;
  cluster.gpu.memory_bandwidth_Bps = random.uniform(3e11, 2e12);
  const AlphaBeta link{random.log_uniform(1e-6, 3e-5), 1.0 / random.log_uniform(5e9, 1e11)};
  cluster.world = GroupTiming::uniform(link);
  cluster.intra_node = GroupTiming::uniform(link);
  cluster.inter_node =
      GroupTiming::uniform(AlphaBeta{link.alpha_s * 2, 1.0 / random.log_uniform(2e9, 2.5e10)});
  return cluster;
}

// The option kinds the tests sweep.
struct OptionKind {
  std::string name;
  SearchSpec spec;
  int nodes = 1;  // HSDP needs two
};

// Exactness tests search with no optimality gap and no time limit (a slow machine or a
// sanitizer build must not turn a stopped search into a wrong answer).
inline SearchSpec exact_spec(SearchSpec spec) {
  spec.optimality_gap = 0;
  spec.time_limit_s = 1e9;
  return spec;
}

inline std::vector<OptionKind> option_kinds() {
  using Policy = SearchSpec::CheckpointPolicy;
  std::vector<OptionKind> kinds{
      {"paper dp,zdp", {{Mode::dp, Mode::zdp}, {1}, Policy::off}},
      {"dp,zdp,z2", {{Mode::dp, Mode::zdp, Mode::z2}, {1}, Policy::off}},
      {"dp,zdp split 4", {{Mode::dp, Mode::zdp}, {1, 4}, Policy::off}},
      {"dp,zdp split 2 ckpt auto", {{Mode::dp, Mode::zdp}, {1, 2}, Policy::automatic}},
      {"dp,zdp,z2 split 2 ckpt auto", {{Mode::dp, Mode::zdp, Mode::z2}, {1, 2}, Policy::automatic}},
      {"zdp,z2 split 4 ckpt on", {{Mode::zdp, Mode::z2}, {1, 4}, Policy::on}},
      {"dp,zdp,hsdp ckpt auto", {{Mode::dp, Mode::zdp, Mode::hsdp}, {1}, Policy::automatic}, 2},
  };
  for (OptionKind& kind : kinds) kind.spec = exact_spec(kind.spec);
  return kinds;
}

// Peak-memory range of any plan at a batch size: [least, most] over choices per operator.
struct MemoryRange {
  double least_bytes = 0;
  double most_bytes = 0;
};

inline MemoryRange memory_range(const CostModel& model, const SearchSpec& spec, int batch) {
  MemoryRange range;
  double least_transient = 0;
  double most_transient = 0;
  double least_buffer = 0;
  double most_buffer = 0;
  for (int op = 0; op < model.workload().size(); ++op) {
    double least = std::numeric_limits<double>::infinity();
    double most = 0;
    double op_least_transient = std::numeric_limits<double>::infinity();
    double op_least_buffer = std::numeric_limits<double>::infinity();
    for (const OperatorChoice& choice : enumerate_choices(model, op, spec)) {
      const OptionCost cost = model.option_cost(op, choice);
      least = std::min(least, cost.persistent_bytes.at(batch));
      most = std::max(most, cost.persistent_bytes.at(batch));
      op_least_transient = std::min(op_least_transient, cost.transient_bytes.at(batch));
      most_transient = std::max(most_transient, cost.transient_bytes.at(batch));
      op_least_buffer = std::min(op_least_buffer, cost.gather_buffer_bytes);
      most_buffer = std::max(most_buffer, cost.gather_buffer_bytes);
    }
    least_transient = std::max(least_transient, op_least_transient);
    least_buffer = std::max(least_buffer, op_least_buffer);
    range.least_bytes += least;
    range.most_bytes += most;
  }
  range.least_bytes += least_transient + model.prefetch_window_bytes(least_buffer);
  range.most_bytes += most_transient + model.prefetch_window_bytes(most_buffer);
  return range;
}

// A random instance of `operators` operators with a memory limit that binds at `batch`:
// somewhere between the least memory any plan needs and the most (sometimes below: infeasible).
// `first_operator_scale` > 1 makes the first operator an unsplittable giant, like a GPT's
// embedding: it runs last in backward, where the peak's max-term treats it apart.
inline std::unique_ptr<Instance> random_instance(std::uint64_t seed, int operators,
                                                 const OptionKind& kind, CostModelKind cost,
                                                 int batch, double least_copy_share = 0.0,
                                                 double first_operator_scale = 1.0) {
  Random random(seed);
  const int ranks = kind.nodes > 1 ? 16 : (random.chance(0.8) ? 8 : random.integer(2, 4) * 2);
  Training training;
  training.min_batch_size = 1;
  training.max_batch_size = 16;
  std::vector<Operator> chain = random_operators(random, operators, least_copy_share);
  if (first_operator_scale != 1.0) {
    Operator& first = chain.front();
    for (double* bytes : {&first.parameter_count, &first.parameter_bytes, &first.gradient_bytes,
                          &first.optimizer_bytes}) {
      *bytes = std::round(*bytes * first_operator_scale);
    }
    first.splittable = false;
  }
  auto instance =
      std::make_unique<Instance>(Workload::chain("random", std::move(chain)),
                                 random_cluster(random, ranks, kind.nodes), training, cost);
  const MemoryRange range = memory_range(instance->model, kind.spec, batch);
  const double share = random.uniform(-0.05, 0.8);
  instance->training.memory_limit_bytes =
      range.least_bytes + share * (range.most_bytes - range.least_bytes);
  return instance;
}

inline double combinations(const CostModel& model, const SearchSpec& spec);

// The largest random instance (at most 10 operators) whose brute force stays under 2e5
// combinations.
inline std::unique_ptr<Instance> brute_forceable_instance(std::uint64_t seed,
                                                          const OptionKind& kind,
                                                          CostModelKind cost, int batch,
                                                          double first_operator_scale = 1.0) {
  for (int n = 10; n > 1; --n) {
    auto instance = random_instance(seed, n, kind, cost, batch, 0.0, first_operator_scale);
    if (combinations(instance->model, kind.spec) <= 2e5) return instance;
  }
  return random_instance(seed, 1, kind, cost, batch, 0.0, first_operator_scale);
}

// Brute force: every combination of every valid choice (no pruning of any kind). Peak memory,
// written out here apart from the cost model and the search: the largest of three moments.
// (1) While an operator from the third in execution order on runs: persistent sum + their
// largest transient + the window of the largest gather buffer but the first operator's.
// (2) While the second runs: persistent sum + its transient + the window of the larger of the
// first operator's buffer and that largest buffer. (3) While the first runs its backward (last
// of all): the persistent sum less the other operators' activations that are surely freed then
// (each one's least over its options), + its transient + the window of the larger of the second
// operator's buffer and its own next sharded slice's. A moment without an operator is the
// persistent sum.
struct BruteForce {
  std::optional<double> best_time_s;
  std::vector<OperatorChoice> best;
};

inline double combinations(const CostModel& model, const SearchSpec& spec) {
  double total = 1;
  for (int op = 0; op < model.workload().size(); ++op) {
    total *= static_cast<double>(enumerate_choices(model, op, spec).size());
  }
  return total;
}

inline BruteForce brute_force(const CostModel& model, const SearchSpec& spec, int batch,
                              double limit_bytes) {
  struct Costs {
    double time_s, persistent_bytes, transient_bytes, gather_buffer_bytes, activation_bytes,
        next_slice_buffer_bytes;
  };
  const int n = model.workload().size();
  std::vector<std::vector<OperatorChoice>> choices(n);
  std::vector<std::vector<Costs>> costs(n);
  for (int op = 0; op < n; ++op) {
    choices[op] = enumerate_choices(model, op, spec);
    for (const auto& choice : choices[op]) {
      const OptionCost cost = model.option_cost(op, choice);
      costs[op].push_back({cost.time_s.at(batch), cost.persistent_bytes.at(batch),
                           cost.transient_bytes.at(batch), cost.gather_buffer_bytes,
                           batch * cost.persistent_bytes.per_sample, cost.next_slice_buffer_bytes});
    }
    if (choices[op].empty()) return {};
  }
  const int first = model.workload().execution_order().front();
  double freed = 0;
  for (int op = 0; op < n; ++op) {
    if (op == first) continue;
    double least = costs[op].front().activation_bytes;
    for (const Costs& c : costs[op]) least = std::min(least, c.activation_bytes);
    freed += least;
  }
  BruteForce result;
  std::vector<std::size_t> pick(n, 0);
  const auto& order = model.workload().execution_order();
  const int last = order.front();
  const int beside_last = order.size() > 1 ? order[1] : -1;
  while (true) {
    double time_s = 0, persistent = 0, transient = 0, buffer = 0;
    for (int op = 0; op < n; ++op) {
      const Costs& c = costs[op][pick[op]];
      time_s += c.time_s;
      persistent += c.persistent_bytes;
      if (op != last && op != beside_last) transient = std::max(transient, c.transient_bytes);
      if (op != last) buffer = std::max(buffer, c.gather_buffer_bytes);
    }
    const Costs& first = costs[last][pick[last]];
    const double others_moment =
        n <= 2 ? persistent : persistent + transient + model.prefetch_window_bytes(buffer);
    double beside_moment = persistent;
    double last_moment = persistent - freed + first.transient_bytes;
    double beside_buffer = 0;
    if (beside_last >= 0) {
      const Costs& second = costs[beside_last][pick[beside_last]];
      beside_moment += second.transient_bytes +
                       model.prefetch_window_bytes(std::max(first.gather_buffer_bytes, buffer));
      beside_buffer = second.gather_buffer_bytes;
    }
    last_moment +=
        model.prefetch_window_bytes(std::max(beside_buffer, first.next_slice_buffer_bytes));
    if (fits(std::max({others_moment, beside_moment, last_moment}), limit_bytes) &&
        (!result.best_time_s || time_s < *result.best_time_s)) {
      result.best_time_s = time_s;
      result.best.clear();
      for (int op = 0; op < n; ++op) result.best.push_back(choices[op][pick[op]]);
    }
    int op = 0;  // odometer
    while (op < n && ++pick[op] == choices[op].size()) pick[op++] = 0;
    if (op == n) break;
  }
  return result;
}

// Relative difference, for comparing optima.
inline double relative_difference(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300});
}

// --- The paper's scenarios (DESIGN section 7), built in code. ---------------------------------

// 8 x TITAN RTX (24 GiB) in one PCIe 3.0 server, in the paper's alpha-beta form.
inline Cluster titan_rtx_server() {
  Cluster cluster;
  cluster.name = "8x TITAN RTX";
  cluster.ranks = 8;
  cluster.gpus_per_node = 8;
  cluster.gpu.name = "TITAN RTX";
  cluster.gpu.memory_bytes = 24 * kGiB;
  cluster.gpu.compute_flops_per_s = 12e12;
  cluster.gpu.memory_bandwidth_Bps = 672e9;
  const AlphaBeta pcie{5e-6, 8.3e-11};
  cluster.world = GroupTiming::uniform(pcie);
  cluster.intra_node = GroupTiming::uniform(pcie);
  cluster.inter_node = GroupTiming::uniform(pcie);
  return cluster;
}

inline GptSpec nd_gpt(int layers) { return {"N&D", layers, {1536}, 16, 1024, 50257}; }
inline GptSpec ws_gpt(int layers) { return {"W&S", layers, {12288}, 16, 1024, 50257}; }
inline GptSpec ic_gpt() {
  GptSpec spec{"I&C", 24, {}, 16, 1024, 50257};
  for (int layer = 0; layer < 24; ++layer) spec.hidden_sizes.push_back(1024 * (1 + layer / 8));
  return spec;
}

inline std::unique_ptr<Instance> paper_instance(const GptSpec& gpt, double limit_bytes,
                                                CostModelKind cost) {
  Training training;
  training.memory_limit_bytes = limit_bytes;
  training.min_batch_size = 1;
  training.max_batch_size = 64;
  return std::make_unique<Instance>(make_gpt(gpt, training), titan_rtx_server(), training, cost);
}

}  // namespace osdp::testing
