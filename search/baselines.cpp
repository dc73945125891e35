// Baselines of earlier planners, implemented as their authors describe them.
//
// paper_dfs: OSDP's Algorithm 1 (Jiang et al., IJCAI 2023), a depth-first search over the
// operators in execution order trying every option, pruned when the partial plan's memory
// (the two moments of model/cost_model.hpp PeakTerms over the operators so far; every term
// only grows deeper in the tree) already exceeds the limit, or its time already reaches the
// best complete plan found. When it completes it is exact for the peak memory the exact search
// works with (search/exact.cpp, Threshold), including the max-terms.
//
// integer_mb_knapsack: the dynamic program of the reference code (Youhe-Jiang/
// IJCAI2023-OptimalShardedDataParallel, Search_Engine.py / Scheduler.py): each option's memory is
// truncated to whole MB (np.trunc(...).astype(int64); MB = 2^20 bytes as torch reports it), the
// budget is device memory - 800 MB (`extra_overhead`), and the DP minimises the summed time over
// (operator, MB used), "MB used" meaning at most that many. Each option's memory is its
// persistent memory at the batch size (the per-layer memory the reference profiles); the
// transient max-term is not modelled: the fixed 800 MB reserve is the reference's stand-in for
// it and for the runtime's own overhead. Differences from the reference, none of which changes
// the optimum it defines: the reference keeps f[v][s] (last operator's strategy s) and takes the
// minimum over the previous strategy for every s; we take that minimum once per v (same values,
// one factor S less work). It updates one array in place in decreasing v, which reads entries
// already overwritten for this operator when an option rounds to 0 MB; we keep one row per
// operator. It is a baseline: not exact for our model (rounding down can overrun the budget by
// up to one MB per operator, and the transient term is ignored).
#include "search/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "search/options.hpp"

namespace osdp {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// One option of one operator, evaluated at the batch size.
struct OptionAtBatch {
  OperatorChoice choice;
  double time_s = 0;
  double persistent_bytes = 0;
  double transient_bytes = 0;
  double gather_buffer_bytes = 0;
  OptionCost cost;
};

std::vector<OptionAtBatch> options_at_batch(const CostModel& model, int op, const SearchSpec& spec,
                                            int batch) {
  std::vector<OptionAtBatch> options;
  for (const OperatorChoice& choice : enumerate_choices(model, op, spec)) {
    const OptionCost cost = model.option_cost(op, choice);
    options.push_back({choice, cost.time_s.at(batch), cost.persistent_bytes.at(batch),
                       cost.transient_bytes.at(batch), cost.gather_buffer_bytes, cost});
  }
  return options;
}

ScheduledPlan scheduled(const CostModel& model, int batch, std::vector<OperatorChoice> choices) {
  Plan plan;
  plan.batch_size = batch;
  plan.choices = std::move(choices);
  PlanCost cost = model.plan_cost(plan);
  return {std::move(plan), cost};
}

// ---------------------------------------------------------------------------------------------
// The paper's DFS.

class PaperDfs {
 public:
  PaperDfs(const CostModel& model, const SearchSpec& spec, int batch, double limit_bytes,
           std::chrono::duration<double> time_cap)
      : model_(model),
        limit_bytes_(limit_bytes),
        deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(time_cap)),
        order_(model.workload().execution_order()),
        batch_(batch) {
    for (int op : order_) {
      options_.push_back(options_at_batch(model, op, spec, batch));
      double least = kInfinity;
      for (const OptionAtBatch& option : options_.back()) {
        least = std::min(least, batch * option.cost.persistent_bytes.per_sample);
      }
      least_activation_bytes_.push_back(least);
    }
    current_.resize(order_.size());
  }

  void run() { visit(0, {}); }

  bool found() const { return best_time_s_ < kInfinity; }
  bool timed_out() const { return timed_out_; }
  long long nodes() const { return nodes_; }

  // The best plan's choices, indexed like the workload's operators.
  std::vector<OperatorChoice> best_choices() const {
    std::vector<OperatorChoice> choices(order_.size());
    for (std::size_t depth = 0; depth < order_.size(); ++depth) {
      choices[order_[depth]] = options_[depth][best_[depth]].choice;
    }
    return choices;
  }

 private:
  static constexpr long long kClockEvery = 4096;

  bool out_of_time() {
    if (!timed_out_ && nodes_ % kClockEvery == 0 && Clock::now() >= deadline_) timed_out_ = true;
    return timed_out_;
  }

  // The partial plan's sums and maxima. The last operator in backward's moment counts, as the
  // exact search does, each other operator's activations beyond the least its options keep
  // (`unfreed_bytes`; see search/exact.cpp, Threshold).
  struct Partial {
    double time_s = 0;
    PeakTerms terms;
    double unfreed_bytes = 0;
  };

  double peak_bytes(const Partial& partial) const {
    return std::max({model_.others_moment_bytes(partial.terms),
                     model_.beside_moment_bytes(partial.terms),
                     model_.last_moment_bytes(partial.terms) + partial.unfreed_bytes});
  }

