#include "sim/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "sim/program.hpp"

namespace osdp::sim {
namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

// The constants in the fit's units: s per TFLOP (rates), ms (fixed, floor), s per TB (traffic).
// The linear ones first (a four-element theta, as earlier fits wrote, means no traffic and no
// floor).
enum Constant {
  layer_rate,
  head_rate,
  layer_fixed,
  edge_fixed,
  layer_traffic,  // s per TB of saved activations (a transformer call's memory-bound work)
  pipeline_pass,  // ms per forward or backward pass of a pipeline stage, beside its compute
  layer_floor,
  constants_count
};
constexpr int linear_count = layer_floor;  // constants a call's law is linear in
constexpr int floor_count = constants_count - linear_count;

double constant(const std::vector<double>& theta, int g) {
  return g < static_cast<int>(theta.size()) ? theta[g] : 0.0;
}

std::vector<FitConstant> describe_constants(const std::vector<double>& theta) {
  auto rate = [](double seconds_per_unit) {
    return seconds_per_unit > 0 ? 1.0 / seconds_per_unit : infinity;
  };
  return {
      {"layer rate (attention, MLP)", "TFLOP/s", rate(theta[layer_rate])},
      {"head rate (LM head + loss)", "TFLOP/s", rate(theta[head_rate])},
      {"layer fixed per forward call (backward: 2x)", "ms", theta[layer_fixed]},
      {"embedding / head fixed per forward call (backward: 2x)", "ms", theta[edge_fixed]},
      {"layer activation traffic (saved bytes; backward: 2x)", "TB/s", rate(theta[layer_traffic])},
      {"pipeline stage overhead per forward or backward pass", "ms", theta[pipeline_pass]},
      {"layer host floor per forward call (backward: 2x)", "ms", theta[layer_floor]}};
}

// One kind's forward law in the fit's units (its backward: twice the fixed part, the floor,
// and the activation bytes, at the same rates).
struct KindLaw {
  double fixed_ms = 0;
  double seconds_per_tflop = 0;  // 0: no FLOP rate
  double floor_ms = 0;
  double seconds_per_tb = 0;  // activation traffic; 0: none
};

KindLaw layer_law(const std::vector<double>& theta) {
  return {constant(theta, layer_fixed), constant(theta, layer_rate), constant(theta, layer_floor),
          constant(theta, layer_traffic)};
}

ComputeLaw law(const KindLaw& kind, double scale) {
  ComputeLaw result;
  result.fixed_s = scale * kind.fixed_ms * 1e-3;
  result.flops_per_s = kind.seconds_per_tflop > 0 ? 1e12 / kind.seconds_per_tflop : infinity;
  result.host_floor_s = scale * kind.floor_ms * 1e-3;
  if (kind.seconds_per_tb > 0) result.activation_bytes_per_s = 1e12 / kind.seconds_per_tb;
  return result;
}

// A backward runs two MatMuls per forward MatMul: twice the calls' fixed part and twice the
// kernels the host launches, at the same rates (the operator counts its backward's activation
// bytes twice itself).
OperatorCompute phases(const KindLaw& kind) { return {law(kind, 1.0), law(kind, 2.0)}; }

// Time of an iteration whose items run one after another: what the simulator gives for a plan
// without overlap (all DP, gradients all-reduced after the backward), with uncontended rings.
double item_time_s(const ProgramItem& item, const Cluster& cluster) {
  return item.collective ? cluster.world.time_s(item.kind, item.bytes, cluster.ranks) : item.work_s;
}

std::vector<double> item_times_s(const Scenario& run, const Plan& plan, const Cluster& cluster,
                                 const SimOptions& options) {
  const CostModel model(*run.workload, cluster, run.training, run.cost);
  const Program program = build_program(model, plan, options);
  std::vector<double> times;
  for (const ProgramItem& item : program.items) times.push_back(item_time_s(item, cluster));
  return times;
}

double predict(const RowModel& row, const std::vector<double>& theta) {
  double total = row.base_s;
  for (int g = 0; g < linear_count; ++g) total += row.features[g] * theta[g];
  for (const FlooredCalls& calls : row.floored) {
    double law = 0;
    double floor = 0;
    for (int g = 0; g < linear_count; ++g) law += calls.features[g] * theta[g];
    for (int f = 0; f < floor_count; ++f) {
      floor += calls.floor_features[f] * theta[linear_count + f];
    }
    total += calls.count * std::max(floor, law);
  }
  return total;
}

// The measured times and each row's weight in the least squares.
struct Targets {
  std::vector<double> time_s;
  std::vector<double> weight;
};

// Weighted sum of squared relative errors: what the fit minimises.
double objective(const std::vector<RowModel>& rows, const Targets& measured,
                 const std::vector<int>& use, const std::vector<double>& theta) {
  double total = 0;
  for (int r : use) {
    const double error = (predict(rows[r], theta) - measured.time_s[r]) / measured.time_s[r];
    total += measured.weight[r] * error * error;
  }
  return total;
}

// Which calls the floor holds up under theta (true: the floor; per row, per floored group).
using Regimes = std::vector<std::vector<bool>>;

Regimes regimes_under(const std::vector<RowModel>& rows, const std::vector<double>& theta) {
  Regimes regimes;
  for (const RowModel& row : rows) {
    std::vector<bool> floored;
    for (const FlooredCalls& calls : row.floored) {
      double law = 0;
      double floor = 0;
      for (int g = 0; g < linear_count; ++g) law += calls.features[g] * theta[g];
      for (int f = 0; f < floor_count; ++f) {
        floor += calls.floor_features[f] * theta[linear_count + f];
      }
      floored.push_back(floor > law);
    }
    regimes.push_back(std::move(floored));
  }
  return regimes;
}

// With every call's regime fixed the time is linear in the constants: weighted NNLS on it.
// Lower bounds (rates at most the peak) are shifted out; constants in `held` keep their value.
struct Bounds {
  std::vector<double> lower;  // per constant, in the fit's units
  std::vector<bool> held;     // not fitted: keep theta's value
};

std::vector<double> solve_regimes(const std::vector<RowModel>& rows, const Targets& measured,
                                  const std::vector<int>& use, const Regimes& regimes,
                                  const Bounds& bounds, const std::vector<double>& theta) {
  // A row's time: base + columns . theta, the columns being its features under the regimes.
  auto columns_of = [&](int r) {
    const RowModel& row = rows[r];
    std::vector<double> columns(constants_count, 0.0);
    for (int g = 0; g < linear_count; ++g) columns[g] = row.features[g];
    for (std::size_t k = 0; k < row.floored.size(); ++k) {
      const FlooredCalls& calls = row.floored[k];
      if (regimes[r][k]) {
        for (int f = 0; f < floor_count; ++f) {
          columns[linear_count + f] += calls.count * calls.floor_features[f];
        }
      } else {
        for (int g = 0; g < linear_count; ++g) columns[g] += calls.count * calls.features[g];
      }
    }
    return columns;
  };
  // The fitted variable is theta_g - fixed part (the lower bound, or all of a held constant).
  std::vector<double> offset(constants_count);
  for (int g = 0; g < constants_count; ++g) offset[g] = bounds.held[g] ? theta[g] : bounds.lower[g];
  // Relative residuals: divide each row by its measurement. Columns scaled to unit maximum
  // (NNLS is invariant to it; the normal equations are better conditioned).
  std::vector<std::vector<double>> raw;
  std::vector<double> b;
  std::vector<double> scale(constants_count, 0.0);
  for (int r : use) {
    std::vector<double> columns = columns_of(r);
    double target = measured.time_s[r] - rows[r].base_s;
    for (int g = 0; g < constants_count; ++g) {
      target -= columns[g] * offset[g];
      columns[g] = bounds.held[g] ? 0.0 : columns[g] / measured.time_s[r];
    }
    // Weighted least squares: each row's equation times the square root of its weight.
    const double root_weight = std::sqrt(measured.weight[r]);
    for (int g = 0; g < constants_count; ++g) {
      columns[g] *= root_weight;
      scale[g] = std::max(scale[g], std::abs(columns[g]));
    }
    raw.push_back(std::move(columns));
    b.push_back(target / measured.time_s[r] * root_weight);
  }
  for (auto& line : raw) {
    for (int g = 0; g < constants_count; ++g) line[g] = scale[g] > 0 ? line[g] / scale[g] : 0.0;
  }
  std::vector<double> x = non_negative_least_squares(raw, b);
  for (int g = 0; g < constants_count; ++g) {
    x[g] = offset[g] + (scale[g] > 0 ? x[g] / scale[g] : 0.0);
  }
  return x;
}

// Alternates between the calls' regimes under theta and the least squares under those regimes
// until the regimes repeat; returns the best theta seen (by the true, max-law objective).
std::vector<double> alternate(const std::vector<RowModel>& rows, const Targets& measured,
                              const std::vector<int>& use, const Bounds& bounds,
                              std::vector<double> theta) {
  std::vector<double> best = theta;
  double best_objective = objective(rows, measured, use, theta);
  std::vector<Regimes> seen;
  for (int iteration = 0; iteration < 50; ++iteration) {
    const Regimes regimes = regimes_under(rows, theta);
    if (std::find(seen.begin(), seen.end(), regimes) != seen.end()) break;
    seen.push_back(regimes);
    theta = solve_regimes(rows, measured, use, regimes, bounds, theta);
    const double value = objective(rows, measured, use, theta);
    if (value < best_objective) {
      best_objective = value;
      best = theta;
    }
  }
  return best;
}

// The max law is not convex in the constants: start from a grid of floors (0, then 1 us to
// 10 ms per forward call, geometric), fit the rest at each, keep the best, then let the floor
// move too. Deterministic; without floored calls (or a table the floor does not help) the
// floor stays zero and the fit is the plain least squares.
std::vector<double> solve_weighted(const std::vector<RowModel>& rows, const Targets& measured,
                                   const std::vector<int>& use, const Bounds& bounds) {
  bool any_floored = false;
  for (int r : use) any_floored = any_floored || !rows[r].floored.empty();
  Bounds held_floors = bounds;
  for (int f = 0; f < floor_count; ++f) held_floors.held[linear_count + f] = true;

  std::vector<double> start = bounds.lower;
  for (int f = 0; f < floor_count; ++f) start[linear_count + f] = 0.0;
  std::vector<double> best = alternate(rows, measured, use, held_floors, start);
  double best_objective = objective(rows, measured, use, best);
  if (!any_floored) return best;
  for (double floor_ms = 1e-3; floor_ms <= 10.0; floor_ms *= 1.1) {
    std::vector<double> guess = best;
    for (int f = 0; f < floor_count; ++f) guess[linear_count + f] = floor_ms;
    const std::vector<double> theta = alternate(rows, measured, use, held_floors, guess);
    const double value = objective(rows, measured, use, theta);
    if (value < best_objective) {
      best_objective = value;
      best = theta;
    }
  }
  return alternate(rows, measured, use, bounds, best);
}

Bounds bounds_for(const Cluster& cluster) {
  Bounds bounds{std::vector<double>(constants_count, 0.0),
                std::vector<bool>(constants_count, false)};
  // No rate above the hardware's peak: at least 1 / peak seconds per TFLOP.
  if (cluster.gpu.peak_flops_per_s) {
    bounds.lower[layer_rate] = 1e12 / *cluster.gpu.peak_flops_per_s;
    bounds.lower[head_rate] = 1e12 / *cluster.gpu.peak_flops_per_s;
  }
  return bounds;
}

// Six significant digits: the written cluster does not change with the last bits of a solve.
double rounded(double value) { return std::stod(fmt::format("{:.6g}", value)); }

Json cluster_document_with(const Json& document, const std::vector<double>& theta,
                           std::optional<double> peak_flops_per_s) {
  Json cluster = document;
  Json& gpu = cluster["gpu"];
  if (!gpu.is_object()) gpu = Json::object();
  auto law_json = [&](const KindLaw& kind, double scale) {
    Json json = {{"fixed", rounded(scale * kind.fixed_ms * 1e-3)}};
    if (kind.seconds_per_tb > 0) json["activation_bandwidth"] = rounded(1e12 / kind.seconds_per_tb);
    if (kind.seconds_per_tflop > 0) {
      // A rate fitted at the peak stays at it, whatever the last bits of 1 / (1 / peak).
      const double rate = rounded(1e12 / kind.seconds_per_tflop);
      json["rate"] = peak_flops_per_s ? std::min(rate, *peak_flops_per_s) : rate;
    }
    if (kind.floor_ms > 0) json["host_floor"] = rounded(scale * kind.floor_ms * 1e-3);
    return json;
  };
  auto kind_json = [&](const KindLaw& kind) {
    return Json{{"forward", law_json(kind, 1.0)}, {"backward", law_json(kind, 2.0)}};
  };
  const KindLaw edge{constant(theta, edge_fixed)};
  const KindLaw head{constant(theta, edge_fixed), constant(theta, head_rate)};
  gpu["operator_compute"] = {{"embedding", kind_json(edge)},
                             {"attention", kind_json(layer_law(theta))},
                             {"mlp", kind_json(layer_law(theta))},
                             {"head", kind_json(head)}};
  if (constant(theta, pipeline_pass) > 0) {
    gpu["pipeline_pass"] = rounded(constant(theta, pipeline_pass) * 1e-3);
  } else {
    gpu.erase("pipeline_pass");
  }
  return cluster;
}

// `times` alike compute calls into a row: their features (per constant: the time one unit of it
// adds) go to the row's linear part, or, where a floor can hold them up, to the group of calls
// with the same features.
using CallGroups = std::map<std::vector<double>, int>;
void add_call(RowModel& row, CallGroups& group_of, const std::vector<double>& features,
              bool floored, double times) {
  if (!floored) {
    for (int g = 0; g < linear_count; ++g) row.features[g] += times * features[g];
    return;
  }
  const auto [it, inserted] = group_of.emplace(features, static_cast<int>(row.floored.size()));
  if (inserted) {
    row.floored.push_back({0.0,
                           {features.begin(), features.begin() + linear_count},
                           {features.begin() + linear_count, features.end()}});
  }
  row.floored[it->second].count += times;
}

// A row with tensor or pipeline parallelism: its iteration is the schedule's critical path plus
// the gradient reduction and optimizer step after it (model/parallel_iteration). With the path
// found under `theta` the time is linear in the path's calls' laws: the calls on it, each as
// often as the path crosses its pass, make the row's model, exact at `theta` and a lower bound
// elsewhere (another path may become longer); the fit re-finds the paths under its result.
// Calls of operators alike (same kind, phase, FLOPs and activation bytes: every layer of a
// uniform GPT) take the same time under any constants. What one such call takes with every
// constant zero (base) and what one unit of each constant adds: the same whatever the
// constants' values, so computed once per row (FeatureCache).
using CallKind = std::tuple<OperatorKind, bool, double, double, double>;
struct CallFeatures {
  double base_s = 0;
  std::vector<double> features;
  bool floored = false;
};
using FeatureCache = std::map<CallKind, CallFeatures>;

RowModel parallel_row_model(const Scenario& run_scenario, const RunSetup& setup,
                            const MeasuredRun& run, const std::vector<double>& theta,
                            FeatureCache& cache) {
  const Cluster& base_cluster = run_scenario.cluster;
  Scenario at_theta = run_scenario;
  at_theta.cluster = cluster_with_constants(base_cluster, theta);
  const ParallelIterationCost cost = parallel_cost_for_run(at_theta, setup, run);
  RowModel row;
  row.features.assign(linear_count, 0.0);
  row.base_s = cost.iteration_time_s - cost.pipeline_s;
  const PipelineTimeline& path = cost.timeline;
  for (std::size_t b = 0; b < path.critical_transfers.size(); ++b) {
    row.base_s += path.critical_transfers[b] * cost.work.transfer_s[b];
  }
  if (run.pipeline_parallelism > 1) {
    for (std::size_t c = 0; c < cost.chunks.size(); ++c) {
      row.features[pipeline_pass] +=
          1e-3 * (path.critical_forwards[c] + path.critical_backwards[c]);
    }
  }
  // The calls on the critical path, counted by kind.
  std::map<CallKind, std::pair<PassCall, double>> counted;
  auto count_calls = [&](const std::vector<PassCall>& calls, int times) {
    if (times == 0) return;
    for (const PassCall& call : calls) {
      const Operator& op = cost.workload->op(call.op);
      const CallKind kind{op.kind, call.backward, op.forward_flops_per_sample,
                          op.backward_flops_per_sample, op.activation_bytes_per_sample};
      auto [it, inserted] = counted.emplace(kind, std::make_pair(call, 0.0));
      it->second.second += times;
    }
  };
  for (std::size_t c = 0; c < cost.chunks.size(); ++c) {
    const ChunkCost& chunk = cost.chunks[c];
    row.base_s += path.critical_forwards[c] * chunk.forward_communication_s +
                  path.critical_backwards[c] * chunk.backward_communication_s;
    count_calls(chunk.forward_calls, path.critical_forwards[c]);
    count_calls(chunk.backward_calls, path.critical_backwards[c]);
  }
  // Each new kind's time with every constant zero, and with one set to one unit.
  std::vector<Cluster> clusters;
  std::vector<CostModel> models;
  for (const auto& [kind, counted_call] : counted) {
    if (cache.count(kind)) continue;
    if (models.empty()) {
      clusters.push_back(
          cluster_with_constants(base_cluster, std::vector<double>(constants_count, 0.0)));
      for (int g = 0; g < constants_count; ++g) {
        std::vector<double> unit(constants_count, 0.0);
        unit[g] = 1.0;
        clusters.push_back(cluster_with_constants(base_cluster, unit));
      }
      for (const Cluster& cluster : clusters) {
        models.emplace_back(*cost.workload, cluster, run_scenario.training, run_scenario.cost);
      }
    }
    const PassCall& call = counted_call.first;
    auto time_under = [&](const CostModel& model) {
      return (call.backward ? model.backward_compute_s(call.op) : model.forward_compute_s(call.op))
          .at_real(run.micro_batch);
    };
    CallFeatures entry;
    entry.base_s = time_under(models[0]);
    for (int g = 0; g < constants_count; ++g) {
      entry.features.push_back(time_under(models[g + 1]) - entry.base_s);
      entry.floored = entry.floored || (g >= linear_count && entry.features.back() > 0);
    }
    cache.emplace(kind, std::move(entry));
  }
  CallGroups group_of;
  for (const auto& [kind, counted_call] : counted) {
    const CallFeatures& entry = cache.at(kind);
    const double times = counted_call.second;
    row.base_s += times * entry.base_s;
    add_call(row, group_of, entry.features, entry.floored, times);
  }
  return row;
}

}  // namespace

