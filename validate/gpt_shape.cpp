#include "validate/gpt_shape.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

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

namespace {

std::optional<int> exact_int(double value) {
  const double rounded = std::round(value);
  if (!std::isfinite(value) || rounded < 1 ||
      std::abs(value - rounded) > 1e-6 * std::max(1.0, rounded)) {
    return std::nullopt;
  }
  return static_cast<int>(rounded);
}

}  // namespace

std::optional<GptShape> infer_gpt_shape(const Workload& workload, const Training& training) {
  const int n = workload.size();
  if (n < 4 || n % 2 != 0) return std::nullopt;
  GptShape shape;
  shape.layers = (n - 2) / 2;
  const Operator& attention = workload.op(1);
  // attention parameters: 4h^2 + 6h
  const auto hidden = exact_int((-6.0 + std::sqrt(36.0 + 16.0 * attention.parameter_count)) / 8.0);
  if (!hidden) return std::nullopt;
  shape.hidden = *hidden;
  const double h = shape.hidden;
  const auto vocabulary = exact_int((workload.op(n - 1).parameter_count - 2.0 * h) / h);
  if (!vocabulary) return std::nullopt;
  shape.vocabulary = *vocabulary;
  const auto sequence = exact_int((workload.op(0).parameter_count - shape.vocabulary * h) / h);
  if (!sequence) return std::nullopt;
  shape.sequence_length = *sequence;
  const double e = activation_element_bytes(training.precision);
  const double s = shape.sequence_length;
  // The attention's activations give the heads, once we know whether dropout masks count.
  const double embedding_without_masks = 8.0 * s;
  const double mask = workload.op(0).activation_bytes_per_sample > embedding_without_masks ? 1 : 0;
  const auto heads = exact_int((attention.activation_bytes_per_sample - s * h * (6.0 * e + mask)) /
                               (s * s * (e + mask * (e + 1.0))));
  if (!heads || shape.hidden % *heads != 0) return std::nullopt;
  shape.heads = *heads;
  shape.dropout = mask > 0 ? GptSpec{}.dropout : 0.0;
  // Regenerate and compare everything the runtime relies on.
  const Workload regenerated = make_gpt(shape.spec(), training);
  if (regenerated.size() != n) return std::nullopt;
  for (int i = 0; i < n; ++i) {
    const Operator& a = workload.op(i);
    const Operator& b = regenerated.op(i);
    if (a.name != b.name || a.kind != b.kind || a.parameter_count != b.parameter_count ||
        a.activation_bytes_per_sample != b.activation_bytes_per_sample) {
      return std::nullopt;
    }
  }
  return shape;
}

GptShape require_gpt_shape(const Workload& workload, const Training& training,
                           const std::string& file) {
  const auto shape = infer_gpt_shape(workload, training);
  if (!shape) {
    throw InputError(file, "$.model", "model \"" + workload.name() + "\"",
                     "a GPT from the generator (\"family\": \"gpt\") with one hidden size for all "
                     "layers: the validator runs only that model");
  }
  if (training.precision != Precision::fp32) {
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
