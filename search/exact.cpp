#include "search/exact.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <vector>

#include "search/units_search.hpp"

namespace osdp {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// The search's wall-clock budget. Reading the clock costs more than a branch-and-bound node, so
// `passed` looks at it every 1024 calls.
class Deadline {
 public:
  explicit Deadline(double seconds)
      : end_(std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(std::min(seconds, 1e9)))) {}
  bool passed() {
    if (!passed_ && ++calls_ % 1024 == 0) passed_ = std::chrono::steady_clock::now() >= end_;
    return passed_;
  }
  bool passed_now() {
    passed_ = passed_ || std::chrono::steady_clock::now() >= end_;
    return passed_;
  }

 private:
  std::chrono::steady_clock::time_point end_;
  long long calls_ = 0;
  bool passed_ = false;
};

// A node or threshold is skipped when its bound is not below the best time by this fraction.
double pruning_tolerance(const SearchSpec& spec) { return std::max(spec.optimality_gap, 1e-12); }

// Identical operators (same options at the same costs) form one class: only how many of them
// take each option matters, which removes the symmetry the search would otherwise explore.
// The operator that runs last in backward and the one next to it enter the peak's max-terms
// apart from the others (CostModel::max_term_bytes): each is a class of its own.
enum class Role { other, last_in_backward, beside_last };

struct OperatorClass {
  std::vector<int> members;
  std::vector<CostedOption> options;
  Role role = Role::other;
};

Role role_of(const CostModel& model, int op) {
  if (op == model.last_in_backward()) return Role::last_in_backward;
  if (op == model.beside_last_in_backward()) return Role::beside_last;
  return Role::other;
}

// With a deadline, stops when it passes (the options of a 20,000-operator model take tens of
// seconds to cost) and returns no classes: the search then reports that it stopped early.
std::vector<OperatorClass> group_into_classes(const CostModel& model, const SearchSpec& spec,
                                              Deadline* deadline = nullptr) {
  std::vector<OperatorClass> classes;
  std::map<std::vector<double>, int> index_of_key;
  for (int op : model.workload().execution_order()) {
    if (deadline != nullptr && deadline->passed_now()) return {};
    std::vector<CostedOption> options = costed_options(model, op, spec);
    const Role role = role_of(model, op);
    std::vector<double> key;
    key.reserve(options.size() * 10 + 2);
    // A singled-out operator's key is its own (operator indices are >= 0).
    if (role != Role::other) key.insert(key.end(), {-1.0, static_cast<double>(op)});
    for (const auto& option : options) {
      const OptionCost& c = option.cost;
      c.time_s.append_key(key);
      key.insert(key.end(),
                 {c.persistent_bytes.fixed, c.persistent_bytes.per_sample, c.transient_bytes.fixed,
                  c.transient_bytes.per_sample, static_cast<double>(option.choice.mode),
                  static_cast<double>(option.choice.slices),
                  static_cast<double>(option.choice.sharded_slices),
                  static_cast<double>(option.choice.checkpoint)});
    }
    auto [it, inserted] = index_of_key.emplace(std::move(key), static_cast<int>(classes.size()));
    if (inserted) classes.push_back({{}, std::move(options), role});
    classes[it->second].members.push_back(op);
  }
  return classes;
}

// One option of a class at a fixed batch size.
struct Point {
  double time_s;
  double memory_bytes;  // persistent
  int option;           // index into OperatorClass::options
};

// A hull edge: moving one operator from one hull point to the next.
struct Edge {
  double delta_memory_bytes;  // > 0
  double delta_time_s;        // < 0
  double slope() const { return delta_time_s / delta_memory_bytes; }
};

