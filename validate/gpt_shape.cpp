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
  spec.attention = attention;
  return spec;
}

GptShape gpt_shape_of(const ProbeShape& probe) {
  GptShape shape;
  shape.layers = probe.layers;
  shape.hidden = probe.hidden;
  shape.heads = probe.heads;
  shape.sequence_length = probe.sequence_length;
  shape.vocabulary = probe.vocabulary;
  return shape;
}

ProbeShape probe_shape_of(const GptShape& shape) {
  return {shape.layers, shape.hidden, shape.heads, shape.sequence_length, shape.vocabulary};
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
  shape.attention = spec.attention;
  return shape;
}

GptShape require_gpt_shape(const Scenario& scenario, const std::string& file) {
  const std::optional<GptShape> shape = scenario.gpt ? shape_of(*scenario.gpt) : std::nullopt;
  if (!shape) {
    throw InputError(file, "$.model", "model \"" + scenario.workload->name() + "\"",
                     "a GPT from the generator (\"family\": \"gpt\") with one hidden size for all "
                     "layers: the validator runs only that model");
  }
  const GptSpec& spec = *scenario.gpt;
  const GptSpec minimal;
  if (spec.tied_embeddings || spec.position_embedding != minimal.position_embedding ||
      !spec.biases || spec.loss != minimal.loss || spec.mlp != minimal.mlp ||
      spec.norm != minimal.norm || spec.kv_heads != 0 || spec.ffn_hidden != 0 ||
      spec.tensor_parallel != 1) {
    throw InputError(file, "$.model", "model \"" + scenario.workload->name() + "\"",
                     "minGPT's block as the validator builds it (untied head, learned positions, "
                     "biases, LayerNorm, GeLU MLP of 4 x hidden, multi-head attention, PyTorch's "
                     "loss; attention standard or flash)");
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

std::vector<OperatorRange> plan_units(const GptShape& shape, const Plan& plan) {
  std::vector<OperatorRange> units;
  if (plan.unit_sizes.empty()) {
    for (int i = 0; i < shape.operators(); ++i) units.push_back({i, 1});
    return units;
  }
  int first = 0;
  for (const int count : plan.unit_sizes) {
    units.push_back({first, count});
    first += count;
  }
  return units;
}

std::string unit_name(const GptShape& shape, const OperatorRange& unit) {
  if (unit.count == 1) return operator_name(shape, unit.first);
  return operator_name(shape, unit.first) + ".." +
         operator_name(shape, unit.first + unit.count - 1);
}

namespace {

void check_units(const GptShape& shape, const Plan& plan, const std::string& file) {
  if (plan.unit_sizes.empty()) return;
  long total = 0;
  for (const int count : plan.unit_sizes) {
    if (count < 1) {
      throw InputError(file, "$.units", std::to_string(count),
                       "units of at least one operator each");
    }
    total += count;
  }
  if (total != shape.operators()) {
    throw InputError(
        file, "$.units", fmt::format("units covering {} operators", total),
        fmt::format("units covering the model's {} operators once each", shape.operators()));
  }
}

}  // namespace

void check_runnable(const GptShape& shape, const Plan& plan, int world, int gpus_per_node,
                    const std::string& file) {
  check_units(shape, plan, file);
  const std::vector<OperatorRange> units = plan_units(shape, plan);
  if (plan.choices.size() != units.size()) {
    throw InputError(file, "$.operators", fmt::format("{} choices", plan.choices.size()),
                     fmt::format("one choice per {} ({})",
                                 plan.unit_sizes.empty() ? "operator" : "unit", units.size()));
  }
  for (std::size_t u = 0; u < units.size(); ++u) {
    const OperatorChoice& choice = plan.choices[u];
    const int i = units[u].first;
    const std::string path = "$.operators." + unit_name(shape, units[u]);
    const int k = choice.slices;
    if (!choice_consistent(choice)) {
      throw InputError(file, path, describe(choice),
                       "slices >= 1 and 0 sharded slices exactly for mode dp");
    }
    if (units[u].count > 1 && k != 1) {
      throw InputError(file, path, fmt::format("slices {}", k),
                       "slices 1 (a unit of several operators is gathered whole)");
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
