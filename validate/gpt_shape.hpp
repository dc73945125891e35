// The GPT the validator runs: the generator spec the scenario was made from, so that a plan
// written for the scenario's workload runs unchanged (same operators, names and parameter counts).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/cluster.hpp"
#include "model/plan.hpp"
#include "model/scenario.hpp"
#include "model/training.hpp"
#include "model/workload.hpp"

namespace osdp::validate {

struct GptShape {
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int sequence_length = 16;
  int vocabulary = 128;
  // The model's dropout (its masks count in the activations). The runtime trains without
  // dropout, so only 0 matches its memory.
  double dropout = 0;
  // Standard attention keeps the s x s probabilities; flash recomputes them in backward.
  AttentionKernel attention = AttentionKernel::standard;

  GptSpec spec() const;
  int operators() const { return 2 * layers + 2; }
};

// A probe's shape (model/cluster.hpp ProbeShape: a cluster's speed reference) as the runtime's
// GPT (standard attention, no dropout), and back.
GptShape gpt_shape_of(const ProbeShape& probe);
ProbeShape probe_shape_of(const GptShape& shape);

// The runtime's GPT for a generator spec (the scenario keeps the spec it was made from);
// nullopt when its layers differ in width (I&C), which the runtime does not build.
std::optional<GptShape> shape_of(const GptSpec& spec);

// The scenario's GPT as the runtime builds it, or InputError naming `file` when the scenario's
// model cannot run in the validator (an explicit operator list, I&C widths, mixed precision).
GptShape require_gpt_shape(const Scenario& scenario, const std::string& file);

// The runtime's name of operator i: "embedding", "layer<L>.attention", "layer<L>.mlp", "head".
std::string operator_name(const GptShape& shape, int i);

// The operators a plan's choice covers: one per operator, or an FSDP unit's run of them
// (Plan::unit_sizes, model/wrapping.hpp).
struct OperatorRange {
  int first = 0;
  int count = 1;
};
// Plan::unit_sizes as ranges (one per operator when the plan has no units); the sizes are
// assumed valid (check_runnable checks them).
std::vector<OperatorRange> plan_units(const GptShape& shape, const Plan& plan);

// A unit's name as model/wrapping names it: the operator's, or "first..last".
std::string unit_name(const GptShape& shape, const OperatorRange& unit);

// Throws InputError (file `file`, path "$.operators.<name>" or "$.units") for a plan the runtime
// cannot execute: units that do not cover the operators once each, a unit of several operators
// split into slices, slice counts that do not divide the operator (attention heads, MLP hidden
// units, LM-head input features; the embedding cannot be split), hsdp without >= 2 nodes of
// >= 2 ranks.
void check_runnable(const GptShape& shape, const Plan& plan, int world_size, int gpus_per_node,
                    const std::string& file = "plan");

}  // namespace osdp::validate