// Lower convex hull of points[0..count) (sorted by memory ascending with time strictly
// descending), as the edges between consecutive hull points; `hull` is scratch space.
void hull_edges(const std::vector<Point>& points, std::size_t count, std::vector<std::size_t>& hull,
                std::vector<Edge>& edges) {
  hull.clear();
  for (std::size_t i = 0; i < count; ++i) {
    while (hull.size() >= 2) {
      const Point& a = points[hull[hull.size() - 2]];
      const Point& b = points[hull.back()];
      const Point& c = points[i];
      // Drop b when it lies on or above the segment a-c.
      const double cross = (b.memory_bytes - a.memory_bytes) * (c.time_s - a.time_s) -
                           (b.time_s - a.time_s) * (c.memory_bytes - a.memory_bytes);
      if (cross <= 0) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(i);
  }
  edges.clear();
  for (std::size_t i = 1; i < hull.size(); ++i) {
    edges.push_back({points[hull[i]].memory_bytes - points[hull[i - 1]].memory_bytes,
                     points[hull[i]].time_s - points[hull[i - 1]].time_s});
  }
}

// A class's options at one batch size, sorted by persistent memory then time, with the two
// terms the max-term thresholds filter on. Sorted once per batch size, filtered per threshold.
struct SortedOption {
  Point point;
  double transient_bytes;
  double buffer_bytes;
  double next_slice_buffer_bytes;
};
using SortedClasses = std::vector<std::vector<SortedOption>>;

SortedClasses sort_options(const std::vector<OperatorClass>& classes, int batch) {
  SortedClasses sorted(classes.size());
  for (std::size_t c = 0; c < classes.size(); ++c) {
    for (std::size_t o = 0; o < classes[c].options.size(); ++o) {
      const OptionCost& cost = classes[c].options[o].cost;
      sorted[c].push_back(
          {{cost.time_s.at(batch), cost.persistent_bytes.at(batch), static_cast<int>(o)},
           cost.transient_bytes.at(batch),
           cost.gather_buffer_bytes,
           cost.next_slice_buffer_bytes});
    }
    std::sort(sorted[c].begin(), sorted[c].end(), [](const SortedOption& a, const SortedOption& b) {
      return a.point.memory_bytes != b.point.memory_bytes
                 ? a.point.memory_bytes < b.point.memory_bytes
                 : a.point.time_s < b.point.time_s;
    });
  }
  return sorted;
}

// A class restricted to the options whose transient term fits under a threshold, at one batch
// size: its Pareto points (memory ascending, time descending) and, for each prefix of them, the
// edges of that prefix's lower hull (the branch and bound assigns options from the fastest
// down, so the operators left in a class may only use a prefix).
struct ClassAtThreshold {
  int source = 0;  // index into the operator classes
  int count = 0;
  std::vector<Point> points;
  std::vector<std::vector<Edge>> prefix_hull_edges;  // [k] = hull of points[0..k]
};

struct GlobalEdge {
  double slope;
  double delta_memory_bytes;
  double delta_time_s;
  int class_index;
};

// The subproblem for one threshold on the transient max-term.
struct Subproblem {
  double budget_bytes = 0;
  std::vector<ClassAtThreshold> classes;
  std::vector<GlobalEdge> edges;      // every class's full-hull edges, by slope
  std::vector<double> suffix_time_s;  // sum over classes >= c of count x cheapest-memory time
  std::vector<double> suffix_memory_bytes;
  std::vector<std::size_t> hull_scratch;
};

// The max-terms of peak memory (model/cost_model.hpp PeakTerms), fixed for one subproblem.
// Options are left out when their transient term (as compared below) exceeds
// `transient_bytes`; from the second operator in execution order on, when their gather buffer
// exceeds `buffer_bytes`; for the second (next to the last in backward), when its buffer exceeds
// `beside_last_buffer_bytes`; for the first (the last in backward), when its buffer exceeds
// `last_buffer_bytes`. Each moment is written as the persistent sum + a compared transient +
// window(buffer_bytes), so that the peak is at most the persistent sum + transient_bytes +
// window(buffer_bytes), with equality under the plan's own thresholds:
// - the second operator's transient is compared shifted by `beside_shift_bytes` =
//   window(max(last_buffer, buffer)) - window(buffer) (its neighbours' buffers);
// - the first operator's by window(max(beside_last_buffer, its own next slice's buffer)) +
//   `last_shift_bytes` = - window(buffer) - the other operators' activations, as freed when it
//   runs its backward. Each other operator
//   is credited the least activation any of its options keeps: exact when the search's
//   checkpointing is off or on; under `auto` the first operator's moment is over-counted by the
//   activations of the operators the plan leaves unchecked, and the search (and the paper DFS)
//   is exact for that conservative figure, which is never below the cost model's.
struct Threshold {
  double transient_bytes = 0;
  double buffer_bytes = 0;
  double beside_last_buffer_bytes = 0;
  double last_buffer_bytes = 0;
  double beside_shift_bytes = 0;
  double last_shift_bytes = 0;
  double window_per_buffer_byte = 0;  // the prefetch window is linear in its buffer
};

// Orders the classes for the branch and bound like the classic knapsack branch and bound
// orders items: the steepest time-for-memory trade first, so that the first plans it reaches
// follow the LP relaxation. In execution order, plans with many distinct operators whose
// trades are nearly equal (sharding costs about the same time per byte saved everywhere) sent
// it through millions of nodes. Keeps `sub.edges` pointing at the same classes.
void order_for_branching(Subproblem& sub) {
  const std::size_t n = sub.classes.size();
  std::vector<std::pair<double, std::size_t>> keys(n);
  for (std::size_t c = 0; c < n; ++c) {
    const std::vector<Edge>& hull = sub.classes[c].prefix_hull_edges.back();
    keys[c] = {hull.empty() ? 0.0 : hull.front().slope(), c};
  }
  std::stable_sort(keys.begin(), keys.end());
  std::vector<ClassAtThreshold> ordered;
  ordered.reserve(n);
  std::vector<int> position(n);
  for (std::size_t p = 0; p < n; ++p) {
    position[keys[p].second] = static_cast<int>(p);
    ordered.push_back(std::move(sub.classes[keys[p].second]));
  }
  sub.classes = std::move(ordered);
  for (GlobalEdge& edge : sub.edges) {
    edge.class_index = position[static_cast<std::size_t>(edge.class_index)];
  }
}

// The transient term an option is held against the threshold with.
double compared_transient(double transient_bytes, double next_slice_buffer_bytes, Role role,
                          const Threshold& threshold) {
  switch (role) {
    case Role::last_in_backward:
      return transient_bytes + threshold.last_shift_bytes +
             threshold.window_per_buffer_byte *
                 std::max(threshold.beside_last_buffer_bytes, next_slice_buffer_bytes);
    case Role::beside_last:
      return transient_bytes + threshold.beside_shift_bytes;
    case Role::other:
      break;
  }
  return transient_bytes;
}

bool buffer_allowed(double buffer_bytes, Role role, const Threshold& threshold) {
  switch (role) {
    case Role::last_in_backward:
      return buffer_bytes <= threshold.last_buffer_bytes;
    case Role::beside_last:
      return buffer_bytes <= threshold.buffer_bytes &&
             buffer_bytes <= threshold.beside_last_buffer_bytes;
    case Role::other:
      break;
  }
  return buffer_bytes <= threshold.buffer_bytes;
}

bool allowed(const SortedOption& option, Role role, const Threshold& threshold) {
  return compared_transient(option.transient_bytes, option.next_slice_buffer_bytes, role,
                            threshold) <= threshold.transient_bytes &&
         buffer_allowed(option.buffer_bytes, role, threshold);
}

// Phase 1 builds what the LP bound needs (Pareto points, full hulls); `with_prefix_hulls` adds
// the prefix hulls the branch and bound needs. Reuses `sub`'s storage from earlier thresholds.
bool build_subproblem(const std::vector<OperatorClass>& classes, const SortedClasses& sorted,
                      const Threshold& threshold, double budget_bytes, Subproblem& sub,
                      bool with_prefix_hulls) {
  sub.budget_bytes = budget_bytes;
  sub.classes.resize(classes.size());
  sub.edges.clear();
  for (std::size_t c = 0; c < classes.size(); ++c) {
    ClassAtThreshold& entry = sub.classes[c];
    entry.source = static_cast<int>(c);
    entry.count = static_cast<int>(classes[c].members.size());
    entry.points.clear();
    for (const SortedOption& option : sorted[c]) {
      if (!allowed(option, classes[c].role, threshold)) continue;
      if (entry.points.empty() || option.point.time_s < entry.points.back().time_s) {
        entry.points.push_back(option.point);
      }
    }
    if (entry.points.empty()) return false;
    // Only the full hull (the last prefix) is needed for the bound; the others are left stale.
    entry.prefix_hull_edges.resize(entry.points.size());
    for (std::size_t k = with_prefix_hulls ? 0 : entry.points.size() - 1; k < entry.points.size();
         ++k) {
      hull_edges(entry.points, k + 1, sub.hull_scratch, entry.prefix_hull_edges[k]);
    }
    for (const Edge& edge : entry.prefix_hull_edges.back()) {
      sub.edges.push_back({edge.slope(), edge.delta_memory_bytes * entry.count,
                           edge.delta_time_s * entry.count, static_cast<int>(c)});
    }
  }
  if (with_prefix_hulls) order_for_branching(sub);
  std::sort(sub.edges.begin(), sub.edges.end(),
            [](const GlobalEdge& a, const GlobalEdge& b) { return a.slope < b.slope; });
  const std::size_t n = classes.size();
  sub.suffix_time_s.assign(n + 1, 0.0);
  sub.suffix_memory_bytes.assign(n + 1, 0.0);
  for (std::size_t c = n; c-- > 0;) {
    const Point& cheapest = sub.classes[c].points.front();
    sub.suffix_time_s[c] = sub.suffix_time_s[c + 1] + sub.classes[c].count * cheapest.time_s;
    sub.suffix_memory_bytes[c] =
        sub.suffix_memory_bytes[c + 1] + sub.classes[c].count * cheapest.memory_bytes;
  }
  return true;
}

// Lower bound (LP relaxation, solved greedily along hull edges) on the time of: `remaining`
// operators of class `c` restricted to its points [0..k], plus all classes after c, within
// `budget_bytes`. Returns infinity when even the least-memory choice does not fit.
double lp_bound(const Subproblem& sub, std::size_t c, std::size_t k, int remaining,
                double budget_bytes) {
  const ClassAtThreshold& current = sub.classes[c];
  double time_s = sub.suffix_time_s[c + 1] + remaining * current.points.front().time_s;
  double memory_bytes =
      sub.suffix_memory_bytes[c + 1] + remaining * current.points.front().memory_bytes;
  if (!fits(memory_bytes, budget_bytes)) return infinity;
  double left = budget_bytes - memory_bytes;
  const std::vector<Edge>& own = current.prefix_hull_edges[k];
  std::size_t own_index = 0;
  std::size_t global_index = 0;
  while (left > 0) {
    // Next edge by slope: this class's prefix hull (times remaining) or a later class's hull.
    while (global_index < sub.edges.size() &&
           sub.edges[global_index].class_index <= static_cast<int>(c)) {
      ++global_index;
    }
    const bool has_own = own_index < own.size() && remaining > 0;
    const bool has_global = global_index < sub.edges.size();
    if (!has_own && !has_global) break;
    double delta_memory = 0;
    double delta_time = 0;
    if (has_own && (!has_global || own[own_index].slope() <= sub.edges[global_index].slope)) {
      delta_memory = own[own_index].delta_memory_bytes * remaining;
      delta_time = own[own_index].delta_time_s * remaining;
      ++own_index;
    } else {
      delta_memory = sub.edges[global_index].delta_memory_bytes;
      delta_time = sub.edges[global_index].delta_time_s;
      ++global_index;
    }
    if (delta_memory <= left) {
      time_s += delta_time;
      left -= delta_memory;
    } else {
      time_s += delta_time * (left / delta_memory);
      left = 0;
    }
  }
  return time_s;
}

// Branch and bound over classes; within a class, over how many operators take each point,
// from the fastest point down.
// Memory-time pairs already explored from one search position, kept as a Pareto staircase
// (memory ascending, time descending): a new pair that one of them dominates cannot lead to a
// better plan, since every completion of it is a completion of the dominating pair.
class ParetoArchive {
 public:
  // True when a pair with no more memory and no more time is already here; otherwise records
  // the pair (dropping those it dominates).
  bool dominated_or_add(double memory_bytes, double time_s) {
    // First entry with more memory; the one before it has the least time among those with no
    // more memory (times fall along the staircase).
    auto at = std::upper_bound(
        staircase_.begin(), staircase_.end(), memory_bytes,
        [](double memory, const Pair& pair) { return memory < pair.memory_bytes; });
    if (at != staircase_.begin() && std::prev(at)->time_s <= time_s) return true;
    // Entries from the first with at least this memory whose time is no less are dominated;
    // they are contiguous (times fall along the staircase).
    auto first = std::lower_bound(
        staircase_.begin(), staircase_.end(), memory_bytes,
        [](const Pair& pair, double memory) { return pair.memory_bytes < memory; });
    auto last = first;
    while (last != staircase_.end() && last->time_s >= time_s) ++last;
    if (first != last) {
      *first = {memory_bytes, time_s};
      staircase_.erase(first + 1, last);
    } else {
      staircase_.insert(first, {memory_bytes, time_s});
    }
    return false;
  }

 private:
  struct Pair {
    double memory_bytes;
    double time_s;
  };
  std::vector<Pair> staircase_;  // memory ascending, time descending
};

class BranchAndBound {
 public:
  BranchAndBound(const Subproblem& sub, double incumbent_time_s, double tolerance,
                 Deadline& deadline, long long& nodes)
      : sub_(sub),
        best_time_s_(incumbent_time_s),
        tolerance_(tolerance),
        deadline_(deadline),
        nodes_(nodes) {
    counts_.resize(sub.classes.size());
    std::size_t positions = 0;
    for (std::size_t c = 0; c < sub.classes.size(); ++c) {
      counts_[c].assign(sub.classes[c].points.size(), 0);
      first_position_.push_back(positions);
      positions += sub.classes[c].points.size() * (sub.classes[c].count + 1);
    }
    archives_.resize(positions);
  }

  // Returns true when a plan faster than the incumbent was found (then best_counts() is set).
  bool run() {
    if (sub_.classes.empty()) return false;
    const std::size_t last = sub_.classes[0].points.size() - 1;
    branch(0, last, sub_.classes[0].count, 0.0, 0.0);
    return found_;
  }
  double best_time_s() const { return best_time_s_; }
  const std::vector<std::vector<int>>& best_counts() const { return best_counts_; }

 private:
  void branch(std::size_t c, std::size_t k, int remaining, double time_s, double memory_bytes) {
    if (deadline_.passed()) return;
    ++nodes_;
    const double bound = time_s + lp_bound(sub_, c, k, remaining, sub_.budget_bytes - memory_bytes);
    if (!(bound < best_time_s_ * (1.0 - tolerance_))) return;
    const ClassAtThreshold& current = sub_.classes[c];
    // What is left to decide depends only on (class, point, operators left); a state that an
    // explored one dominates is cut.
    const std::size_t position =
        first_position_[c] + k * static_cast<std::size_t>(current.count + 1) + remaining;
    if (archives_[position].dominated_or_add(memory_bytes, time_s)) return;
    if (k == 0) {
      // The rest of this class takes the least-memory point.
      counts_[c][0] = remaining;
      const double next_time = time_s + remaining * current.points[0].time_s;
      const double next_memory = memory_bytes + remaining * current.points[0].memory_bytes;
      if (c + 1 == sub_.classes.size()) {
        if (fits(next_memory, sub_.budget_bytes) && next_time < best_time_s_) {
          best_time_s_ = next_time;
          best_counts_ = counts_;
          found_ = true;
        }
      } else {
        const ClassAtThreshold& next = sub_.classes[c + 1];
        branch(c + 1, next.points.size() - 1, next.count, next_time, next_memory);
      }
      counts_[c][0] = 0;
      return;
    }
    // Most operators of this class on point k that could fit, given the rest at least use
    // the least-memory point.
    const Point& point = current.points[k];
    const Point& smallest = current.points[0];
    const double rest_minimum = sub_.suffix_memory_bytes[c + 1] + remaining * smallest.memory_bytes;
    const double room = sub_.budget_bytes - memory_bytes - rest_minimum;
    int most = remaining;
    const double step = point.memory_bytes - smallest.memory_bytes;
    if (step > 0) {
      most = static_cast<int>(std::min<double>(remaining, std::floor(room / step + 1e-9)));
    }
    for (int taken = std::max(most, 0); taken >= 0; --taken) {
      counts_[c][k] = taken;
      branch(c, k - 1, remaining - taken, time_s + taken * point.time_s,
             memory_bytes + taken * point.memory_bytes);
    }
    counts_[c][k] = 0;
  }

  const Subproblem& sub_;
  double best_time_s_;
  double tolerance_;
  Deadline& deadline_;
  long long& nodes_;
  bool found_ = false;
  std::vector<std::vector<int>> counts_;
  std::vector<std::vector<int>> best_counts_;
  std::vector<std::size_t> first_position_;  // per class, into archives_
  std::vector<ParetoArchive> archives_;      // per (class, point, operators left)
};

// A feasible integer solution from the greedy LP: every class at a hull point except one,
// whose fractional move is rounded toward less memory.
std::optional<std::pair<double, std::vector<std::vector<int>>>> rounded_lp(const Subproblem& sub) {
  std::vector<std::size_t> position(sub.classes.size(), 0);  // index into the class's full hull
  // Hull point indices (into points) of each class's full hull.
  std::vector<std::vector<std::size_t>> hull_points(sub.classes.size());
  for (std::size_t c = 0; c < sub.classes.size(); ++c) {
    const auto& points = sub.classes[c].points;
    const auto& edges = sub.classes[c].prefix_hull_edges.back();
    hull_points[c].push_back(0);
    // Walk the edges back onto point indices by matching cumulative memory.
    double memory = points[0].memory_bytes;
    for (const Edge& edge : edges) {
      memory += edge.delta_memory_bytes;
      std::size_t best = 0;
      double best_gap = infinity;
      for (std::size_t p = 0; p < points.size(); ++p) {
        const double gap = std::fabs(points[p].memory_bytes - memory);
        if (gap < best_gap) {
          best_gap = gap;
          best = p;
        }
      }
      hull_points[c].push_back(best);
    }
  }
  std::vector<std::vector<int>> counts(sub.classes.size());
  for (std::size_t c = 0; c < sub.classes.size(); ++c) {
    counts[c].assign(sub.classes[c].points.size(), 0);
    counts[c][0] = sub.classes[c].count;
  }
  double time_s = sub.suffix_time_s[0];
  double left = sub.budget_bytes - sub.suffix_memory_bytes[0];
  if (!fits(sub.suffix_memory_bytes[0], sub.budget_bytes)) return std::nullopt;
  for (const GlobalEdge& edge : sub.edges) {
    const std::size_t c = static_cast<std::size_t>(edge.class_index);
    const int count = sub.classes[c].count;
    const double per_operator = edge.delta_memory_bytes / count;
    int moved = count;
    if (edge.delta_memory_bytes > left) {
      moved = std::clamp(static_cast<int>(std::floor(left / per_operator)), 0, count);
    }
    const std::size_t from = hull_points[c][position[c]];
    const std::size_t to = hull_points[c][position[c] + 1];
    counts[c][from] -= moved;
    counts[c][to] += moved;
    time_s += moved * (edge.delta_time_s / count);
    left -= moved * per_operator;
    if (moved < count) break;
    ++position[c];
  }
  return std::make_pair(time_s, counts);
}

Plan plan_from_counts(const std::vector<OperatorClass>& classes, const Subproblem& sub,
                      const std::vector<std::vector<int>>& counts, int batch, int operators) {
  Plan plan;
  plan.batch_size = batch;
  plan.choices.assign(operators, OperatorChoice{});
  for (std::size_t c = 0; c < sub.classes.size(); ++c) {
    const OperatorClass& source = classes[static_cast<std::size_t>(sub.classes[c].source)];
    std::size_t member = 0;
    for (std::size_t p = 0; p < counts[c].size(); ++p) {
      const int option = sub.classes[c].points[p].option;
      for (int taken = 0; taken < counts[c][p]; ++taken) {
        plan.choices[source.members[member++]] = source.options[option].choice;
      }
    }
  }
  return plan;
}

std::vector<double> sorted_unique(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// A candidate threshold and the least persistent memory of a plan whose options it admits.
struct ThresholdPair {
  Threshold threshold;
  double least_persistent_bytes = 0;
};

// The buffer values the operators of one role can take ({0} without any).
std::vector<double> role_buffers(const std::vector<OperatorClass>& classes, Role role) {
  std::vector<double> values;
  for (const auto& operator_class : classes) {
    if (operator_class.role != role) continue;
    for (const auto& option : operator_class.options) {
      values.push_back(option.cost.gather_buffer_bytes);
    }
  }
  if (values.empty()) values.push_back(0.0);
  return sorted_unique(std::move(values));
}

// The activations of the operators but the last in backward that are surely freed when it
// runs its backward: each one's least over its options (Threshold::last_shift_bytes).
double freed_activation_bytes(const std::vector<OperatorClass>& classes, int batch) {
  double total = 0;
  for (const auto& operator_class : classes) {
    if (operator_class.role == Role::last_in_backward) continue;
    double least = infinity;
    for (const auto& option : operator_class.options) {
      least = std::min(least, batch * option.cost.persistent_bytes.per_sample);
    }
    if (std::isfinite(least)) total += least * static_cast<double>(operator_class.members.size());
  }
  return total;
}

// Every candidate threshold at this batch size (one per combination of the buffer values the
// roles can take and transient values), with the least persistent memory of a plan whose
// options it admits. The optimum is found under the threshold its own plan attains.
std::vector<ThresholdPair> thresholds(const CostModel& model,
                                      const std::vector<OperatorClass>& classes, int batch) {
  struct Entry {
    double transient_bytes;  // as compared with the threshold
    double raw_transient_bytes;
    double buffer_bytes;
    double next_slice_buffer_bytes;
    double persistent_bytes;
    std::size_t class_index;
  };
  std::vector<Entry> base;
  std::vector<double> buffers;  // from the second operator on
  for (std::size_t c = 0; c < classes.size(); ++c) {
    for (const auto& option : classes[c].options) {
      const double transient = option.cost.transient_bytes.at(batch);
      base.push_back({transient, transient, option.cost.gather_buffer_bytes,
                      option.cost.next_slice_buffer_bytes, option.cost.persistent_bytes.at(batch),
                      c});
      if (classes[c].role != Role::last_in_backward) {
        buffers.push_back(option.cost.gather_buffer_bytes);
      }
    }
  }
  if (buffers.empty()) buffers.push_back(0.0);
  const std::vector<double> beside_values = role_buffers(classes, Role::beside_last);
  const std::vector<double> last_values = role_buffers(classes, Role::last_in_backward);
  const double freed_bytes = freed_activation_bytes(classes, batch);
  std::vector<ThresholdPair> pairs;
  std::vector<double> least(classes.size());
  std::vector<Entry> entries;
  for (double buffer : sorted_unique(std::move(buffers))) {
    for (double beside : beside_values) {
      if (beside > buffer) break;
      for (double last_buffer : last_values) {
        Threshold threshold;
        threshold.buffer_bytes = buffer;
        threshold.beside_last_buffer_bytes = beside;
        threshold.last_buffer_bytes = last_buffer;
        threshold.beside_shift_bytes = model.prefetch_window_bytes(std::max(last_buffer, buffer)) -
                                       model.prefetch_window_bytes(buffer);
        threshold.window_per_buffer_byte = model.prefetch_window_bytes(1.0);
        threshold.last_shift_bytes = -model.prefetch_window_bytes(buffer) - freed_bytes;
        entries = base;
        for (Entry& entry : entries) {
          entry.transient_bytes =
              compared_transient(entry.raw_transient_bytes, entry.next_slice_buffer_bytes,
                                 classes[entry.class_index].role, threshold);
        }
        std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
          return a.transient_bytes < b.transient_bytes;
        });
        std::fill(least.begin(), least.end(), infinity);
        std::size_t covered = 0;  // classes with an admitted option
        // The largest buffer of each threshold's kind among the options admitted so far: a
        // threshold above every buffer it could admit only takes memory (skipped, unless it is
        // the smallest value).
        double largest_buffer = 0, largest_beside = 0, largest_last = 0;
        for (std::size_t i = 0; i < entries.size(); ++i) {
          const Entry& entry = entries[i];
          const Role role = classes[entry.class_index].role;
          const bool admitted = buffer_allowed(entry.buffer_bytes, role, threshold);
          if (admitted) {
            if (role == Role::last_in_backward) {
              largest_last = std::max(largest_last, entry.buffer_bytes);
            } else {
              largest_buffer = std::max(largest_buffer, entry.buffer_bytes);
            }
            if (role == Role::beside_last) {
              largest_beside = std::max(largest_beside, entry.buffer_bytes);
            }
          }
          if (admitted && entry.persistent_bytes < least[entry.class_index]) {
            if (!std::isfinite(least[entry.class_index])) ++covered;
            least[entry.class_index] = entry.persistent_bytes;
          }
          const bool last_of_value =
              i + 1 == entries.size() || entries[i + 1].transient_bytes != entry.transient_bytes;
          if (!last_of_value || covered < classes.size()) continue;
          if (buffer > largest_buffer && buffer > 0) continue;
          if (beside > largest_beside && beside > beside_values.front()) continue;
          if (last_buffer > largest_last && last_buffer > last_values.front()) continue;
          double total = 0;
          for (std::size_t c = 0; c < classes.size(); ++c) {
            total += least[c] * static_cast<double>(classes[c].members.size());
          }
          threshold.transient_bytes = entry.transient_bytes;
          pairs.push_back({threshold, total});
        }
      }
    }
  }
  return pairs;
}

