// The exact search against an independent MILP solved by COIN-OR CBC, on random instances of
// 20 to 200 operators, every option kind, both cost models. Per batch size the MILP is the
// multiple-choice knapsack with the max-terms of peak memory: the largest transient term plus
// the prefetch window (p = units_in_flight - 1 times the largest gather buffer), in three
// moments (model/cost_model.hpp PeakTerms): L, the operator that runs last in backward (the first
// in execution order), and B, the one next to it, are apart. Operators with identical options
// (same choices, same costs at this batch size) form a class c of m_c members; the test finds
// the classes itself, L and B each a class of its own. Binary variables per operator would make
// CBC explore every permutation of identical operators, so the MILP counts them instead:
//   min  sum_{c,o} time_{c,o} y_{c,o}
//   s.t. sum_o y_{c,o} = m_c                        for every class c
//        y_{c,o} - m_c u_{c,o} <= 0                  u_{c,o} = 1 when option o is used in c
//        transient_{c,o} u_{c,o} - z <= 0            z >= the largest transient (c not L, B)
//        transient_{L,o} u_{L,o} - zl <= 0           zl >= L's transient, zb >= B's likewise
//        buffer_{c,o} u_{c,o} - w <= 0               w >= the largest buffer in use (c not L)
//        buffer_{L,o} u_{L,o} - q <= 0, w - q <= 0   q >= the larger of L's buffer and w
//        buffer_{B,o} u_{B,o} - v <= 0               v >= B's gather buffer and L's own next
//        next_{L,o} u_{L,o} - v <= 0                 sharded slice's buffer
//        P + z + p w <= limit                        P = sum_{c,o} persistent_{c,o} y_{c,o}
//        P + zb + p q <= limit
//        P + zl + p v <= limit + F
//        y_{c,o} in {0..m_c}, u_{c,o} binary, z, zl, zb, w, v, q >= 0
//   where F is the activation of the operators but L that is surely freed when L runs its
//   backward (each one's least over its options; search/exact.cpp, Threshold). With fewer than
//   three operators the moments without an operator drop their window.
// With every m_c = 1 this is the per-operator binary MCKP (x = y = u). On the instances of up
// to 50 operators the per-operator binary formulation (with symmetry-breaking rows) is solved
// as well and must agree. Time is in milliseconds and memory in GiB inside the MILP. The
// default instances have about 10 distinct operators (real models have 3 or 4); the hidden
// "[.milp-stress]" test has up to 40% distinct ones, where CBC and the exact search both take
// minutes on some instances.
#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "instances.hpp"
#include "search/exact.hpp"

