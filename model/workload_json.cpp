// Reading a model: a GPT generator spec or an explicit operator list.
#include "model/workload_json.hpp"

#include <fmt/format.h>

#include <cmath>

#include "model/limits.hpp"
#include "model/units.hpp"

namespace osdp {
namespace {

using units::Dimension;

OperatorKind read_operator_kind(const JsonReader& reader) {
  const std::string kind =
      reader.choice("kind", {"embedding", "attention", "mlp", "head", "generic"});
  for (OperatorKind candidate : {OperatorKind::embedding, OperatorKind::attention,
                                 OperatorKind::mlp, OperatorKind::head, OperatorKind::generic}) {
    if (operator_kind_name(candidate) == kind) return candidate;
  }
  return OperatorKind::generic;
}

// A count of parameters: whole (2.5 printed as "2 parameters"), within its range.
double whole_parameter_count(const JsonReader& reader) {
  const double count = reader.number("parameter_count", limits::parameter_count);
  if (count != std::floor(count)) {
    reader.fail("parameter_count", "a whole number of parameters " +
                                       describe_range(limits::parameter_count, std::nullopt));
  }
  return count;
}

Operator read_operator(const JsonReader& reader, const Training& training) {
  reader.require_only({"name", "kind", "parameter_count", "parameter_bytes", "model_state_bytes",
                       "gradient_bytes", "optimizer_bytes", "activation_bytes_per_sample",
                       "input_activation_bytes_per_sample", "output_bytes_per_sample",
                       "extra_bytes", "workspace_bytes_per_sample", "compute_s_per_sample",
                       "forward_compute_s_per_sample", "forward_flops_per_sample",
                       "backward_flops_per_sample", "splittable", "split_units", "inputs"});
  Operator op;
  op.name = reader.name("name");
  if (op.name.empty()) reader.fail("name", "a non-empty operator name");
  if (reader.has("kind")) op.kind = read_operator_kind(reader);
  const BytesPerParameter per_parameter =
      bytes_per_parameter(training.precision, training.optimizer);
  if (reader.has("parameter_bytes")) {
    op.parameter_bytes =
        reader.quantity("parameter_bytes", Dimension::bytes, limits::operator_bytes);
    op.parameter_count = reader.has("parameter_count")
                             ? whole_parameter_count(reader)
                             : op.parameter_bytes / per_parameter.parameter;
  } else if (reader.has("parameter_count")) {
    op.parameter_count = whole_parameter_count(reader);
    op.parameter_bytes = op.parameter_count * per_parameter.parameter;
  } else {
    reader.fail("parameter_bytes", "parameter_bytes (S_i) or parameter_count");
  }
  // Gradients as large as the parameters, the rest of the model states in the optimizer.
  op.gradient_bytes =
      reader.has("gradient_bytes")
          ? reader.quantity("gradient_bytes", Dimension::bytes, limits::operator_bytes)
          : op.parameter_count * per_parameter.gradient;
  if (!reader.has("gradient_bytes") && reader.has("parameter_bytes")) {
    op.gradient_bytes = op.parameter_bytes;
  }
  if (reader.has("model_state_bytes")) {
    if (reader.has("optimizer_bytes")) {
      reader.fail("optimizer_bytes", "either model_state_bytes or optimizer_bytes, not both");
    }
    const double states =
        reader.quantity("model_state_bytes", Dimension::bytes, limits::operator_bytes);
    op.optimizer_bytes = states - op.parameter_bytes - op.gradient_bytes;
    if (op.optimizer_bytes < 0) {
      reader.fail("model_state_bytes", fmt::format("at least parameter + gradient bytes ({:.0f})",
                                                   op.parameter_bytes + op.gradient_bytes));
    }
  } else if (reader.has("optimizer_bytes")) {
    op.optimizer_bytes =
        reader.quantity("optimizer_bytes", Dimension::bytes, limits::operator_bytes);
  } else {
    op.optimizer_bytes = op.parameter_count * per_parameter.optimizer;
  }
  op.activation_bytes_per_sample =
      reader.quantity("activation_bytes_per_sample", Dimension::bytes, limits::operator_bytes);
  if (reader.has("input_activation_bytes_per_sample")) {
    op.input_activation_bytes_per_sample = reader.quantity(
        "input_activation_bytes_per_sample", Dimension::bytes, limits::operator_bytes);
    if (*op.input_activation_bytes_per_sample > op.activation_bytes_per_sample) {
      reader.fail("input_activation_bytes_per_sample",
                  "at most activation_bytes_per_sample (the input is part of what is saved)");
    }
  }
  op.output_bytes_per_sample =
      reader.optional_quantity("output_bytes_per_sample", Dimension::bytes, limits::operator_bytes)
          .value_or(0);
  op.extra_bytes =
      reader.optional_quantity("extra_bytes", Dimension::bytes, limits::operator_bytes).value_or(0);
  op.workspace_bytes_per_sample =
      reader
          .optional_quantity("workspace_bytes_per_sample", Dimension::bytes, limits::operator_bytes)
          .value_or(0);
  op.compute_s_per_sample = reader.optional_quantity("compute_s_per_sample", Dimension::seconds,
                                                     limits::compute_s_per_sample);
  op.forward_compute_s_per_sample = reader.optional_quantity(
      "forward_compute_s_per_sample", Dimension::seconds, limits::compute_s_per_sample);
  if (op.forward_compute_s_per_sample && op.compute_s_per_sample &&
      *op.forward_compute_s_per_sample > *op.compute_s_per_sample) {
    reader.fail("forward_compute_s_per_sample",
                "at most compute_s_per_sample (forward + backward)");
  }
  op.forward_flops_per_sample =
      reader.optional_number("forward_flops_per_sample", limits::flops_per_sample).value_or(0);
  op.backward_flops_per_sample =
      reader.optional_number("backward_flops_per_sample", limits::flops_per_sample)
          .value_or(2 * op.forward_flops_per_sample);
  op.splittable = reader.optional_boolean("splittable").value_or(true);
  op.split_units = static_cast<int>(reader.optional_integer("split_units", 1, 1 << 30).value_or(0));
  return op;
}

Workload read_operator_list(const JsonReader& reader, const Training& training) {
  reader.require_only({"name", "operators"});
  const std::string name = reader.optional_name("name").value_or("model");
  const auto entries = reader.objects("operators");
  if (entries.empty()) reader.fail("operators", "at least one operator");
  if (entries.size() > 1000000) reader.fail("operators", "at most 1,000,000 operators");
  std::vector<Operator> operators;
  operators.reserve(entries.size());
  for (const auto& entry : entries) {
    operators.push_back(read_operator(entry, training));
    for (std::size_t i = 0; i + 1 < operators.size(); ++i) {
      if (operators[i].name == operators.back().name) {
        entry.fail("name", "a name no other operator has");
      }
    }
  }
  // Edges: "inputs" names producers; an operator without "inputs" follows the one before it.
  bool any_inputs = false;
  for (const auto& entry : entries) any_inputs = any_inputs || entry.has("inputs");
  std::vector<std::pair<int, int>> edges;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const JsonReader& entry = entries[i];
    if (!entry.has("inputs")) {
      if (i > 0 && !any_inputs) edges.emplace_back(static_cast<int>(i - 1), static_cast<int>(i));
      continue;
    }
    const Json& inputs = entry.raw("inputs");
    if (!inputs.is_array()) entry.fail("inputs", "an array of operator names");
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const std::string path = fmt::format("inputs[{}]", k);
      if (!inputs[k].is_string())
        entry.fail_value(path, render_value(inputs[k]), "an operator name");
      const std::string producer = inputs[k].get<std::string>();
      int found = -1;
      for (std::size_t p = 0; p < operators.size(); ++p) {
        if (operators[p].name == producer) found = static_cast<int>(p);
      }
      if (found < 0) entry.fail_value(path, "\"" + producer + "\"", "the name of another operator");
      if (found == static_cast<int>(i))
        entry.fail_value(path, "\"" + producer + "\"", "another operator than itself");
      edges.emplace_back(found, static_cast<int>(i));
    }
  }
  return Workload(name, std::move(operators), std::move(edges), reader.file());
}

}  // namespace