// The memory the two max-terms take from the budget.
double reserved_bytes(const CostModel& model, const Threshold& threshold) {
  return threshold.transient_bytes + model.prefetch_window_bytes(threshold.buffer_bytes);
}

// The outcome of one batch size.
struct BatchSolve {
  std::optional<ScheduledPlan> best;
  // No plan at this b is faster than this (infinity: none fits).
  double lower_bound_time_s = infinity;
  bool stopped = false;  // the deadline cut the search short
};

// Only plans faster than `cutoff_time_s` are looked for (the scheduler passes the time that
// would tie the best throughput so far); `best` is nullopt when there is none.
BatchSolve solve_classes(const CostModel& model, const std::vector<OperatorClass>& classes,
                         int batch, double limit_bytes, const SearchSpec& spec, Deadline& deadline,
                         SolveStats& stats, double cutoff_time_s = infinity) {
  struct Candidate {
    double bound;
    Threshold threshold;
  };
  std::vector<Candidate> candidates;
  Subproblem sub;
  const SortedClasses sorted = sort_options(classes, batch);
  for (const auto& [threshold, least_persistent] : thresholds(model, classes, batch)) {
    const double reserved = reserved_bytes(model, threshold);
    if (!fits(reserved, limit_bytes)) continue;
    // Most pairs leave too little budget for even the least-memory choices.
    if (!fits(least_persistent, limit_bytes - reserved)) continue;
    if (!build_subproblem(classes, sorted, threshold, limit_bytes - reserved, sub, false)) continue;
    const double bound =
        lp_bound(sub, 0, sub.classes[0].points.size() - 1, sub.classes[0].count, sub.budget_bytes);
    // lp_bound(0, ...) covers class 0 with its full hull plus all later classes.
    if (std::isfinite(bound)) candidates.push_back({bound, threshold});
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.bound < b.bound; });

  const double tolerance = pruning_tolerance(spec);
  BatchSolve solve;
  double best_time_s = cutoff_time_s;
  std::optional<Plan> best_plan;
  for (const Candidate& candidate : candidates) {
    if (!(candidate.bound < best_time_s * (1.0 - tolerance))) break;
    if (deadline.passed_now()) {
      // This threshold and the later ones (sorted by bound) are unexplored.
      solve.stopped = true;
      solve.lower_bound_time_s = candidate.bound;
      break;
    }
    ++stats.thresholds;
    build_subproblem(classes, sorted, candidate.threshold,
                     limit_bytes - reserved_bytes(model, candidate.threshold), sub, true);
    if (auto rounded = rounded_lp(sub); rounded && rounded->first < best_time_s) {
      best_time_s = rounded->first;
      best_plan = plan_from_counts(classes, sub, rounded->second, batch, model.workload().size());
    }
    BranchAndBound search(sub, best_time_s, tolerance, deadline, stats.nodes);
    if (search.run()) {
      best_time_s = search.best_time_s();
      best_plan =
          plan_from_counts(classes, sub, search.best_counts(), batch, model.workload().size());
    }
    if (deadline.passed()) {
      solve.stopped = true;
      solve.lower_bound_time_s = candidate.bound;
      break;
    }
  }
  // Everything explored was pruned against best_time_s (the cutoff when nothing was found).
  if (!candidates.empty() && std::isfinite(best_time_s)) {
    solve.lower_bound_time_s = std::min(solve.lower_bound_time_s, best_time_s * (1.0 - tolerance));
  }
  if (best_plan) solve.best = ScheduledPlan{*best_plan, model.plan_cost(*best_plan)};
  return solve;
}