  void visit(std::size_t depth, const Partial& partial) {
    ++nodes_;
    if (out_of_time()) return;
    // Every term only grows deeper in the tree: prune when memory is already exceeded.
    if (!fits(peak_bytes(partial), limit_bytes_)) return;
    if (partial.time_s >= best_time_s_) return;  // no better than the best
    if (depth == order_.size()) {
      best_time_s_ = partial.time_s;
      best_ = current_;
      return;
    }
    const int op = order_[depth];
    const bool other = op != model_.last_in_backward();
    const auto& options = options_[depth];
    for (std::size_t o = 0; o < options.size(); ++o) {
      current_[depth] = o;
      const OptionAtBatch& option = options[o];
      const double unfreed =
          other ? batch_ * option.cost.persistent_bytes.per_sample - least_activation_bytes_[depth]
                : 0.0;
      visit(depth + 1, {partial.time_s + option.time_s,
                        model_.add_peak_terms(partial.terms, op, option.cost, batch_),
                        partial.unfreed_bytes + unfreed});
      if (timed_out_) return;
    }
  }

  const CostModel& model_;
  double limit_bytes_;
  Clock::time_point deadline_;
  const std::vector<int>& order_;
  int batch_;
  std::vector<std::vector<OptionAtBatch>> options_;  // by depth (execution order)
  std::vector<double> least_activation_bytes_;       // by depth: the least any option keeps
  std::vector<std::size_t> current_;
  std::vector<std::size_t> best_;
  double best_time_s_ = kInfinity;
  long long nodes_ = 0;
  bool timed_out_ = false;
};

// ---------------------------------------------------------------------------------------------
// The reference code's integer-MB DP.

constexpr double kBytesPerMb = 1024.0 * 1024.0;
constexpr double kReservedMb = 800.0;  // the reference's `extra_overhead`

// Memory of an option in whole MB, truncated as the reference does.
std::int64_t truncated_mb(double bytes) {
  return static_cast<std::int64_t>(std::trunc(bytes / kBytesPerMb));
}

struct MbOption {
  std::int64_t memory_mb = 0;
  double time_s = 0;
};

// Rows of the DP: best[v] = least time of the operators so far using at most v MB.
class MbKnapsack {
 public:
  MbKnapsack(std::vector<std::vector<MbOption>> options, std::int64_t budget_mb)
      : options_(std::move(options)), width_(budget_mb + 1) {}

  // Fills the table; false when no assignment fits the budget.
  bool solve() {
    std::vector<double> previous(width_, 0.0);  // no operator yet: time 0 for any v
    std::vector<double> current(width_);
    choice_.assign(options_.size() * width_, -1);
    for (std::size_t i = 0; i < options_.size(); ++i) {
      fill_row(i, previous, current);
      std::swap(previous, current);
    }
    best_time_s_ = previous[width_ - 1];
    return best_time_s_ < kInfinity;
  }

  // Option index per operator (in the order given), following the choices back from the budget.
  std::vector<int> backtrack() const {
    std::vector<int> picks(options_.size());
    std::int64_t v = width_ - 1;
    for (std::size_t i = options_.size(); i-- > 0;) {
      const int o = choice_[i * width_ + v];
      picks[i] = o;
      v -= options_[i][o].memory_mb;
    }
    return picks;
  }

  long long cells() const {
    long long total = 0;
    for (const auto& row : options_) total += static_cast<long long>(row.size()) * width_;
    return total;
  }

 private:
  void fill_row(std::size_t i, const std::vector<double>& previous, std::vector<double>& current) {
    const auto& options = options_[i];
    int* marks = &choice_[i * width_];
    for (std::int64_t v = 0; v < width_; ++v) {
      double best = kInfinity;
      int pick = -1;
      for (std::size_t o = 0; o < options.size(); ++o) {
        const std::int64_t rest = v - options[o].memory_mb;
        if (rest < 0) continue;
        const double candidate = previous[rest] + options[o].time_s;
        if (candidate < best) {
          best = candidate;
          pick = static_cast<int>(o);
        }
      }
      current[v] = best;
      marks[v] = pick;
    }
  }

  std::vector<std::vector<MbOption>> options_;
  std::int64_t width_;
  std::vector<int> choice_;  // [operator][v]: the option taken
  double best_time_s_ = kInfinity;
};

}  // namespace

BaselineResult paper_dfs(const CostModel& model, const SearchSpec& spec, int batch,
                         double memory_limit_bytes, std::chrono::duration<double> time_cap) {
  PaperDfs dfs(model, spec, batch, memory_limit_bytes, time_cap);
  dfs.run();
  BaselineResult result;
  result.timed_out = dfs.timed_out();
  result.nodes = dfs.nodes();
  if (dfs.found()) result.best = scheduled(model, batch, dfs.best_choices());
  return result;
}

BaselineResult integer_mb_knapsack(const CostModel& model, const SearchSpec& spec, int batch,
                                   double device_memory_bytes) {
  BaselineResult result;
  const auto budget_mb =
      static_cast<std::int64_t>(std::floor(device_memory_bytes / kBytesPerMb - kReservedMb));
  if (budget_mb < 0) return result;

  const int n = model.workload().size();
  std::vector<std::vector<OptionAtBatch>> options(n);
  std::vector<std::vector<MbOption>> rounded(n);
  for (int op = 0; op < n; ++op) {
    options[op] = options_at_batch(model, op, spec, batch);
    for (const OptionAtBatch& option : options[op]) {
      rounded[op].push_back({truncated_mb(option.persistent_bytes), option.time_s});
    }
  }
  MbKnapsack knapsack(std::move(rounded), budget_mb);
  const bool found = knapsack.solve();
  result.nodes = knapsack.cells();
  if (!found) return result;

  const std::vector<int> picks = knapsack.backtrack();
  std::vector<OperatorChoice> choices(n);
  for (int op = 0; op < n; ++op) choices[op] = options[op][picks[op]].choice;
  result.best = scheduled(model, batch, std::move(choices));
  return result;
}

}  // namespace osdp
