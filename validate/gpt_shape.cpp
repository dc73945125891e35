#include "validate/gpt_shape.hpp"

#include <fmt/format.h>

#include "model/input_error.hpp"
#include "model/mode.hpp"

namespace osdp::validate {

GptSpec GptShape::spec() const {
  GptSpec spec;
  spec.name = "gpt";
  spec.layers = layers;
  spec.hidden_sizes = {hidden};
  spec.heads = heads;
  spec.sequence_length = sequence_length;
  spec.vocabulary = vocabulary;
  spec.dropout = dropout;
  return spec;
}

std::optional<GptShape> shape_of(const GptSpec& spec) {
  for (int hidden : spec.hidden_sizes) {
    if (hidden != spec.hidden_sizes.front()) return std::nullopt;  // I&C widths
  }
  GptShape shape;
  shape.layers = spec.layers;
  shape.hidden = spec.hidden_sizes.front();
  shape.heads = spec.heads;
  shape.sequence_length = spec.sequence_length;
  shape.vocabulary = spec.padded_vocabulary();
  shape.dropout = spec.dropout;
  return shape;
}

GptShape require_gpt_shape(const Scenario& scenario, const std::string& file) {
  const std::optional<GptShape> shape = scenario.gpt ? shape_of(*scenario.gpt) : std::nullopt;
  if (!shape) {
    throw InputError(file, "$.model", "model \"" + scenario.workload->name() + "\"",
                     "a GPT from the generator (\"family\": \"gpt\") with one hidden size for all "
                     "layers: the validator runs only that model");
  }
  if (scenario.training.precision != Precision::fp32) {
    throw InputError(file, "$.training.precision", "\"mixed\"",
                     "\"fp32\" (the CPU validator trains in fp32)");
  }
  return *shape;
}

std::string operator_name(const GptShape& shape, int i) {
  if (i == 0) return "embedding";
  if (i == shape.operators() - 1) return "head";
  return fmt::format("layer{}.{}", (i - 1) / 2, (i - 1) % 2 == 0 ? "attention" : "mlp");
}

void check_runnable(const GptShape& shape, const Plan& plan, int world, int gpus_per_node,
                    const std::string& file) {
  if (static_cast<int>(plan.choices.size()) != shape.operators()) {
    throw InputError(file, "$.operators", std::to_string(plan.choices.size()) + " operators",
                     fmt::format("{} operators", shape.operators()));
  }
  for (int i = 0; i < shape.operators(); ++i) {
    const OperatorChoice& choice = plan.choices[i];
    const std::string path = "$.operators." + operator_name(shape, i);
    const int k = choice.slices;
    if (!choice_consistent(choice)) {
      throw InputError(file, path, describe(choice),
                       "slices >= 1 and 0 sharded slices exactly for mode dp");
    }
    int64_t divisible = 1;
    std::string what = "embedding (a table lookup cannot be split)";
    if (i > 0 && i < shape.operators() - 1) {
      const bool attention = (i - 1) % 2 == 0;
      divisible = attention ? shape.heads : 4 * shape.hidden;
      what = attention ? "attention heads" : "MLP hidden units";
    } else if (i > 0) {
      divisible = shape.hidden;
      what = "hidden size";
    }
    if (divisible % k != 0) {
      throw InputError(file, path, fmt::format("slices {}", k),
                       fmt::format("a slice count that divides the {} ({})", what, divisible));
    }
    if (describe_mode(choice.mode).needs_several_nodes &&
        (gpus_per_node < 2 || world % gpus_per_node != 0 || world / gpus_per_node < 2)) {
      throw InputError(file, path, std::string(mode_name(choice.mode)),
                       fmt::format("{} needs >= 2 nodes of >= 2 ranks ({} ranks, {} per node)",
                                   mode_name(choice.mode), world, gpus_per_node));
    }
  }
}

}  // namespace osdp::validate