double min_peak(const CostModel& model, const std::vector<OperatorClass>& classes, int batch) {
  double best = infinity;
  for (const auto& [threshold, least_persistent] : thresholds(model, classes, batch)) {
    best = std::min(best, reserved_bytes(model, threshold) + least_persistent);
  }
  return best;
}

// Fastest conceivable iteration at this batch size, ignoring memory.
double fastest_time_s(const std::vector<OperatorClass>& classes, int batch) {
  double total = 0;
  for (const auto& operator_class : classes) {
    double least = infinity;
    for (const auto& option : operator_class.options) {
      least = std::min(least, option.cost.time_s.at(batch));
    }
    total += least * static_cast<double>(operator_class.members.size());
  }
  return total;
}

}  // namespace

std::optional<ScheduledPlan> solve_batch(const CostModel& model, const SearchSpec& spec, int batch,
                                         double memory_limit_bytes, SolveStats* stats) {
  SolveStats local;
  Deadline deadline(spec.time_limit_s);
  const auto classes = group_into_classes(model, spec);
  BatchSolve solve =
      solve_classes(model, classes, batch, memory_limit_bytes, spec, deadline, local);
  if (stats != nullptr) {
    stats->nodes += local.nodes;
    stats->thresholds += local.thresholds;
    stats->stopped_early = stats->stopped_early || solve.stopped;
  }
  return std::move(solve.best);
}