GptSpec read_gpt_spec(const JsonReader& reader) {
  reader.require_only({"family", "name", "layers", "hidden", "heads", "sequence_length",
                       "vocabulary", "vocabulary_multiple", "dropout", "attention",
                       "tied_embeddings", "position_embedding", "biases", "loss", "mlp", "norm",
                       "kv_heads", "ffn_hidden"});
  GptSpec spec;
  spec.name = reader.optional_name("name").value_or("gpt");
  spec.layers = static_cast<int>(reader.integer("layers", 1, 100000));
  spec.heads = static_cast<int>(reader.integer("heads", 1, 1 << 16));
  spec.sequence_length =
      static_cast<int>(reader.optional_integer("sequence_length", 1, 1 << 24).value_or(1024));
  spec.vocabulary =
      static_cast<int>(reader.optional_integer("vocabulary", 1, 1 << 26).value_or(50257));
  spec.vocabulary_multiple =
      static_cast<int>(reader.optional_integer("vocabulary_multiple", 1, 1 << 16).value_or(1));
  if (reader.has("dropout")) {
    spec.dropout = reader.non_negative_number("dropout");
    if (spec.dropout >= 1) reader.fail("dropout", "a probability from 0 (no dropout) below 1");
  }
  if (reader.has("attention")) {
    spec.attention = reader.choice("attention", {"standard", "flash"}) == "flash"
                         ? AttentionKernel::flash
                         : AttentionKernel::standard;
  }
  spec.tied_embeddings = reader.optional_boolean("tied_embeddings").value_or(false);
  if (reader.has("position_embedding")) {
    spec.position_embedding = reader.choice("position_embedding", {"learned", "none"}) == "none"
                                  ? PositionEmbedding::none
                                  : PositionEmbedding::learned;
  }
  spec.biases = reader.optional_boolean("biases").value_or(true);
  if (reader.has("loss")) {
    spec.loss = reader.choice("loss", {"torch", "fused"}) == "fused" ? LossKernel::fused
                                                                     : LossKernel::torch;
  }
  if (reader.has("mlp")) {
    spec.mlp =
        reader.choice("mlp", {"gelu", "swiglu"}) == "swiglu" ? MlpKind::swiglu : MlpKind::gelu;
  }
  if (reader.has("norm")) {
    spec.norm = reader.choice("norm", {"layernorm", "rmsnorm"}) == "rmsnorm" ? NormKind::rmsnorm
                                                                             : NormKind::layernorm;
  }
  if (reader.has("kv_heads")) {
    spec.kv_heads = static_cast<int>(reader.integer("kv_heads", 1, spec.heads));
    if (spec.heads % spec.kv_heads != 0) {
      reader.fail_value("kv_heads", std::to_string(spec.kv_heads),
                        fmt::format("a divisor of the heads ({})", spec.heads));
    }
  }
  if (reader.has("ffn_hidden")) {
    spec.ffn_hidden = static_cast<int>(reader.integer("ffn_hidden", 1, 1 << 24));
  }
  const Json& hidden = reader.raw("hidden");
  spec.hidden_sizes.clear();
  if (hidden.is_array()) {
    if (static_cast<int>(hidden.size()) != spec.layers) {
      reader.fail("hidden",
                  fmt::format("one hidden size per layer ({} entries) or one number", spec.layers));
    }
    for (const auto& value : hidden) {
      if (!value.is_number_integer() || value.get<long long>() < 1 ||
          value.get<long long>() > (1 << 20)) {
        reader.fail("hidden", "hidden sizes that are integers from 1 to 1048576");
      }
      spec.hidden_sizes.push_back(value.get<int>());
    }
  } else {
    spec.hidden_sizes.push_back(static_cast<int>(reader.integer("hidden", 1, 1 << 20)));
  }
  for (int h : spec.hidden_sizes) {
    if (h % spec.heads != 0) {
      reader.fail_value("hidden", std::to_string(h),
                        fmt::format("a hidden size divisible by heads ({})", spec.heads));
    }
  }
  return spec;
}

Workload load_model(const JsonReader& reader, const Training& training) {
  if (reader.has("operators")) return read_operator_list(reader, training);
  if (reader.has("family")) {
    reader.choice("family", {"gpt"});
    return make_gpt(read_gpt_spec(reader), training);
  }
  reader.fail("family",
              "a generator (\"family\": \"gpt\", layers, hidden, heads, ...) or an "
              "\"operators\" list");
}

}  // namespace osdp
