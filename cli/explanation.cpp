#include "cli/explanation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "cli/format.hpp"
#include "model/mode.hpp"
#include "model/units.hpp"

namespace osdp::cli {
namespace {

// Operators with identical sizes and costs form one class; only counts matter to the search.
using Signature = std::tuple<int, double, double, double, double, double, double, double, double,
                             double, double, double, bool>;

Signature signature(const CostModel& model, int index) {
  const Operator& op = model.workload().op(index);
  return {static_cast<int>(op.kind),
          op.parameter_bytes,
          op.gradient_bytes,
          op.optimizer_bytes,
          op.activation_bytes_per_sample,
          op.input_activation_bytes_per_sample.value_or(-1.0),
          op.output_bytes_per_sample,
          op.extra_bytes,
          op.workspace_bytes_per_sample,
          model.compute_s_per_sample(index),
          model.forward_compute_s_per_sample(index),
          op.parameter_count,
          op.splittable};
}

// The peak memory of `plan` with operator `index` switched to `choice`.
double peak_with(const CostModel& model, const Plan& plan, int index,
                 const OperatorChoice& choice) {
  Plan changed = plan;
  changed.choices[index] = choice;
  return model.plan_cost(changed).peak_memory_bytes;
}

std::string over_or_within(double peak_bytes, double limit_bytes) {
  return fmt::format("{} {} limit", peak_bytes > limit_bytes ? "over the" : "within the",
                     units::format_bytes(limit_bytes));
}

}  // namespace

// The collectives of one choice, as model/mode describes each mode; they add up to the cost
// model's communication time (the cost model reads the same description).
std::vector<CollectiveCall> collectives_of(const Cluster& cluster, const Operator& op,
                                           const OperatorChoice& choice) {
  std::vector<CollectiveCall> calls;
  const int k = choice.slices;
  const int j = choice.sharded_slices;
  auto add = [&](Mode mode, int count, double bytes) {
    for (const ModeCollective& collective : describe_mode(mode).collectives) {
      if (!collective_runs(collective, choice.checkpoint)) continue;
      calls.push_back({collective.kind, count,
                       collective.node_shard_bytes ? bytes / cluster.gpus_per_node : bytes,
                       group_ranks(collective.group, cluster),
                       &group_timing(collective.group, cluster), std::string(collective.what)});
    }
  };
  // The DP slices' gradients are all-reduced together; a sharded slice's collectives run per
  // slice.
  if (j < k) add(Mode::dp, 1, op.parameter_bytes * (k - j) / k);
  if (j > 0) add(choice.mode, j, op.parameter_bytes / k);
  return calls;
}

// The explanation must add up to the cost model's communication time (a bug otherwise).
void check_against_cost_model(const std::vector<CollectiveCall>& calls, const OptionCost& cost) {
  double total_s = 0;
  for (const CollectiveCall& call : calls) total_s += call.time_s();
  assert(std::abs(total_s - cost.communication_s) <= 1e-9 * std::max(1e-6, cost.communication_s));
  (void)total_s;
  (void)cost;
}

std::string describe_collectives(const std::vector<CollectiveCall>& calls) {
  if (calls.empty()) return "none";
  std::string text;
  for (const CollectiveCall& call : calls) {
    if (!text.empty()) text += " + ";
    text += fmt::format("{}{} {}", call.count > 1 ? fmt::format("{} x ", call.count) : "",
                        collective_name(call.kind), units::format_bytes(call.full_bytes));
  }
  return text;
}

std::vector<std::vector<int>> operator_classes(const CostModel& model) {
  std::map<Signature, std::size_t> class_of;
  std::vector<std::vector<int>> classes;
  for (int index : model.workload().execution_order()) {
    const auto [it, inserted] = class_of.try_emplace(signature(model, index), classes.size());
    if (inserted) classes.emplace_back();
    classes[it->second].push_back(index);
  }
  return classes;
}

// The whole-operator modes, for teaching, plus every choice the plan made for the class.
std::vector<OperatorChoice> choices_to_show(const CostModel& model, int index,
                                            const std::vector<OperatorChoice>& chosen) {
  std::vector<OperatorChoice> shown;
  for (const ModeDescription& mode : mode_descriptions()) {
    const OperatorChoice choice = OperatorChoice::whole(mode.mode);
    if (model.valid(index, choice)) shown.push_back(choice);
  }
  for (const OperatorChoice& choice : chosen) {
    if (std::find(shown.begin(), shown.end(), choice) == shown.end()) shown.push_back(choice);
  }
  return shown;
}

std::string why(const CostModel& model, const SearchSpec& spec, const Plan& plan, int index,
                double limit_bytes) {
  const int b = plan.batch_size;
  const OperatorChoice chosen = plan.choices[index];
  const double chosen_s = model.option_cost(index, chosen).time_s.at(b);
  // Among the faster options: the fastest, and the one that needs the least memory.
  std::optional<CostedOption> fastest;
  std::optional<CostedOption> cheapest;
  double fastest_peak = 0;
  double cheapest_peak = 0;
  for (const CostedOption& option : costed_options(model, index, spec)) {
    const double time_s = option.cost.time_s.at(b);
    if (time_s >= chosen_s * (1 - 1e-12)) continue;
    const double peak = peak_with(model, plan, index, option.choice);
    if (!fastest || time_s < fastest->cost.time_s.at(b)) {
      fastest = option;
      fastest_peak = peak;
    }
    if (!cheapest || peak < cheapest_peak) {
      cheapest = option;
      cheapest_peak = peak;
    }
  }
  if (!fastest) {
    return fmt::format(
        "{} is the fastest choice the search options allow for this operator ({} at b = {}), "
        "and the memory limit leaves room for it.",
        describe(chosen), units::format_seconds(chosen_s), b);
  }
  std::string text = fmt::format(
      "{} would be {} faster per iteration, but switching even one such operator to it raises "
      "the peak to {} ({}).",
      describe(fastest->choice), units::format_seconds(chosen_s - fastest->cost.time_s.at(b)),
      units::format_bytes(fastest_peak), over_or_within(fastest_peak, limit_bytes));
  if (!(cheapest->choice == fastest->choice)) {
    text += fmt::format(
        " The faster choice that needs the least memory, {}, would save {} and raise the peak to "
        "{} ({}).",
        describe(cheapest->choice), units::format_seconds(chosen_s - cheapest->cost.time_s.at(b)),
        units::format_bytes(cheapest_peak), over_or_within(cheapest_peak, limit_bytes));
  }
  if (cheapest_peak > limit_bytes) {
    text += fmt::format(" So {} trades that time for memory the plan needs elsewhere.",
                        describe(chosen));
  } else {
    text += " A faster plan fits at this batch size: the search missed it (please report).";
  }
  return text;
}

std::string chosen_summary(const Plan& plan, const std::vector<int>& members) {
  std::vector<std::pair<OperatorChoice, int>> counts;
  for (int index : members) {
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& entry) { return entry.first == plan.choices[index]; });
    if (it == counts.end()) {
      counts.push_back({plan.choices[index], 1});
    } else {
      ++it->second;
    }
  }
  std::string text;
  for (const auto& [choice, count] : counts) {
    text += (text.empty() ? "" : ", ") + fmt::format("{} x{}", describe(choice), count);
  }
  return text;
}