double min_peak_memory_bytes(const CostModel& model, const SearchSpec& spec, int batch) {
  return min_peak(model, group_into_classes(model, spec), batch);
}

namespace {

// Largest b in [first, last] whose least peak memory fits, given that `first` fits: memory grows
// with b, so a binary search over b finds it.
int largest_fitting_batch(const CostModel& model, const std::vector<OperatorClass>& classes,
                          int first, int last, double limit_bytes) {
  int fitting = first;
  int too_large = last + 1;
  while (too_large - fitting > 1) {
    const int middle = fitting + (too_large - fitting) / 2;
    if (fits(min_peak(model, classes, middle), limit_bytes)) {
      fitting = middle;
    } else {
      too_large = middle;
    }
  }
  return fitting;
}

// Throughputs within this relative distance count as equal: the smaller batch size wins.
constexpr double kThroughputTie = 1e-12;

// The training of one micro-batch b that reaches the fixed global batch in `steps` steps.
Training fixed_micro_batch(const Training& training, int batch, int steps) {
  Training fixed = training;
  fixed.global_batch_size.reset();
  fixed.accumulation_steps = steps;
  fixed.min_batch_size = fixed.max_batch_size = batch;
  return fixed;
}

// A fixed global batch: every micro-batch b of the range that reaches it in whole accumulation
// steps m is searched with its own m (the time counts m micro-batches, the memory one); the
// plan of highest throughput (global batch / iteration time) wins, the smaller b on a tie.
SearchResult search_global_batch(const CostModel& model, const SearchSpec& spec, double limit,
                                 bool solve_every_batch) {
  const Training& training = model.training();
  SearchResult result;
  double best_throughput = 0;
  double throughput_bound = 0;
  bool bound_unknown = false;
  for (int batch = training.max_batch_size; batch >= training.min_batch_size; --batch) {
    const std::optional<int> steps = training.accumulation_for(batch, model.ranks());
    if (!steps) continue;
    const Training fixed = fixed_micro_batch(training, batch, *steps);
    const CostModel micro(model.workload(), model.cluster(), fixed, model.settings());
    SearchResult one = search(micro, spec, limit, solve_every_batch);
    result.stats.nodes += one.stats.nodes;
    result.stats.thresholds += one.stats.thresholds;
    result.stats.stopped_early = result.stats.stopped_early || one.stats.stopped_early;
    BatchPoint point;
    if (!one.per_batch.empty()) point = one.per_batch.front();
    point.batch_size = batch;
    if (point.best) point.best->plan.accumulation_steps = *steps;
    if (!one.best && one.min_memory_needed_bytes > 0) {
      // Descending b: the last one met is the smallest micro-batch's need.
      result.min_memory_needed_bytes = one.min_memory_needed_bytes;
    }
    if (one.best) {
      const double throughput = one.best->cost.throughput_samples_per_s;
      throughput_bound =
          std::max(throughput_bound, throughput / std::max(1e-12, 1.0 - one.proven_gap));
      if (throughput >= best_throughput * (1.0 - kThroughputTie)) {
        best_throughput = std::max(best_throughput, throughput);
        result.best = point.best;
      }
    } else if (one.stats.stopped_early) {
      bound_unknown = true;  // stopped before any plan: nothing bounds this b
    }
    result.per_batch.push_back(std::move(point));
  }
  std::reverse(result.per_batch.begin(), result.per_batch.end());
  if (result.best) result.min_memory_needed_bytes = 0;
  result.proven_gap =
      !result.best || bound_unknown
          ? 1.0
          : std::max(0.0, 1.0 - best_throughput / std::max(throughput_bound, best_throughput));
  return result;
}

}  // namespace