namespace osdp::testing {
namespace {

constexpr double kMsPerS = 1e3;

struct CbcDeleter {
  void operator()(Cbc_Model* model) const { Cbc_deleteModel(model); }
};
using CbcModel = std::unique_ptr<Cbc_Model, CbcDeleter>;

struct MilpResult {
  bool proven = false;  // proven optimal or proven infeasible
  std::optional<double> time_s;
  std::vector<OperatorChoice> choices;  // the MILP's plan, by operator
};

struct MilpOption {
  OperatorChoice choice;
  double time_ms = 0;
  double persistent_gib = 0;
  double transient_gib = 0;
  double buffer_gib = 0;
  double activation_gib = 0;
  double next_slice_gib = 0;
  bool operator==(const MilpOption&) const = default;
};

// Operators with identical options at the batch size.
// L (runs last in backward) and B (next to it) enter the max-terms apart from the others.
enum class Role { other, last, beside_last };

struct OperatorClass {
  std::vector<MilpOption> options;
  std::vector<int> members;
  Role role = Role::other;
};

Role role_of(const CostModel& cost_model, int op) {
  const auto& order = cost_model.workload().execution_order();
  if (op == order.front()) return Role::last;
  if (order.size() > 1 && op == order[1]) return Role::beside_last;
  return Role::other;
}

std::vector<OperatorClass> operator_classes(const CostModel& cost_model, const SearchSpec& spec,
                                            int batch) {
  std::vector<OperatorClass> classes;
  for (int op = 0; op < cost_model.workload().size(); ++op) {
    std::vector<MilpOption> options;
    for (const OperatorChoice& choice : enumerate_choices(cost_model, op, spec)) {
      const OptionCost cost = cost_model.option_cost(op, choice);
      options.push_back(
          {choice, cost.time_s.at(batch) * kMsPerS, cost.persistent_bytes.at(batch) / kGiB,
           cost.transient_bytes.at(batch) / kGiB, cost.gather_buffer_bytes / kGiB,
           batch * cost.persistent_bytes.per_sample / kGiB, cost.next_slice_buffer_bytes / kGiB});
    }
    const Role role = role_of(cost_model, op);
    auto same = std::find_if(classes.begin(), classes.end(), [&](const OperatorClass& c) {
      return role == Role::other && c.role == Role::other && c.options == options;
    });
    if (same == classes.end()) {
      classes.push_back({std::move(options), {op}, role});
    } else {
      same->members.push_back(op);
    }
  }
  return classes;
}

CbcModel quiet_model() {
  CbcModel model(Cbc_newModel());
  Cbc_setLogLevel(model.get(), 0);
  Cbc_setParameter(model.get(), "log", "0");
  Cbc_setParameter(model.get(), "slog", "0");
  Cbc_setParameter(model.get(), "primalT", "1e-9");
  Cbc_setAllowableGap(model.get(), 1e-9);
  // CBC preprocessing only slows these small models down (measured: 40 s -> 3 s in all).
  Cbc_setParameter(model.get(), "preprocess", "off");
  return model;
}

// p: the prefetch window per GiB of the largest gather buffer (linear in it).
double prefetch_per_gib(const CostModel& cost_model) {
  return cost_model.prefetch_window_bytes(kGiB) / kGiB;
}

// The max variables: z (largest transient of the operators but L and B), zl (L's
// transient), zb (B's), w (largest gather buffer in use but L's), v (B's gather buffer), q (the
// larger of L's buffer and w: B's neighbours).
struct MaxColumns {
  int z = 0, zl = 0, zb = 0, w = 0, v = 0, q = 0;
};

MaxColumns add_max_columns(Cbc_Model* m, int& columns) {
  MaxColumns max;
  for (int* column : {&max.z, &max.zl, &max.zb, &max.w, &max.v, &max.q}) {
    *column = columns++;
    Cbc_addCol(m, "", 0.0, std::numeric_limits<double>::max(), 0.0, 0, 0, nullptr, nullptr);
  }
  // w <= q
  const int cols[] = {max.w, max.q};
  const double coefficients[] = {1.0, -1.0};
  Cbc_addRow(m, "", 2, cols, coefficients, 'L', 0.0);
  return max;
}

// sum_k coefficients_k x_k - max <= 0 for the option columns x of one operator or option.
void add_max_row(Cbc_Model* m, std::vector<int> cols, std::vector<double> coefficients, int max) {
  cols.push_back(max);
  coefficients.push_back(-1.0);
  Cbc_addRow(m, "", static_cast<int>(cols.size()), cols.data(), coefficients.data(), 'L', 0.0);
}

// The rows that make the max variables bound the terms of the options in `cols`.
void add_max_rows(Cbc_Model* m, const std::vector<int>& cols, const std::vector<double>& transient,
                  const std::vector<double>& buffer, const std::vector<double>& next_slice,
                  Role role, const MaxColumns& max) {
  switch (role) {
    case Role::last:
      add_max_row(m, cols, transient, max.zl);
      add_max_row(m, cols, buffer, max.q);
      add_max_row(m, cols, next_slice, max.v);  // its own next slice beside it
      break;
    case Role::beside_last:
      add_max_row(m, cols, transient, max.zb);
      add_max_row(m, cols, buffer, max.w);
      add_max_row(m, cols, buffer, max.v);
      break;
    case Role::other:
      add_max_row(m, cols, transient, max.z);
      add_max_row(m, cols, buffer, max.w);
      break;
  }
}

// The activations of the operators but L that are surely freed when L runs its backward: each
// class's least over its options, per member.
double freed_gib(const std::vector<OperatorClass>& classes) {
  double total = 0;
  for (const OperatorClass& c : classes) {
    if (c.role == Role::last || c.options.empty()) continue;
    double least = c.options.front().activation_gib;
    for (const MilpOption& option : c.options) least = std::min(least, option.activation_gib);
    total += least * static_cast<double>(c.members.size());
  }
  return total;
}

// The three moments: persistent sum + z + p w <= limit (with no third operator: persistent
// sum <= limit), persistent sum + zb + p q <= limit (a lone operator: persistent sum <= limit)
// and persistent sum + zl + p v <= limit + the surely freed activations.
void add_memory_rows(Cbc_Model* m, std::vector<int> columns, std::vector<double> coefficients,
                     const CostModel& cost_model, const MaxColumns& max, double limit_bytes,
                     const std::vector<OperatorClass>& classes) {
  const double p = prefetch_per_gib(cost_model);
  const int n = cost_model.workload().size();
  struct Moment {
    int transient, buffer;
    bool applies;
    double freed_gib;
  };
  const Moment moments[] = {{max.z, max.w, n >= 3, 0.0},
                            {max.zb, max.q, n >= 2, 0.0},
                            {max.zl, max.v, true, freed_gib(classes)}};
  const std::size_t persistent = columns.size();
  for (const Moment& moment : moments) {
    columns.resize(persistent);
    coefficients.resize(persistent);
    columns.insert(columns.end(), {moment.transient, moment.buffer});
    coefficients.insert(coefficients.end(), {1.0, moment.applies ? p : 0.0});
    Cbc_addRow(m, "memory", static_cast<int>(columns.size()), columns.data(), coefficients.data(),
               'L', limit_bytes / kGiB + moment.freed_gib);
  }
}

// Per-operator binaries x_{i,o}; consecutive members a < b of a class keep their option
// indices in order (sum_o o x_{a,o} <= sum_o o x_{b,o}), which removes the permutations of
// identical operators without excluding any plan's cost.
MilpResult solve_binary_milp(const CostModel& cost_model, const SearchSpec& spec, int batch,
                             double limit_bytes) {
  const std::vector<OperatorClass> classes = operator_classes(cost_model, spec, batch);
  CbcModel model = quiet_model();
  Cbc_Model* m = model.get();
  const int n = cost_model.workload().size();
  std::vector<std::vector<int>> x(n);
  std::vector<const OperatorClass*> class_of(n);
  int columns = 0;
  for (const OperatorClass& c : classes) {
    for (int op : c.members) {
      class_of[op] = &c;
      for (const MilpOption& option : c.options) {
        Cbc_addCol(m, "", 0.0, 1.0, option.time_ms, 1, 0, nullptr, nullptr);
        x[op].push_back(columns++);
      }
    }
  }
  const MaxColumns max = add_max_columns(m, columns);
  std::vector<int> memory_columns;
  std::vector<double> memory_coefficients;
  for (int op = 0; op < n; ++op) {
    const auto& options = class_of[op]->options;
    const std::vector<double> ones(options.size(), 1.0);
    Cbc_addRow(m, "", static_cast<int>(ones.size()), x[op].data(), ones.data(), 'E', 1.0);
    std::vector<double> transient;
    std::vector<double> buffer;
    std::vector<double> next_slice;
    for (const MilpOption& option : options) {
      transient.push_back(option.transient_gib);
      buffer.push_back(option.buffer_gib);
      next_slice.push_back(option.next_slice_gib);
      memory_coefficients.push_back(option.persistent_gib);
    }
    memory_columns.insert(memory_columns.end(), x[op].begin(), x[op].end());
    add_max_rows(m, x[op], transient, buffer, next_slice, class_of[op]->role, max);
  }
  for (const OperatorClass& c : classes) {
    for (std::size_t k = 0; k + 1 < c.members.size(); ++k) {
      std::vector<int> cols = x[c.members[k]];
      cols.insert(cols.end(), x[c.members[k + 1]].begin(), x[c.members[k + 1]].end());
      std::vector<double> order;
      for (std::size_t o = 0; o < c.options.size(); ++o) order.push_back(static_cast<double>(o));
      for (std::size_t o = 0; o < c.options.size(); ++o) order.push_back(-static_cast<double>(o));
      Cbc_addRow(m, "", static_cast<int>(cols.size()), cols.data(), order.data(), 'L', 0.0);
    }
  }
  add_memory_rows(m, std::move(memory_columns), std::move(memory_coefficients), cost_model, max,
                  limit_bytes, classes);
  Cbc_solve(m);
  MilpResult result;
  result.proven = Cbc_isProvenOptimal(m) || Cbc_isProvenInfeasible(m);
  if (!Cbc_isProvenOptimal(m)) return result;
  result.time_s = Cbc_getObjValue(m) / kMsPerS;
  const double* solution = Cbc_getColSolution(m);
  for (int op = 0; op < n; ++op) {
    std::size_t taken = 0;
    for (std::size_t o = 0; o < x[op].size(); ++o) {
      if (solution[x[op][o]] > solution[x[op][taken]]) taken = o;
    }
    result.choices.push_back(class_of[op]->options[taken].choice);
  }
  return result;
}

MilpResult solve_milp(const CostModel& cost_model, const SearchSpec& spec, int batch,
                      double limit_bytes) {
  const std::vector<OperatorClass> classes = operator_classes(cost_model, spec, batch);
  CbcModel model = quiet_model();
  Cbc_Model* m = model.get();
  std::vector<std::vector<int>> count_column(classes.size());  // y_{c,o}
  int columns = 0;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const double members = static_cast<double>(classes[c].members.size());
    for (const MilpOption& option : classes[c].options) {
      Cbc_addCol(m, "", 0.0, members, option.time_ms, 1, 0, nullptr, nullptr);
      count_column[c].push_back(columns++);
    }
  }
  const MaxColumns max = add_max_columns(m, columns);
  std::vector<int> memory_columns;
  std::vector<double> memory_coefficients;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const auto& options = classes[c].options;
    const double members = static_cast<double>(classes[c].members.size());
    const std::vector<double> ones(options.size(), 1.0);
    Cbc_addRow(m, "", static_cast<int>(ones.size()), count_column[c].data(), ones.data(), 'E',
               members);
    for (std::size_t o = 0; o < options.size(); ++o) {
      const int y = count_column[c][o];
      memory_columns.push_back(y);
      memory_coefficients.push_back(options[o].persistent_gib);
      if (options[o].transient_gib <= 0 && options[o].buffer_gib <= 0) continue;
      const int u = columns++;
      Cbc_addCol(m, "", 0.0, 1.0, 0.0, 1, 0, nullptr, nullptr);
      const int link_columns[] = {y, u};
      const double link[] = {1.0, -members};
      Cbc_addRow(m, "", 2, link_columns, link, 'L', 0.0);
      add_max_rows(m, {u}, {options[o].transient_gib}, {options[o].buffer_gib},
                   {options[o].next_slice_gib}, classes[c].role, max);
    }
  }
  add_memory_rows(m, std::move(memory_columns), std::move(memory_coefficients), cost_model, max,
                  limit_bytes, classes);

