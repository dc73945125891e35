// `osdp plan SCENARIO`: the OSDP plan of highest throughput under the memory limit, compared
// with DDP, FSDP and ZeRO-2 (with and without checkpointing) under the same cost model.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.hpp"
#include "cli/comparison.hpp"
#include "cli/format.hpp"
#include "cli/layout_views.hpp"
#include "cli/plan_evaluation.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/units.hpp"

namespace osdp::cli {
namespace {

struct PlanOptions {
  ScenarioOptions scenario;
  LayoutFlags layout;  // --tp, --pp, --schedule: 3D layouts instead
  bool json = false;
  std::string evaluate = "analytic";  // or "sim": re-rank candidates by simulation
  int top = 5;
  bool top_given = false;  // --top only means something beside --evaluate sim
};

Json peak_cause_json(const PeakBreakdown& peak, const Workload& workload) {
  Json cause = {{"dominant", peak.dominant_part()},
                {"model_state_bytes", peak.model_state_bytes},
                {"activation_bytes", peak.activation_bytes},
                {"extra_bytes", peak.extra_bytes},
                {"transient_bytes", peak.transient_bytes}};
  if (peak.transient_operator >= 0) {
    cause["transient_operator"] = workload.op(peak.transient_operator).name;
  }
  return cause;
}

Json baselines_json(const Comparison& comparison) {
  Json baselines = Json::array();
  for (const BaselineOutcome& outcome : comparison.baselines) {
    Json entry = {{"strategy", outcome.strategy.name},
                  {"description", outcome.strategy.description},
                  {"feasible", outcome.best.has_value()},
                  {"in_search_space", outcome.in_search_space},
                  {"min_batch_peak_memory_bytes", outcome.min_batch_peak_bytes}};
    if (outcome.best) {
      const PlanCost& cost = outcome.best->cost;
      entry["batch_size"] = cost.batch_size;
      entry["iteration_time_s"] = cost.iteration_time_s;
      entry["throughput_samples_per_s"] = cost.throughput_samples_per_s;
      entry["peak_memory_bytes"] = cost.peak_memory_bytes;
      if (!outcome.best->plan.unit_sizes.empty()) {
        entry["units"] = outcome.best->plan.unit_sizes.size();  // FSDP units it wraps the model in
      }
      if (cost.host_memory_bytes > 0) entry["host_memory_bytes"] = cost.host_memory_bytes;
    }
    baselines.push_back(std::move(entry));
  }
  return baselines;
}

// Micro-batches per rank per iteration of a plan (Training::for_micro_batch decides).
int accumulation_of(const Scenario& scenario, const Plan& plan) {
  return scenario.training
      .for_micro_batch(plan.batch_size, scenario.cluster.ranks, plan.accumulation_steps)
      .accumulation_steps;
}

// "15", or "2 x 16" for micro-batch 2 accumulated 16 times.
std::string batch_label(const Scenario& scenario, const Plan& plan) {
  const int steps = accumulation_of(scenario, plan);
  return steps > 1 ? fmt::format("{} x {}", plan.batch_size, steps)
                   : std::to_string(plan.batch_size);
}

// A document `load_plan` reads back: the plan plus its figures.
Json plan_json(const Scenario& scenario, const CostModel& search_model,
               const Comparison& comparison, const ScheduledPlan& best,
               const std::string& strategy) {
  // Per-operator figures with the plan's own accumulation steps (a global batch), per unit for
  // a plan of FSDP units.
  const Scenario planned = scenario.for_plan(best.plan);
  const Workload& workload = *planned.workload;
  const CostModel planned_model(planned.cost_model());
  const CostModel& model = best.plan.accumulation_steps > 0 || !best.plan.unit_sizes.empty()
                               ? planned_model
                               : search_model;
  Json document = plan_to_json(best.plan, *scenario.workload);
  Json& operators = document["operators"];
  for (int i = 0; i < workload.size(); ++i) {
    const OptionCost cost = model.option_cost(i, best.plan.choices[i]);
    operators[i]["time_s"] = cost.time_s.at(best.plan.batch_size);
    operators[i]["memory_bytes"] = cost.persistent_bytes.at(best.plan.batch_size);
  }
  document["scenario"] = scenario.name;
  document["strategy"] = strategy;
  document["cost_model"] = std::string(cost_model_name(scenario.cost.kind));
  document["ranks"] = scenario.cluster.ranks;
  document["memory_limit_bytes"] = comparison.memory_limit_bytes;
  document["iteration_time_s"] = best.cost.iteration_time_s;
  document["throughput_samples_per_s"] = best.cost.throughput_samples_per_s;
  document["peak_memory_bytes"] = best.cost.peak_memory_bytes;
  document["peak_memory_cause"] = peak_cause_json(best.cost.peak, workload);
  document["compute_s"] = best.cost.compute_s;
  document["communication_s"] = best.cost.communication_s;
  document["exposed_communication_s"] = best.cost.exposed_communication_s;
  if (best.cost.host_memory_bytes > 0) {
    document["host_memory_bytes"] = best.cost.host_memory_bytes;
    document["host_copy_s"] = best.cost.host_copy_s;
    document["host_optimizer_step_s"] = best.cost.host_optimizer_step_s;
  }
  if (!comparison.osdp.host_memory_note.empty()) {
    document["host_memory_note"] = comparison.osdp.host_memory_note;
  }
  document["search_time_s"] = comparison.search_time_s;
  // How far the plan may be from the optimum (relative throughput), as proven by the search.
  document["search_proven_gap"] = comparison.osdp.proven_gap;
  document["search_stopped_early"] = comparison.osdp.stats.stopped_early;
  document["baselines"] = baselines_json(comparison);
  return document;
}

std::string setup_summary(const Scenario& scenario, double memory_limit_bytes) {
  const Workload& workload = *scenario.workload;
  const Cluster& cluster = scenario.cluster;
  std::string text = fmt::format("osdp plan: {}\n", scenario.name);
  text += fmt::format("  model       {}: {} operators, {} parameters, model states {} ({}, {})\n",
                      workload.name(), workload.size(), format_count(workload.parameter_count()),
                      units::format_bytes(workload.model_state_bytes()),
                      precision_name(scenario.training.precision),
                      optimizer_name(scenario.training.optimizer));
  text += fmt::format("  cluster     {}: {} ranks ({} node{} x {} {})\n", cluster.name,
                      cluster.ranks, cluster.nodes(), cluster.nodes() == 1 ? "" : "s",
                      cluster.gpus_per_node, cluster.gpu.name);
  text += fmt::format("  limit       {} per GPU, {} {}..{} per rank{}\n",
                      units::format_bytes(memory_limit_bytes),
                      scenario.training.global_batch_size ? "micro-batch" : "batch size",
                      scenario.training.min_batch_size, scenario.training.max_batch_size,
                      scenario.training.global_batch_size
                          ? fmt::format(", global batch {}", *scenario.training.global_batch_size)
                          : "");
  text += fmt::format("  search      {}\n", describe_search(scenario));
  return text;
}

// "0.01%", "2.5%", "100%": {:.2g} alone prints a 100 % gap as "1e+02%".
std::string gap_percent(double fraction) {
  const double percent = fraction * 100;
  if (percent >= 10) return fmt::format("{:.0f}%", percent);
  if (percent >= 1) return fmt::format("{:.1f}%", percent);
  return fmt::format("{:.2g}%", percent);
}

// "optimal", "optimal to within 0.01%", or how far the time limit left it.
std::string search_quality(const SearchResult& result) {
  const std::string gap = gap_percent(result.proven_gap);
  if (result.stats.stopped_early) {
    return fmt::format("the time limit stopped it: at most {} from the optimum; see --time-limit",
                       gap);
  }
  return result.proven_gap <= 1e-9 ? "optimal" : "optimal to within " + gap;
}

std::string best_summary(const Scenario& scenario, const Comparison& comparison) {
  const ScheduledPlan& best = *comparison.osdp.best;
  const PlanCost& cost = best.cost;
  const int steps = accumulation_of(scenario, best.plan);
  const long long samples =
      static_cast<long long>(cost.batch_size) * steps * scenario.cluster.ranks;
  std::string text =
      steps > 1 ? fmt::format(
                      "\nOSDP plan: micro-batch {} x {} accumulation steps per rank ({} in "
                      "all)\n",
                      cost.batch_size, steps, samples)
                : fmt::format("\nOSDP plan: batch size {} per rank ({} in all)\n", cost.batch_size,
                              samples);
  text += fmt::format("  throughput      {}\n", format_throughput(cost.throughput_samples_per_s));
  text += fmt::format("  iteration time  {} (compute {}, communication {}, {} exposed",
                      units::format_seconds(cost.iteration_time_s),
                      units::format_seconds(cost.compute_s),
                      units::format_seconds(cost.communication_s),
                      units::format_seconds(cost.exposed_communication_s));
  if (cost.optimizer_step_s > 0) {
    text += fmt::format(", optimizer step {}", units::format_seconds(cost.optimizer_step_s));
  }
  text += ")\n";
  if (cost.host_memory_bytes > 0) {
    const auto& host_memory = scenario.cluster.host.memory_bytes;
    text += fmt::format(
        "  CPU offload     {} of host memory a node{}, copies {}, optimizer step on the CPU {}\n",
        units::format_bytes(cost.host_memory_bytes),
        host_memory ? " of " + units::format_bytes(*host_memory)
                    : " (the cluster's host block gives no memory to check it against)",
        units::format_seconds(cost.host_copy_s), units::format_seconds(cost.host_optimizer_step_s));
  }
  if (!comparison.osdp.host_memory_note.empty()) {
    text += fmt::format("  host memory     {}\n", comparison.osdp.host_memory_note);
  }
  text +=
      fmt::format("  peak memory     {} of {} ({})\n", units::format_bytes(cost.peak_memory_bytes),
                  units::format_bytes(comparison.memory_limit_bytes),
                  format_percent(cost.peak_memory_bytes / comparison.memory_limit_bytes));
  text += fmt::format("  set by          {}\n",
                      describe_peak(cost.peak, *scenario.for_plan(best.plan).workload));
  if (scenario.cost.kind == CostModelKind::paper) {
    // The paper's formula has no transient term: say so where the peak is printed.
    text +=
        "                  (the paper's cost model counts no gathered parameters, unsharded\n"
        "                  gradients or prefetch: `osdp simulate` or --cost-model extended shows "
        "them)\n";
  }
  text += fmt::format("  search time     {} over {} batch sizes ({})\n",
                      units::format_seconds(comparison.search_time_s),
                      comparison.osdp.per_batch.size(), search_quality(comparison.osdp));
  if (!comparison.osdp_taken_from.empty()) {
    text += fmt::format(
        "  taken from      {} (scored with neighbours split no finer than its own options allow, "
        "it beats the search's own best, whose exposed gathers assume neighbours split as "
        "finely as all the options allow)\n",
        comparison.osdp_taken_from);
  }
  return text;
}

// FSDP with checkpointing differs by library; say which is which.
std::string fsdp_checkpoint_note(const Comparison& comparison) {
  std::string text;
  for (const BaselineOutcome& outcome : comparison.baselines) {
    if (outcome.strategy.mode != Mode::zdp || outcome.strategy.checkpoint == Checkpoint::none) {
      continue;
    }
    text += fmt::format("  {}: {}\n", outcome.strategy.name, outcome.strategy.description);
  }
  return text;
}

std::string baseline_table(const Scenario& scenario, const Comparison& comparison) {
  const double osdp_throughput = comparison.osdp.best->cost.throughput_samples_per_s;
  Table table({{"strategy"},
               {"batch", Table::Align::right},
               {"throughput", Table::Align::right},
               {"iteration", Table::Align::right},
               {"peak memory", Table::Align::right},
               {"OSDP speed-up", Table::Align::right}});
  const PlanCost& osdp = comparison.osdp.best->cost;
  table.add_row({"OSDP", batch_label(scenario, comparison.osdp.best->plan),
                 format_throughput(osdp_throughput), units::format_seconds(osdp.iteration_time_s),
                 units::format_bytes(osdp.peak_memory_bytes), "1.00x"});
  bool outside = false;
  for (const BaselineOutcome& outcome : comparison.baselines) {
    const std::string name = outcome.strategy.name + (outcome.in_search_space ? "" : " *");
    outside = outside || !outcome.in_search_space;
    if (!outcome.best) {
      const std::string need = outcome.min_batch_peak_bytes > 0
                                   ? "needs " + units::format_bytes(outcome.min_batch_peak_bytes)
                                   : "not valid here";
      table.add_row({name, "-", "OOM", "-", need, "-"});
      continue;
    }
    const PlanCost& cost = outcome.best->cost;
    table.add_row({name, batch_label(scenario, outcome.best->plan),
                   format_throughput(cost.throughput_samples_per_s),
                   units::format_seconds(cost.iteration_time_s),
                   units::format_bytes(cost.peak_memory_bytes),
                   fmt::format("{:.2f}x", osdp_throughput / cost.throughput_samples_per_s)});
  }
  std::string text =
      "\nAgainst the strategy baselines (same cost model, each at its best batch size):\n" +
      table.render();
  if (outside) {
    text +=
        "  * outside this search space (mode, checkpointing, FSDP units or offload not allowed by "
        "the "
        "search options), so OSDP may be slower than it\n";
  }
  text += fsdp_checkpoint_note(comparison);
  return text;
}

// The search options that would enlarge the search space, as flags.
std::string widening_hint(const SearchSpec& spec) {
  std::vector<std::string> flags;
  const bool has_z2 = std::find(spec.modes.begin(), spec.modes.end(), Mode::z2) != spec.modes.end();
  const bool has_zdp =
      std::find(spec.modes.begin(), spec.modes.end(), Mode::zdp) != spec.modes.end();
  if (!has_z2 || !has_zdp) flags.push_back("--modes dp,zdp,z2");
  if (spec.granularities.size() < 4) flags.push_back("--split auto");
  if (spec.checkpoint != SearchSpec::CheckpointPolicy::automatic) {
    flags.push_back("--checkpoint auto");
  }
  if (flags.empty()) return "";
  std::string text = ", or a larger search space (";
  for (std::size_t i = 0; i < flags.size(); ++i) text += (i ? ", " : "") + flags[i];
  return text + ")";
}

int report_infeasible(const Scenario& scenario, const CostModel& model,
                      const Comparison& comparison, bool json) {
  const double needed = comparison.osdp.min_memory_needed_bytes;
  const auto least = least_memory_plan_cost(model, scenario.search, needed);
  const std::optional<double>& gpu_memory = scenario.cluster.gpu.memory_bytes;
  if (json) {
    // Exit 3 with --json: the answer is still a document, on stdout.
    Json document = {{"fits", false},
                     {"batch_size", scenario.training.min_batch_size},
                     {"memory_limit_bytes", comparison.memory_limit_bytes},
                     {"least_memory_needed_bytes", needed},
                     {"gpu_memory_bytes", gpu_memory ? Json(*gpu_memory) : Json(nullptr)}};
    document["dominated_by"] = least ? Json(least->peak.dominant_part()) : Json(nullptr);
    fmt::print("{}\n", document.dump(2));
  }
  std::string message = fmt::format(
      "osdp: nothing fits: no plan at batch size {} fits in {} per GPU; the least memory any "
      "plan needs is {}",
      scenario.training.min_batch_size, units::format_bytes(comparison.memory_limit_bytes),
      units::format_bytes_above(needed, comparison.memory_limit_bytes));
  if (least) {
    message +=
        fmt::format(", dominated by {}.\n  that plan's peak: {}", least->peak.dominant_part(),
                    describe_peak(least->peak, *scenario.workload));
  }
  if (gpu_memory && needed > *gpu_memory) {
    // A limit above the GPU's memory is refused: never advise one.
    message += fmt::format(
        "\n  that is more than the GPU's {}: more GPUs, a smaller micro-batch or a shorter "
        "sequence{}\n",
        units::format_bytes(*gpu_memory), widening_hint(scenario.search));
  } else {
    message += fmt::format("\n  try --memory-limit {} or more{}\n", memory_limit_flag_value(needed),
                           widening_hint(scenario.search));
  }
  fmt::print(stderr, "{}", message);
  return exit_infeasible;
}

// The human-readable report: setup, the OSDP plan and its figures, the baselines.
std::string analytic_report(const Scenario& scenario, const Comparison& comparison,
                            double limit_bytes) {
  std::string text = setup_summary(scenario, limit_bytes);
  text += best_summary(scenario, comparison);
  text += "\nPlan (operators in execution order; consecutive equal choices merged):\n";
  text += render_runs(*scenario.workload, comparison.osdp.best->plan);
  text += baseline_table(scenario, comparison);
  return text;
}

// --tp, --pp or --schedule: the best 3D layout and the 3D baselines, as `osdp layout` shows
// them; --evaluate sim also runs each in the simulator.
int run_layout_plan(const PlanOptions& options) {
  refuse_data_parallel_flags(options.scenario);
  if (options.top_given) {
    throw InputError("command line", "--top", std::to_string(options.top),
                     "no --top with --tp, --pp or --schedule (--evaluate sim simulates every "
                     "3D strategy's best layout)");
  }
  const LayoutSearchOptions search = layout_search_options(options.layout);
  const std::unique_ptr<const Scenario> scenario = load_for_layouts(options.scenario);
  const LayoutSearchRun run = run_layout_search(*scenario, search, options.scenario.force);
  const bool fits = run.result.strategies.front().second.has_value();
  const std::map<std::string, SimulatedLayout> simulated =
      options.evaluate == "sim" && fits
          ? simulate_layouts(*scenario, run.result, "--evaluate sim", options.scenario.force)
          : std::map<std::string, SimulatedLayout>{};
  if (options.json) {
    fmt::print("{}\n", layout_search_json(*scenario, run, simulated).dump(2));
    return fits ? exit_ok : exit_infeasible;
  }
  if (!fits) return report_no_layout_fits(*scenario, run);
  fmt::print("{}", layout_search_report(*scenario, run, simulated));
  return exit_ok;
}

int run_plan(const PlanOptions& options) {
  if (layout_requested(options.layout)) return run_layout_plan(options);
  if (options.top_given && options.evaluate != "sim") {
    throw InputError("command line", "--top", std::to_string(options.top),
                     "--top only with --evaluate sim (it sets how many analytic plans the "
                     "simulator re-ranks)");
  }
  const std::unique_ptr<const Scenario> scenario = load_with_overrides(options.scenario);
  refuse_unless_forced(planning_work(*scenario), options.scenario.force);
  if (options.evaluate == "sim") {
    refuse_unless_forced(simulation_work(*scenario, options.top + 6), options.scenario.force);
  }
  const CostModel model = scenario->cost_model();
  const double limit_bytes = model.memory_limit_bytes();
  const Comparison comparison = compare_with_baselines(model, scenario->search, limit_bytes);
  require_search_answer(comparison.osdp, *scenario);
  if (!comparison.osdp.best) return report_infeasible(*scenario, model, comparison, options.json);
  if (options.evaluate == "sim") {
    const SimulatedRanking ranking = rank_by_simulation(*scenario, model, comparison, options.top);
    if (options.json) {
      const bool chosen = ranking.chosen >= 0;
      const EvaluatedCandidate& pick = ranking.candidates[chosen ? ranking.chosen : 0];
      const bool is_osdp = pick.name.rfind("osdp", 0) == 0;
      Json document =
          plan_json(*scenario, model, comparison, chosen ? pick.analytic : *comparison.osdp.best,
                    chosen && !is_osdp ? pick.name : "osdp");
      if (chosen) {
        document["simulated"] = {
            {"iteration_time_s", pick.simulated_iteration_time_s},
            {"throughput_samples_per_s", pick.simulated_throughput_samples_per_s},
            {"peak_memory_bytes", pick.simulated_peak_memory_bytes},
            {"exposed_comm_s", pick.simulated_exposed_comm_s}};
      }
      document["candidates"] = ranking_json(ranking);
      fmt::print("{}\n", document.dump(2));
      return exit_ok;
    }
    std::string text = analytic_report(*scenario, comparison, limit_bytes);
    text += render_ranking(ranking, limit_bytes);
    if (ranking.chosen < 0 && scenario->cost.kind == CostModelKind::paper) {
      text +=
          "  (the paper cost model counts no transient buffers; --cost-model extended plans "
          "with them)\n";
    }
    if (ranking.chosen >= 0 && ranking.candidates[ranking.chosen].name.rfind("osdp #1", 0) != 0) {
      text += "\nPlan chosen by simulation:\n";
      text += render_runs(*scenario->workload, ranking.candidates[ranking.chosen].analytic.plan);
    }
    fmt::print("{}", text);
    return exit_ok;
  }
  if (options.json) {
    fmt::print("{}\n",
               plan_json(*scenario, model, comparison, *comparison.osdp.best, "osdp").dump(2));
    return exit_ok;
  }
  fmt::print("{}", analytic_report(*scenario, comparison, limit_bytes));
  return exit_ok;
}

}  // namespace

Subcommand add_plan_command(CLI::App& root) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* app = root.add_subcommand(
      "plan", "Find the OSDP plan of highest throughput and compare it with DDP, FSDP, ZeRO-2");
  add_scenario_options(*app, options->scenario);
  add_layout_flags(*app, options->layout);
  app->add_flag("--json", options->json,
                "Print the plan as JSON (loadable as a plan file; with --tp, --pp or --schedule "
                "the layouts as `osdp layout --json` prints them)");
  app->add_option("--evaluate", options->evaluate,
                  "analytic (default), or sim: re-rank the top analytic plans and the baselines "
                  "by simulated throughput")
      ->check(CLI::IsMember({"analytic", "sim"}));
  CLI::Option* top = app->add_option("--top", options->top,
                                     "Analytic plans to re-rank with --evaluate sim (default 5)")
                         ->check(CLI::Range(1, 64));
  return {app, [options, top] {
            options->top_given = top->count() > 0;
            return run_plan(*options);
          }};
}

}  // namespace osdp::cli
