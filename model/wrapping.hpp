// FSDP units: how a model is wrapped. A unit is a run of consecutive operators (in execution
// order) that gathers its parameters in one all-gather and reduce-scatters its gradients in one
// reduce-scatter, as one FSDP module's flat parameter does: fewer, larger collectives, and a
// gather buffer as large as the whole unit. The planner sees a wrapped model as a workload whose
// operators are the units (`wrap_workload`), so the cost model, the search and the simulator
// treat a unit as one operator; a plan records its units (Plan::unit_sizes).
//
// Wrapping rules, as PyTorch FSDP's auto-wrap policies state them:
//   per_operator  one unit per operator (what the planner does without units)
//   per_block     one unit per transformer block (transformer_auto_wrap_policy): the operators
//                 whose names share the part before the first '.' ("layer3.attention",
//                 "layer3.mlp"); an operator without a '.' is a block of its own
//   min_parameters  consecutive operators grouped until a unit holds at least N parameters
//                 (size_based_auto_wrap_policy's min_num_params, 1e8 by default, read along the
//                 chain of operators); the remainder joins the last unit, as the root unit
//                 holds what no wrapped module took
#pragma once

#include <string>
#include <vector>

#include "model/plan.hpp"
#include "model/workload.hpp"

namespace osdp {

struct WrappingRule {
  enum class Kind { per_operator, per_block, min_parameters } kind = Kind::per_operator;
  int blocks_per_unit = 1;       // per_block: consecutive blocks in one unit
  double min_parameters = 1e8;   // min_parameters: parameters a unit holds at least
  std::string describe() const;  // "one unit per block", "units of >= 100M parameters"
};

// Operators per unit, in execution order (their sum is the workload's size).
std::vector<int> unit_sizes(const Workload& workload, const WrappingRule& rule);

// Whether the sizes wrap the workload: each >= 1, summing to its operator count.
bool valid_unit_sizes(const Workload& workload, const std::vector<int>& sizes);

// The workload whose operators are the units: sizes, states, activations, extras and FLOPs
// summed; the largest workspace (one member computes at a time); checkpointable when every
// member is, keeping the first member's input; never split (a unit is gathered whole). Each unit
// keeps its members (Operator::members), so compute is the sum of the members' own laws. A unit
// of one operator is that operator unchanged. Throws std::invalid_argument on invalid sizes.
Workload wrap_workload(const Workload& workload, const std::vector<int>& sizes);

// Whether `plan` is a plan of units over `workload` as the scenario has it (not yet wrapped):
// then its choices are per unit and the workload must be wrapped before they are read.
bool wraps(const Plan& plan, const Workload& workload);

// The units' names: the operator's name for a unit of one, "first..last" otherwise.
std::string unit_name(const Workload& workload, int first, int count);

// "18 units (operators per unit: 1, 2 (x16), 1)": the sizes, briefly.
std::string describe_units(const std::vector<int>& sizes);

}  // namespace osdp