  Cbc_solve(m);
  MilpResult result;
  result.proven = Cbc_isProvenOptimal(m) || Cbc_isProvenInfeasible(m);
  if (!Cbc_isProvenOptimal(m)) return result;
  result.time_s = Cbc_getObjValue(m) / kMsPerS;
  const double* solution = Cbc_getColSolution(m);
  result.choices.resize(cost_model.workload().size());
  for (std::size_t c = 0; c < classes.size(); ++c) {
    std::size_t member = 0;
    for (std::size_t o = 0; o < classes[c].options.size(); ++o) {
      const auto count = static_cast<std::size_t>(std::llround(solution[count_column[c][o]]));
      for (std::size_t k = 0; k < count && member < classes[c].members.size(); ++k) {
        result.choices[classes[c].members[member++]] = classes[c].options[o].choice;
      }
    }
  }
  return result;
}

}  // namespace

TEST_CASE("CBC solves a hand-checked MILP", "[search][milp]") {
  // Two operators, paper model: both DP does not fit, one ZDP does; the faster of the two
  // single-ZDP plans shards the smaller operator.
  std::vector<Operator> operators(2);
  const double parameters[] = {1e8, 2e8};
  for (int i = 0; i < 2; ++i) {
    Operator& op = operators[i];
    op.name = "op" + std::to_string(i);
    op.parameter_count = parameters[i];
    op.parameter_bytes = 4 * parameters[i];
    op.gradient_bytes = 4 * parameters[i];
    op.optimizer_bytes = 8 * parameters[i];
    op.compute_s_per_sample = 1e-3;
  }
  Cluster cluster;
  cluster.ranks = 8;
  cluster.gpus_per_node = 8;
  cluster.world = GroupTiming::uniform(AlphaBeta{5e-6, 8.3e-11});
  Training training;
  Instance instance(Workload::chain("two", operators), cluster, training, CostModelKind::paper);
  const SearchSpec spec = exact_spec({});
  // 16 bytes x (1e8 / 8 + 2e8) = 3.4e9 <= limit < 16 bytes x 3e8 and < 16 x (1e8 + 2e8 / 8).
  const MilpResult milp = solve_milp(instance.model, spec, 1, 3.5e9);
  REQUIRE(milp.time_s);
  REQUIRE(milp.choices.size() == 2);
  CHECK(milp.choices[0].mode == Mode::zdp);
  CHECK(milp.choices[1].mode == Mode::dp);
  const auto exact = solve_batch(instance.model, spec, 1, 3.5e9);
  REQUIRE(exact);
  CHECK(relative_difference(exact->cost.iteration_time_s, *milp.time_s) <= 1e-9);
  CHECK_FALSE(solve_milp(instance.model, spec, 1, 0.5e9).time_s);  // below 16 x 3e8 / 8
}

