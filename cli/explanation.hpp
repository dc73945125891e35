// What `osdp explain` and `osdp report` say about a plan, as data: the collectives each choice
// issues, the classes of identical operators, every option's figures and why the plan chose what
// it chose. The text views live with their commands.
#pragma once

#include <string>
#include <vector>

#include "model/collectives.hpp"
#include "model/cost_model.hpp"
#include "model/json_reader.hpp"
#include "search/options.hpp"

namespace osdp::cli {

// One collective a choice issues per iteration.
struct CollectiveCall {
  CollectiveKind kind;
  int count = 1;          // how many times per iteration
  double full_bytes = 0;  // S of the buffer
  int ranks = 1;          // group size
  const GroupTiming* group = nullptr;
  std::string when;

  double time_s() const { return count * group->time_s(kind, full_bytes, ranks); }
};

// The collectives of one choice, as model/mode describes each mode; they add up to the cost
// model's communication time (the cost model reads the same description).
std::vector<CollectiveCall> collectives_of(const Cluster& cluster, const Operator& op,
                                           const OperatorChoice& choice);

// The explanation must add up to the cost model's communication time (a bug otherwise).
void check_against_cost_model(const std::vector<CollectiveCall>& calls, const OptionCost& cost);

// "all-gather 4.5 MiB + reduce-scatter 4.5 MiB", or "none".
std::string describe_collectives(const std::vector<CollectiveCall>& calls);

// Operators with identical sizes and costs form one class (in execution order); only counts
// matter to the search.
std::vector<std::vector<int>> operator_classes(const CostModel& model);

// The whole-operator modes, for teaching, plus every choice the plan made for the class.
std::vector<OperatorChoice> choices_to_show(const CostModel& model, int index,
                                            const std::vector<OperatorChoice>& chosen);

// Why the plan chose plans.choices[index]: what a faster choice would cost in memory.
std::string why(const CostModel& model, const SearchSpec& spec, const Plan& plan, int index,
                double limit_bytes);

// "zdp x46, dp x2": the plan's choices among `members`.
std::string chosen_summary(const Plan& plan, const std::vector<int>& members);

// One class as data: every option's figures and collectives, the plan's choices and why
// (`feasible` false: no plan, options only).
Json class_json(const CostModel& model, const SearchSpec& spec, const Plan& plan,
                const std::vector<int>& members, double limit_bytes, bool feasible);

}  // namespace osdp::cli
