// `osdp explain SCENARIO [--op NAME]`: the teaching view. For each class of identical operators
// (or the one named): memory and time under each mode, the collectives each mode issues, and
// why the plan chose what it chose at its batch size.
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>

#include "cli/command.hpp"
#include "cli/comparison.hpp"
#include "cli/explanation.hpp"
#include "cli/format.hpp"
#include "cli/layout_views.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/collectives.hpp"
#include "model/mode.hpp"
#include "model/units.hpp"
#include "model/wrapping.hpp"
#include "search/exact.hpp"
#include "search/options.hpp"
#include "search/split_cuts.hpp"

namespace osdp::cli {
namespace {

struct ExplainOptions {
  ScenarioOptions scenario;
  LayoutFlags layout;  // --tp, --pp, --schedule: explain a 3D layout instead
  std::string op;
  bool json = false;
};

std::string options_table(const CostModel& model, int index, int batch,
                          const std::vector<OperatorChoice>& chosen) {
  Table table({{"choice"},
               {"model states", Table::Align::right},
               {"activations", Table::Align::right},
               {"transient", Table::Align::right},
               {"time", Table::Align::right},
               {"compute", Table::Align::right},
               {"communication", Table::Align::right},
               {"collectives per iteration"}});
  const Operator& op = model.workload().op(index);
  for (const OperatorChoice& choice : choices_to_show(model, index, chosen)) {
    const OptionCost cost = model.option_cost(index, choice);
    const std::vector<CollectiveCall> calls = collectives_of(model.cluster(), op, choice);
    check_against_cost_model(calls, cost);
    const bool picked = std::find(chosen.begin(), chosen.end(), choice) != chosen.end();
    table.add_row({describe(choice) + (picked ? "  <- plan" : ""),
                   units::format_bytes(model.model_state_bytes(index, choice)),
                   units::format_bytes(batch * cost.persistent_bytes.per_sample),
                   units::format_bytes(cost.transient_bytes.at(batch)),
                   units::format_seconds(cost.time_s.at(batch)),
                   units::format_seconds(cost.compute_s.at(batch)),
                   units::format_seconds(cost.communication_s), describe_collectives(calls)});
  }
  return table.render("    ");
}

std::string class_title(const Workload& workload, const std::vector<int>& members) {
  const Operator& op = workload.op(members.front());
  const std::string names = members.size() == 1
                                ? op.name
                                : fmt::format("{} .. {} ({} identical operators)", op.name,
                                              workload.op(members.back()).name, members.size());
  return fmt::format(
      "{} [{}]: {} parameters, S_i = {}, model states {}, activations {} per "
      "sample",
      names, operator_kind_name(op.kind), format_count(op.parameter_count),
      units::format_bytes(op.parameter_bytes), units::format_bytes(op.model_state_bytes()),
      units::format_bytes(op.activation_bytes_per_sample));
}

std::string explain_class(const CostModel& model, const SearchSpec& spec, const Plan& plan,
                          const std::vector<int>& members, double limit_bytes, bool feasible) {
  std::vector<OperatorChoice> chosen;
  if (feasible) {
    for (int index : members) {
      if (std::find(chosen.begin(), chosen.end(), plan.choices[index]) == chosen.end()) {
        chosen.push_back(plan.choices[index]);
      }
    }
  }
  std::string text = "\n" + class_title(model.workload(), members) + "\n";
  text += options_table(model, members.front(), plan.batch_size, chosen);
  if (!feasible) return text;
  text += fmt::format("    plan: {}\n", chosen_summary(plan, members));
  std::vector<OperatorChoice> explained;
  for (int index : members) {
    if (std::find(explained.begin(), explained.end(), plan.choices[index]) != explained.end()) {
      continue;
    }
    explained.push_back(plan.choices[index]);
    text += "    why: " + why(model, spec, plan, index, limit_bytes) + "\n";
  }
  return text;
}

// What each mode keeps and sends is the mode table's (the "Modes" section, from model/mode);
// this says only which cost model prices it.
std::string cost_model_text(const CostModel& model) {
  return model.settings().kind == CostModelKind::paper
             ? fmt::format(
                   "Cost model paper on N = {} ranks: no transient buffers, no overlap "
                   "(DESIGN section 1)\n",
                   model.ranks())
             : fmt::format(
                   "Cost model extended on N = {} ranks: transient gather buffers (x units "
                   "in flight), slice overheads, checkpoint recompute, optimizer step, "
                   "overlap\n",
                   model.ranks());
}

// Rows worth showing: the first few batch sizes, those around the chosen one and the last.
bool show_batch_row(const SearchResult& result, std::size_t row) {
  const int chosen = result.best ? result.best->plan.batch_size : 0;
  const int batch = result.per_batch[row].batch_size;
  return row < 3 || row + 1 == result.per_batch.size() || std::abs(batch - chosen) <= 2;
}

std::string batch_text(const SearchResult& result) {
  Table table({{"batch", Table::Align::right},
               {"throughput", Table::Align::right},
               {"iteration", Table::Align::right},
               {"peak memory", Table::Align::right}});
  bool skipped = false;
  for (std::size_t row = 0; row < result.per_batch.size(); ++row) {
    if (!show_batch_row(result, row)) {
      if (!skipped) table.add_row({"...", "", "", ""});
      skipped = true;
      continue;
    }
    skipped = false;
    const BatchPoint& point = result.per_batch[row];
    if (!point.best) {
      table.add_row({std::to_string(point.batch_size),
                     point.pruned_by_bound ? "cannot beat the best" : "OOM", "-", "-"});
      continue;
    }
    const PlanCost& cost = point.best->cost;
    const bool picked = result.best && result.best->plan.batch_size == point.batch_size;
    table.add_row({std::to_string(point.batch_size) + (picked ? " <-" : ""),
                   format_throughput(cost.throughput_samples_per_s),
                   units::format_seconds(cost.iteration_time_s),
                   units::format_bytes(cost.peak_memory_bytes)});
  }
  return "\nBatch sizes tried (the best plan at each; the scheduler keeps the highest "
         "throughput):\n" +
         table.render();
}

std::vector<std::vector<int>> selected_classes(const CostModel& model, const std::string& name,
                                               const std::string& file) {
  std::vector<std::vector<int>> classes = operator_classes(model);
  if (name.empty()) return classes;
  const auto index = model.workload().find(name);
  if (!index) {
    std::vector<std::string> names;
    for (const Operator& op : model.workload().operators()) names.push_back(op.name);
    const std::string nearest = nearest_name(name, names);
    throw InputError(
        "command line", "--op", name,
        "the name of an operator of " + file +
            (nearest.empty() ? std::string(" (e.g. ") + model.workload().op(0).name + ")"
                             : " (did you mean \"" + nearest + "\"?)"));
  }
  for (const auto& members : classes) {
    if (std::find(members.begin(), members.end(), *index) != members.end()) return {members};
  }
  return {};
}

// What each mode keeps, sends and when it wins (model/mode's words), for the modes this cluster
// can run.
std::string modes_text(const Cluster& cluster) {
  std::string text = "\nModes (N ranks, S an operator's parameter bytes):\n";
  for (const ModeDescription& mode : mode_descriptions()) {
    if (!mode_fits_cluster(mode.mode, cluster)) continue;
    text += fmt::format("  {:<5} {}\n        keeps: {}\n        sends: {}\n        wins:  {}\n",
                        mode.name, mode.known_as, mode.keeps, mode.sends, mode.wins);
  }
  return text;
}

// What CPU offload does to each mode that has one (model/mode's words), and how many of the
// plan's operators offload.
std::string offload_text(const Cluster& cluster, const Plan& plan) {
  std::string text = "\nCPU offload (--offload): the host keeps states the device then does not\n";
  for (const ModeDescription& mode : mode_descriptions()) {
    if (!mode.offload || !mode_fits_cluster(mode.mode, cluster)) continue;
    text += fmt::format("  {:<5} {}\n        keeps: {}\n        sends: {}\n        wins:  {}\n",
                        std::string(mode.name) + "+", mode.offload->known_as, mode.offload->keeps,
                        mode.offload->sends, mode.offload->wins);
  }
  int offloaded = 0;
  for (const OperatorChoice& choice : plan.choices) offloaded += choice.offload;
  text += fmt::format("  The plan offloads {} of its {} operators (or units).\n", offloaded,
                      plan.choices.size());
  return text;
}

// What wrapping operators into FSDP units changes, and the plan's units.
std::string units_text(const Plan& plan) {
  std::string text =
      "\nFSDP units (--units): a unit gathers its operators' parameters in one all-gather and\n"
      "reduce-scatters their gradients in one reduce-scatter, as one FSDP module does.\n"
      "  keeps: a gather buffer as large as the whole unit, live while any of its operators\n"
      "         computes (and the next unit's, prefetched)\n"
      "  sends: the same bytes in fewer, larger collectives: k operators in a unit pay one\n"
      "         collective latency instead of k, but a unit's gather hides only behind the\n"
      "         previous unit's compute\n"
      "  wins:  with many small operators, many ranks or slow links (latency-bound gathers)\n"
      "         and memory to spare; per-operator units win when memory is tight\n";
  text += plan.unit_sizes.empty()
              ? "  The plan keeps one unit per operator.\n"
              : "  The plan wraps the model in " + describe_units(plan.unit_sizes) + ".\n";
  return text;
}

int run_explain(const ExplainOptions& options) {
  if (layout_requested(options.layout)) {
    refuse_data_parallel_flags(options.scenario);
    if (!options.op.empty()) {
      throw InputError("command line", "--op", options.op,
                       "no --op with --tp, --pp or --schedule (a 3D layout is explained stage "
                       "by stage)");
    }
    const LayoutSearchOptions search = layout_search_options(options.layout);
    return explain_layout(*load_for_layouts(options.scenario), search, options.json,
                          options.scenario.force);
  }
  const std::unique_ptr<const Scenario> scenario = load_with_overrides(options.scenario);
  refuse_unless_forced(planning_work(*scenario), options.scenario.force);
  const CostModel model = scenario->cost_model();
  const double limit_bytes = model.memory_limit_bytes();
  // Every batch size solved, so the table below shows each one's best plan.
  const SearchResult result = search_split_cuts(model, scenario->search, limit_bytes, true).result;
  require_search_answer(result, *scenario);
  const bool feasible = result.best.has_value();
  Plan plan;
  if (feasible) {
    plan = result.best->plan;
  } else {
    plan.batch_size = scenario->training.min_batch_size;
  }
  // Per-operator costs with the plan's own accumulation steps (a global batch).
  const Scenario planned = scenario->for_plan(plan);
  const CostModel plan_model = planned.cost_model();
  // Operators as the plan has them: the units of a plan of FSDP units.
  const auto classes = selected_classes(plan_model, options.op, scenario->file);
  if (options.json) {
    Json document = {{"scenario", scenario->name},
                     {"model", scenario->workload->name()},
                     {"ranks", model.ranks()},
                     {"memory_limit_bytes", limit_bytes},
                     {"cost_model", cost_model_name(model.settings().kind)},
                     {"fits", feasible},
                     {"batch_size", plan.batch_size},
                     {"accumulation_steps", plan_model.training().accumulation_steps}};
    document["throughput_samples_per_s"] =
        feasible ? Json(result.best->cost.throughput_samples_per_s) : Json(nullptr);
    document["peak_memory_bytes"] =
        feasible ? Json(result.best->cost.peak_memory_bytes) : Json(nullptr);
    document["least_memory_needed_bytes"] =
        feasible ? Json(nullptr) : Json(result.min_memory_needed_bytes);
    Json classes_json = Json::array();
    for (const auto& members : classes) {
      classes_json.push_back(
          class_json(plan_model, scenario->search, plan, members, limit_bytes, feasible));
    }
    document["operator_classes"] = classes_json;
    fmt::print("{}\n", document.dump(2));
    return feasible ? exit_ok : exit_infeasible;
  }

  std::string text = fmt::format("explain {}: {} on {} ranks, limit {} per GPU\n  {}\n\n",
                                 scenario->name, scenario->workload->name(), model.ranks(),
                                 units::format_bytes(limit_bytes), describe_search(*scenario));
  text += cost_model_text(model);
  if (feasible) {
    const int steps = plan_model.training().accumulation_steps;
    text += fmt::format("\nThe plan runs batch size {} per rank{}: {}, peak {}.\n", plan.batch_size,
                        steps > 1 ? fmt::format(" ({} accumulation steps)", steps) : "",
                        format_throughput(result.best->cost.throughput_samples_per_s),
                        units::format_bytes(result.best->cost.peak_memory_bytes));
    if (options.op.empty()) text += batch_text(result);
  } else {
    text += fmt::format(
        "\nNothing fits at batch size {}: the least memory any plan needs is {}. "
        "Costs below are at that batch size.\n",
        plan.batch_size, units::format_bytes_above(result.min_memory_needed_bytes, limit_bytes));
  }
  text += modes_text(model.cluster());
  if (!plan.unit_sizes.empty() || scenario->search.units != SearchSpec::UnitsPolicy::off) {
    text += units_text(plan);
  }
  if (scenario->search.offload != SearchSpec::OffloadPolicy::off) {
    text += offload_text(model.cluster(), plan);
  }
  text += fmt::format("\nOperators at batch size {} (memory per GPU, time per iteration):\n",
                      plan.batch_size);
  for (const auto& members : classes) {
    text += explain_class(plan_model, scenario->search, plan, members, limit_bytes, feasible);
  }
  fmt::print("{}", text);
  return feasible ? exit_ok : exit_infeasible;
}

}  // namespace

Subcommand add_explain_command(CLI::App& root) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* app = root.add_subcommand(
      "explain",
      "Teaching view: per operator, memory, time and collectives under each mode, "
      "and why the plan chose what it chose");
  add_scenario_options(*app, options->scenario);
  add_layout_flags(*app, options->layout);
  app->add_option("--op", options->op, "Explain only this operator (and its identical ones)");
  app->add_flag("--json", options->json,
                "Print JSON: per operator class, every option's memory, time and collectives, "
                "the plan's choices and why");
  return {app, [options] { return run_explain(*options); }};
}

}  // namespace osdp::cli