namespace {

struct CrossCheck {
  int feasible = 0;
  int infeasible = 0;
  double milp_s = 0;
  double exact_s = 0;
};

// One random instance per (size, option kind); `least_copy_share(n)` sets how many operators
// are copies of a few templates.
CrossCheck cross_check(const std::vector<int>& sizes, double (*least_copy_share)(int),
                       std::uint64_t seed_salt, double first_operator_scale = 1.0) {
  CrossCheck tally;
  std::uint64_t seed = 0;
  for (int n : sizes) {
    for (const OptionKind& kind : option_kinds()) {
      ++seed;
      const CostModelKind cost = seed % 2 == 0 ? CostModelKind::paper : CostModelKind::extended;
      const int batch = 1 + static_cast<int>((seed * 7) % 16);
      auto instance = random_instance(seed * 6151 + seed_salt, n, kind, cost, batch,
                                      least_copy_share(n), first_operator_scale);
      const double limit = *instance->training.memory_limit_bytes;
      INFO("kind " << kind.name << ", cost " << cost_model_name(cost) << ", seed " << seed << ", n "
                   << n << ", b " << batch << ", limit " << limit << " bytes");
      const auto t0 = std::chrono::steady_clock::now();
      const auto exact = solve_batch(instance->model, kind.spec, batch, limit);
      const auto t1 = std::chrono::steady_clock::now();
      const MilpResult milp = solve_milp(instance->model, kind.spec, batch, limit);
      const auto t2 = std::chrono::steady_clock::now();
      tally.exact_s += std::chrono::duration<double>(t1 - t0).count();
      tally.milp_s += std::chrono::duration<double>(t2 - t1).count();
      REQUIRE(milp.proven);
      REQUIRE(exact.has_value() == milp.time_s.has_value());
      if (!exact) {
        ++tally.infeasible;
        continue;
      }
      ++tally.feasible;
      CHECK(relative_difference(exact->cost.iteration_time_s, *milp.time_s) <= 1e-6);
      CHECK(fits(exact->cost.peak_memory_bytes, limit));
      // The MILP's own plan, evaluated by the cost model, fits too (CBC tolerances aside).
      const PlanCost milp_plan = instance->model.plan_cost(Plan{batch, milp.choices, 0, {}});
      CHECK(milp_plan.peak_memory_bytes <= limit * (1 + 1e-7));
      CHECK(relative_difference(milp_plan.iteration_time_s, *milp.time_s) <= 1e-6);
      if (n <= 50) {
        // The per-operator binary formulation agrees too.
        const MilpResult binary = solve_binary_milp(instance->model, kind.spec, batch, limit);
        REQUIRE(binary.time_s);
        CHECK(relative_difference(*binary.time_s, *milp.time_s) <= 1e-6);
      }
    }
  }
  return tally;
}

// About 10 distinct operators whatever the size, as in real models (a GPT has 3 or 4).
double model_like_copies(int n) { return std::max(0.0, 1.0 - 10.0 / n); }
// Up to 40% distinct operators: CBC needs minutes on some of these (and the exact search too).
double few_copies(int) { return 0.6; }

}  // namespace