namespace {
SearchResult search_device_memory(const CostModel& model, const SearchSpec& spec,
                                  std::optional<double> memory_limit_bytes, bool solve_every_batch);
}  // namespace

SearchResult search(const CostModel& model, const SearchSpec& spec,
                    std::optional<double> memory_limit_bytes, bool solve_every_batch) {
  SearchResult result = search_device_memory(model, spec, memory_limit_bytes, solve_every_batch);
  // Host memory is checked, not searched over: offloaded states are model states, so a plan that
  // fits the device but not the host falls back to keeping them on the device.
  if (spec.offload == SearchSpec::OffloadPolicy::off || !result.best ||
      model.host_memory_fits(result.best->cost.host_memory_bytes)) {
    return result;
  }
  SearchSpec without = spec;
  without.offload = SearchSpec::OffloadPolicy::off;
  const double needed = result.best->cost.host_memory_bytes;
  result = search_device_memory(model, without, memory_limit_bytes, solve_every_batch);
  result.host_memory_note = fmt::format(
      "the best plan offloaded {:.4g} GiB a node, more than the host's {:.4g} GiB: searched "
      "again without offload (the search does not trade host memory against time)",
      needed / (1 << 30), *model.cluster().host.memory_bytes / (1 << 30));
  return result;
}