// The same as explain_class, as data: every option's figures and collectives, the plan's
// choices and why.
Json class_json(const CostModel& model, const SearchSpec& spec, const Plan& plan,
                const std::vector<int>& members, double limit_bytes, bool feasible) {
  const Workload& workload = model.workload();
  const int index = members.front();
  const Operator& op = workload.op(index);
  std::vector<OperatorChoice> chosen;
  if (feasible) {
    for (int member : members) {
      if (std::find(chosen.begin(), chosen.end(), plan.choices[member]) == chosen.end()) {
        chosen.push_back(plan.choices[member]);
      }
    }
  }
  Json names = Json::array();
  for (int member : members) names.push_back(workload.op(member).name);
  Json options = Json::array();
  const int batch = plan.batch_size;
  for (const OperatorChoice& choice : choices_to_show(model, index, chosen)) {
    const OptionCost cost = model.option_cost(index, choice);
    Json collectives = Json::array();
    for (const CollectiveCall& call : collectives_of(model.cluster(), op, choice)) {
      collectives.push_back({{"collective", collective_name(call.kind)},
                             {"count", call.count},
                             {"full_bytes", call.full_bytes},
                             {"ranks", call.ranks},
                             {"time_s", call.time_s()},
                             {"when", call.when}});
    }
    options.push_back({{"choice", describe(choice)},
                       {"chosen", std::find(chosen.begin(), chosen.end(), choice) != chosen.end()},
                       {"model_state_bytes", model.model_state_bytes(index, choice)},
                       {"activation_bytes", batch * cost.persistent_bytes.per_sample},
                       {"transient_bytes", cost.transient_bytes.at(batch)},
                       {"time_s", cost.time_s.at(batch)},
                       {"compute_s", cost.compute_s.at(batch)},
                       {"communication_s", cost.communication_s},
                       {"collectives", collectives}});
  }
  Json document = {{"operators", names},
                   {"kind", operator_kind_name(op.kind)},
                   {"parameters", op.parameter_count},
                   {"parameter_bytes", op.parameter_bytes},
                   {"model_state_bytes", op.model_state_bytes()},
                   {"activation_bytes_per_sample", op.activation_bytes_per_sample},
                   {"options", options}};
  if (feasible) {
    document["plan"] = chosen_summary(plan, members);
    Json reasons = Json::array();
    for (const OperatorChoice& choice : chosen) {
      const auto at = std::find_if(members.begin(), members.end(),
                                   [&](int member) { return plan.choices[member] == choice; });
      reasons.push_back(
          {{"choice", describe(choice)}, {"why", why(model, spec, plan, *at, limit_bytes)}});
    }
    document["why"] = reasons;
  }
  return document;
}

}  // namespace osdp::cli