TEST_CASE("exact search equals the CBC MILP optimum, 20 to 200 operators", "[search][milp][slow]") {
  const CrossCheck tally = cross_check({20, 50, 100, 150, 200}, model_like_copies, 101);
  WARN("MILP cross-check: " << tally.feasible << " feasible, " << tally.infeasible
                            << " infeasible; CBC " << tally.milp_s << " s, exact search "
                            << tally.exact_s << " s");
  CHECK(tally.feasible >= 25);
  CHECK(tally.infeasible >= 1);
}

// The peak's max-term as it was before the operator that runs last in backward was treated
// apart: every transient beside the window of the plan's largest gather buffer.
double uniform_window_peak(const CostModel& model, const Plan& plan) {
  double persistent = 0, transient = 0, buffer = 0;
  for (int op = 0; op < model.workload().size(); ++op) {
    const OptionCost cost = model.option_cost(op, plan.choices[op]);
    persistent += cost.persistent_bytes.at(plan.batch_size);
    transient = std::max(transient, cost.transient_bytes.at(plan.batch_size));
    buffer = std::max(buffer, cost.gather_buffer_bytes);
  }
  return persistent + transient + model.prefetch_window_bytes(buffer);
}

TEST_CASE("an embedding-like first operator: exact search = brute force = CBC",
          "[search][milp][slow]") {
  // The first operator (unsplittable, 10-40x the others' states) runs last in backward with only
  // its neighbour's buffer beside it: the max-term's second branch decides many of these.
  int feasible = 0;
  int decided_by_last = 0;  // optima that the uniform window would have ruled out
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    const OptionKind kind = option_kinds()[seed % option_kinds().size()];
    const int batch = 1 + static_cast<int>((seed * 5) % 12);
    const double scale = 10.0 + 30.0 * static_cast<double>(seed % 4) / 3.0;
    auto instance =
        brute_forceable_instance(seed * 4099, kind, CostModelKind::extended, batch, scale);
    const double limit = *instance->training.memory_limit_bytes;
    INFO("kind " << kind.name << ", seed " << seed << ", b " << batch << ", n "
                 << instance->workload.size() << ", limit " << limit);
    const BruteForce brute = brute_force(instance->model, kind.spec, batch, limit);
    const auto exact = solve_batch(instance->model, kind.spec, batch, limit);
    const MilpResult milp = solve_milp(instance->model, kind.spec, batch, limit);
    REQUIRE(milp.proven);
    REQUIRE(exact.has_value() == brute.best_time_s.has_value());
    REQUIRE(exact.has_value() == milp.time_s.has_value());
    if (!exact) continue;
    ++feasible;
    CHECK(relative_difference(exact->cost.iteration_time_s, *brute.best_time_s) <= 1e-9);
    CHECK(relative_difference(exact->cost.iteration_time_s, *milp.time_s) <= 1e-6);
    CHECK(fits(exact->cost.peak_memory_bytes, limit));
    if (!fits(uniform_window_peak(instance->model, exact->plan), limit)) ++decided_by_last;
  }
  CHECK(feasible >= 8);
  CHECK(decided_by_last >= 2);
  const CrossCheck tally = cross_check({20, 50}, model_like_copies, 307, 20.0);
  CHECK(tally.feasible >= 8);
}

// Hidden (run with "[.milp-stress]"): many distinct operators.
TEST_CASE("exact search equals the CBC MILP optimum, many distinct operators",
          "[search][.milp-stress]") {
  const CrossCheck tally = cross_check({20, 50, 100, 150, 200}, few_copies, 11);
  WARN("MILP stress: " << tally.feasible << " feasible, " << tally.infeasible << " infeasible; CBC "
                       << tally.milp_s << " s, exact search " << tally.exact_s << " s");
  CHECK(tally.feasible >= 25);
}

}  // namespace osdp::testing