Cluster cluster_with_constants(const Cluster& base, const std::vector<double>& theta) {
  Cluster cluster = base;
  auto& laws = cluster.gpu.operator_compute;
  laws["embedding"] = phases(KindLaw{constant(theta, edge_fixed)});
  laws["embedding"].forward.flops_per_s.reset();  // no FLOPs: its fixed part is all of it
  laws["embedding"].backward.flops_per_s.reset();
  laws["attention"] = phases(layer_law(theta));
  laws["mlp"] = phases(layer_law(theta));
  laws["head"] = phases(KindLaw{constant(theta, edge_fixed), constant(theta, head_rate)});
  cluster.gpu.pipeline_pass_s = constant(theta, pipeline_pass) * 1e-3;
  return cluster;
}

std::vector<RowModel> row_models(const Scenario& scenario, const MeasuredTable& table,
                                 const SimOptions& options,
                                 const std::vector<double>& parallel_paths_theta) {
  const RunSetup setup = read_run_setup(scenario);
  if (setup.mode != Mode::dp || options.gradient_all_reduce != GradientAllReduce::after_backward) {
    throw InputError(scenario.file, "$.simulation.gradient_all_reduce",
                     "a setup whose communication overlaps compute",
                     "\"measured_runs\": {\"mode\": \"dp\"} and \"gradient_all_reduce\": "
                     "\"after_backward\" (the fit sums the iteration's parts)");
  }
  std::vector<RowModel> rows;
  for (const MeasuredRun& run : table.runs) {
    const Scenario run_scenario = scenario_for_run(scenario, table, run);
    if (uses_model_parallelism(run)) {
      FeatureCache cache;
      rows.push_back(parallel_row_model(run_scenario, setup, run, parallel_paths_theta, cache));
      continue;
    }
    const Plan plan = plan_for_run(run_scenario, setup, run);
    // Each item's time with every constant zero, then with one set to one unit: an item is
    // base + max(floor features . floors, features . linear constants), the program's
    // structure being the same whatever the constants.
    const std::vector<double> zero(constants_count, 0.0);
    const std::vector<double> base = item_times_s(
        run_scenario, plan, cluster_with_constants(run_scenario.cluster, zero), options);
    std::vector<std::vector<double>> unit_times;
    for (int g = 0; g < constants_count; ++g) {
      std::vector<double> unit = zero;
      unit[g] = 1.0;
      unit_times.push_back(item_times_s(
          run_scenario, plan, cluster_with_constants(run_scenario.cluster, unit), options));
    }
    RowModel row;
    row.features.assign(linear_count, 0.0);
    // Floored items grouped by their features (all calls of a kind and phase are alike).
    CallGroups group_of;
    for (std::size_t i = 0; i < base.size(); ++i) {
      row.base_s += base[i];
      std::vector<double> features;
      bool floored = false;
      for (int g = 0; g < constants_count; ++g) {
        features.push_back(unit_times[g][i] - base[i]);
        floored = floored || (g >= linear_count && features.back() > 0);
      }
      add_call(row, group_of, features, floored, 1.0);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<double> constants_of(const Cluster& cluster) {
  std::vector<double> theta(constants_count, 0.0);
  auto seconds_per_tflop = [](const ComputeLaw& law) {
    return law.flops_per_s && std::isfinite(*law.flops_per_s) ? 1e12 / *law.flops_per_s : 0.0;
  };
  if (const OperatorCompute* layer = cluster.gpu.compute_law("attention")) {
    theta[layer_rate] = seconds_per_tflop(layer->forward);
    theta[layer_fixed] = layer->forward.fixed_s * 1e3;
    theta[layer_floor] = layer->forward.host_floor_s * 1e3;
    if (layer->forward.activation_bytes_per_s) {
      theta[layer_traffic] = 1e12 / *layer->forward.activation_bytes_per_s;
    }
  }
  theta[pipeline_pass] = cluster.gpu.pipeline_pass_s * 1e3;
  if (const OperatorCompute* head = cluster.gpu.compute_law("head")) {
    theta[head_rate] = seconds_per_tflop(head->forward);
    theta[edge_fixed] = head->forward.fixed_s * 1e3;
  }
  return theta;
}

namespace {

bool spans_servers(const MeasuredRun& run, int gpus_per_server) {
  return run.gpus > gpus_per_server;
}

}  // namespace

std::vector<double> row_weights(const MeasuredTable& table, int gpus_per_server,
                                RowWeighting weighting) {
  const int n = static_cast<int>(table.runs.size());
  std::vector<double> weights(n, 1.0);
  if (weighting == RowWeighting::every_row) return weights;
  int spanning = 0;
  for (const MeasuredRun& run : table.runs) spanning += spans_servers(run, gpus_per_server);
  if (spanning == 0 || spanning == n) return weights;
  // Each group's weights sum to half the rows.
  for (int r = 0; r < n; ++r) {
    const bool spans = spans_servers(table.runs[r], gpus_per_server);
    weights[r] = 0.5 * n / (spans ? spanning : n - spanning);
  }
  return weights;
}

FitResult fit_table(const Scenario& scenario, const MeasuredTable& table, const SimOptions& options,
                    RowWeighting weighting) {
  if (!table.has_times()) {
    throw InputError(table.file, "header (line 1)", "no \"iteration time (ms)\" column",
                     "measured iteration times to fit");
  }
  Targets measured;
  for (const MeasuredRun& run : table.runs) measured.time_s.push_back(*run.iteration_time_s);
  measured.weight = row_weights(table, scenario.cluster.gpus_per_node, weighting);
  const int n = static_cast<int>(table.runs.size());
  const Bounds bounds = bounds_for(scenario.cluster);
  bool any_parallel = false;
  for (const MeasuredRun& run : table.runs)
    any_parallel = any_parallel || uses_model_parallelism(run);
  // Rows with a pipeline depend on the constants through their critical paths: start from the
  // scenario's own constants, fit, re-find the paths under the result, refit, and keep the
  // constants whose exact error (paths found under them) is least.
  // Two starts: the scenario's own constants, and FLOPs alone (every call's time in proportion to
  // its FLOPs: the paths of a compute-bound pipeline); the better end wins.
  std::vector<std::vector<double>> starts = {constants_of(scenario.cluster)};
  if (any_parallel) {
    std::vector<double> flops_only(constants_count, 0.0);
    flops_only[layer_rate] = 1.0;
    flops_only[head_rate] = 1.0;
    starts.push_back(flops_only);
  }
  // Data-parallel rows do not depend on the constants' values: built once. Rows with a
  // pipeline are rebuilt under each candidate from their run scenarios, made once.
  const RunSetup setup = read_run_setup(scenario);
  std::vector<std::optional<Scenario>> parallel_runs(n);
  std::vector<FeatureCache> feature_caches(n);
  for (int r = 0; r < n; ++r) {
    if (uses_model_parallelism(table.runs[r])) {
      parallel_runs[r] = scenario_for_run(scenario, table, table.runs[r]);
    }
  }
  const std::vector<RowModel> first_rows = row_models(scenario, table, options, starts.front());
  auto rows_under = [&](const std::vector<double>& theta) {
    std::vector<RowModel> rows = first_rows;
    for (int r = 0; r < n; ++r) {
      if (parallel_runs[r]) {
        rows[r] =
            parallel_row_model(*parallel_runs[r], setup, table.runs[r], theta, feature_caches[r]);
      }
    }
    return rows;
  };
  std::vector<std::vector<RowModel>> start_rows = {first_rows};
  for (std::size_t k = 1; k < starts.size(); ++k) start_rows.push_back(rows_under(starts[k]));
  struct Fitted {
    std::vector<double> theta;
    std::vector<RowModel> rows;  // exact at theta
  };
  auto fit_from = [&](const std::vector<int>& use, const std::vector<double>& start,
                      const std::vector<RowModel>& rows_at_start) {
    if (!any_parallel) {
      const std::vector<double> theta = solve_weighted(rows_at_start, measured, use, bounds);
      return std::make_pair(Fitted{theta, rows_at_start}, 0.0);
    }
    // Gauss-Newton on the max-plus times: fit the rows linearised along their paths, re-find
    // the paths under the result, and step back towards the current constants (halving) while
    // the exact error does not fall.
    Fitted current{start, rows_at_start};
    double current_value = objective(rows_at_start, measured, use, start);
    for (int round = 0; round < 12; ++round) {
      const std::vector<double> target = solve_weighted(current.rows, measured, use, bounds);
      bool improved = false;
      for (double step = 1.0; step >= 1.0 / 32; step /= 2) {
        std::vector<double> theta = current.theta;
        for (std::size_t g = 0; g < theta.size(); ++g) {
          theta[g] += step * (target[g] - theta[g]);
        }
        std::vector<RowModel> rows = rows_under(theta);
        const double value = objective(rows, measured, use, theta);
        if (value < current_value * (1 - 1e-9)) {
          current = {std::move(theta), std::move(rows)};
          current_value = value;
          improved = true;
          break;
        }
      }
      if (!improved) break;
    }
    return std::make_pair(current, current_value);
  };
  auto fit_on = [&](const std::vector<int>& use) {
    std::optional<std::pair<Fitted, double>> best;
    for (std::size_t k = 0; k < starts.size(); ++k) {
      auto candidate = fit_from(use, starts[k], start_rows[k]);
      if (!best || candidate.second < best->second) best = std::move(candidate);
    }
    return best->first;
  };

  FitResult result;
  std::vector<int> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  const Fitted fitted = fit_on(all);
  const std::vector<double>& theta = fitted.theta;
  for (int r = 0; r < n; ++r) result.fitted_s.push_back(predict(fitted.rows[r], theta));

  // Leave one model size out: fit without its rows, predict them.
  std::map<std::string, std::vector<int>> by_size;
  for (int r = 0; r < n; ++r) by_size[table.runs[r].model_size()].push_back(r);
  result.model_sizes = static_cast<int>(by_size.size());
  result.validated_s.assign(n, 0.0);
  for (const auto& [size, held_out] : by_size) {
    std::vector<int> train;
    for (int r = 0; r < n; ++r) {
      if (table.runs[r].model_size() != size) train.push_back(r);
    }
    if (train.empty()) {
      throw InputError(table.file, "rows", "one model size",
                       "rows of at least two model sizes (for cross-validation)");
    }
    // A fold starts from the fit on all rows (its rows' paths found there), which it perturbs.
    const Fitted fold =
        any_parallel ? fit_from(train, fitted.theta, fitted.rows).first : fit_on(train);
    for (int r : held_out) result.validated_s[r] = predict(fold.rows[r], fold.theta);
  }
  result.fit_mape_percent = mean_abs_percent_error(result.fitted_s, measured.time_s);
  result.cv_mape_percent = mean_abs_percent_error(result.validated_s, measured.time_s);
  for (const bool spans : {false, true}) {
    RowGroupFigures group{spans ? "several servers" : "one server"};
    std::vector<double> measured_s, fitted_s, validated_s;
    for (int r = 0; r < n; ++r) {
      if (spans_servers(table.runs[r], scenario.cluster.gpus_per_node) != spans) continue;
      measured_s.push_back(measured.time_s[r]);
      fitted_s.push_back(result.fitted_s[r]);
      validated_s.push_back(result.validated_s[r]);
    }
    if (measured_s.empty()) continue;
    group.rows = static_cast<int>(measured_s.size());
    group.fit_mape_percent = mean_abs_percent_error(fitted_s, measured_s);
    group.cv_mape_percent = mean_abs_percent_error(validated_s, measured_s);
    result.groups.push_back(std::move(group));
  }
  result.constants = describe_constants(theta);
  result.cluster_json = cluster_document_with(scenario.cluster_document, theta,
                                              scenario.cluster.gpu.peak_flops_per_s);
  result.cluster = cluster_with_constants(scenario.cluster, theta);
  return result;
}

}  // namespace osdp::sim