namespace {
SearchResult search_device_memory(const CostModel& model, const SearchSpec& spec,
                                  std::optional<double> memory_limit_bytes,
                                  bool solve_every_batch) {
  if (spec.units != SearchSpec::UnitsPolicy::off) {
    return search_over_units(model, spec, memory_limit_bytes, solve_every_batch);
  }
  const double limit = memory_limit_bytes ? *memory_limit_bytes : model.memory_limit_bytes();
  if (model.training().global_batch_size) {
    return search_global_batch(model, spec, limit, solve_every_batch);
  }
  Deadline deadline(spec.time_limit_s);
  const Training& training = model.training();
  const auto classes = group_into_classes(model, spec, &deadline);
  SearchResult result;
  if (classes.empty() && model.workload().size() > 0) {
    // The time limit passed while the options were costed: no plan, nothing proven.
    result.stats.stopped_early = true;
    result.proven_gap = 1.0;
    return result;
  }
  const int first = training.min_batch_size;
  if (first > training.max_batch_size) return result;
  const double least_memory = min_peak(model, classes, first);
  if (!fits(least_memory, limit)) {
    result.min_memory_needed_bytes = least_memory;
    return result;
  }
  const int last = largest_fitting_batch(model, classes, first, training.max_batch_size, limit);
  // Largest b first: throughput mostly grows with b, so the best plan tends to be found at once
  // and its throughput cuts the search at every smaller b (most are pruned unsolved).
  result.per_batch.resize(static_cast<std::size_t>(last - first + 1));
  double best_throughput = 0;
  double throughput_bound = 0;  // no plan at any b is faster than this
  for (int batch = last; batch >= first; --batch) {
    BatchPoint& point = result.per_batch[static_cast<std::size_t>(batch - first)];
    point.batch_size = batch;
    const bool cut = !solve_every_batch && result.best;
    const double tie_throughput = best_throughput * (1.0 - kThroughputTie);
    const double best_possible =
        model.ranks() * model.training().samples_per_rank(batch) / fastest_time_s(classes, batch);
    if (cut && best_possible < tie_throughput) {
      point.pruned_by_bound = true;
      continue;
    }
    // Only a plan that at least ties the best throughput so far matters. Past the deadline
    // this only bounds the b's best time by the LP relaxation (for the proven gap).
    const double cutoff_s =
        cut ? model.ranks() * model.training().samples_per_rank(batch) / tie_throughput : infinity;
    BatchSolve solve =
        solve_classes(model, classes, batch, limit, spec, deadline, result.stats, cutoff_s);
    point.best = std::move(solve.best);
    point.stopped_early = solve.stopped;
    point.pruned_by_bound = cut && !point.best && !solve.stopped;
    throughput_bound =
        std::max(throughput_bound, model.ranks() * model.training().samples_per_rank(batch) /
                                       solve.lower_bound_time_s);
    if (point.best && point.best->cost.throughput_samples_per_s >= tie_throughput) {
      best_throughput = std::max(best_throughput, point.best->cost.throughput_samples_per_s);
      result.best = point.best;
    }
  }
  for (const BatchPoint& point : result.per_batch) {
    result.stats.stopped_early = result.stats.stopped_early || point.stopped_early;
  }
  if (result.best) {
    result.proven_gap =
        std::max(0.0, 1.0 - best_throughput / std::max(throughput_bound, best_throughput));
  } else {
    result.proven_gap = 1.0;
  }
  return result;
}
}  // namespace

std::vector<ScheduledPlan> top_plans(const SearchResult& result, int count) {
  std::vector<ScheduledPlan> plans;
  for (const auto& point : result.per_batch) {
    if (point.best) plans.push_back(*point.best);
  }
  std::sort(plans.begin(), plans.end(), [](const ScheduledPlan& a, const ScheduledPlan& b) {
    return a.cost.throughput_samples_per_s > b.cost.throughput_samples_per_s;
  });
  if (static_cast<int>(plans.size()) > count) plans.resize(static_cast<std::size_t>(count));
  return plans;
}

}  // namespace osdp
