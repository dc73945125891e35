// The GPT the validator runs, recovered from a workload made by model/'s GPT generator so that a
// plan written for the workload runs unchanged (same operators, names and parameter counts).
#pragma once

#include <optional>
#include <string>

#include "model/plan.hpp"
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

  GptSpec spec() const;
  int operators() const { return 2 * layers + 2; }
};

// The uniform-width GPT whose make_gpt(spec, training) is exactly `workload`; nullopt when the
// workload is not such a GPT (explicit operator lists, I&C widths).
std::optional<GptShape> infer_gpt_shape(const Workload& workload, const Training& training);

// As above, or InputError naming `file` when the workload cannot run in the validator.
GptShape require_gpt_shape(const Workload& workload, const Training& training,
                           const std::string& file);

// The runtime's name of operator i: "embedding", "layer<L>.attention", "layer<L>.mlp", "head".
std::string operator_name(const GptShape& shape, int i);

// Throws InputError (file `file`, path "$.operators.<name>") for a choice the runtime cannot
// execute: slice counts that do not divide the operator (attention heads, MLP hidden units,
// LM-head input features; the embedding cannot be split), hsdp without >= 2 nodes of >= 2 ranks.
void check_runnable(const GptShape& shape, const Plan& plan, int world_size, int gpus_per_node,
                    const std::string& file = "plan");

}  // namespace osdp::validate
