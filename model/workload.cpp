#include "model/workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/topological_sort.hpp>
#include <iterator>

#include "model/input_error.hpp"

namespace osdp {

std::string_view operator_kind_name(OperatorKind kind) {
  switch (kind) {
    case OperatorKind::embedding:
      return "embedding";
    case OperatorKind::attention:
      return "attention";
    case OperatorKind::mlp:
      return "mlp";
    case OperatorKind::head:
      return "head";
    case OperatorKind::generic:
      return "generic";
  }
  return "?";
}

Workload::Workload(std::string name, std::vector<Operator> operators,
                   std::vector<std::pair<int, int>> edges, std::string source_file)
    : name_(std::move(name)), operators_(std::move(operators)), graph_(operators_.size()) {
  for (const auto& [from, to] : edges) boost::add_edge(from, to, graph_);
  std::vector<OperatorGraph::vertex_descriptor> reversed;
  try {
    boost::topological_sort(graph_, std::back_inserter(reversed));
  } catch (const boost::not_a_dag&) {
    throw InputError(source_file, "$.model.operators", "operator inputs that form a cycle",
                     "an acyclic graph of operators");
  }
  order_.assign(reversed.rbegin(), reversed.rend());
}

Workload Workload::chain(std::string name, std::vector<Operator> operators,
                         std::string source_file) {
  std::vector<std::pair<int, int>> edges;
  for (int i = 0; i + 1 < static_cast<int>(operators.size()); ++i) edges.emplace_back(i, i + 1);
  return Workload(std::move(name), std::move(operators), std::move(edges), std::move(source_file));
}

std::optional<int> Workload::find(const std::string& name) const {
  for (int i = 0; i < size(); ++i) {
    if (operators_[i].name == name) return i;
  }
  return std::nullopt;
}

double Workload::parameter_count() const {
  double total = 0;
  for (const auto& op : operators_) total += op.parameter_count;
  return total;
}

double Workload::model_state_bytes() const {
  double total = 0;
  for (const auto& op : operators_) total += op.model_state_bytes();
  return total;
}

namespace {

// Fills the byte sizes that follow from the parameter count and the training precision.
void set_model_states(Operator& op, const BytesPerParameter& bytes) {
  op.parameter_bytes = op.parameter_count * bytes.parameter;
  op.gradient_bytes = op.parameter_count * bytes.gradient;
  op.optimizer_bytes = op.parameter_count * bytes.optimizer;
}

}  // namespace

// Activation sizes follow Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models" (MLSys 2023), section 4.1: per layer s*b*h*(34 + 5*a*s/h) bytes with
// 2-byte activations and 1-byte dropout masks. We generalise to an element size e (4 in fp32,
// 2 in mixed precision) and split the layer into our two operators, each with its LayerNorm:
//   attention: s*h*(6e + 1) + a*s^2*(2e + 1)   (LN in, QKV in, Q, K, V, proj in, masks, scores)
//   mlp:       s*h*(10e + 1)                   (LN in, fc in, GeLU in, proj in, dropout mask)
// Without dropout (GptSpec::dropout 0) the 1-byte masks go, and so does the attention's
// dropped-out copy of the softmax: a*s^2*e for the scores instead of a*s^2*(2e + 1).
// FLOPs per sample (forward; backward is twice that): attention 8*s*h^2 + 4*s^2*h, mlp 16*s*h^2,
// LM head 2*s*h*V (Narayanan et al., SC'21, appendix).
std::string_view attention_kernel_name(AttentionKernel kernel) {
  return kernel == AttentionKernel::flash ? "flash" : "standard";
}

Workload make_gpt(const GptSpec& spec, const Training& training) {
  const BytesPerParameter bytes = bytes_per_parameter(training.precision, training.optimizer);
  const double e = activation_element_bytes(training.precision);
  const double s = spec.sequence_length;
  const double a = spec.heads;
  const double vocabulary = spec.padded_vocabulary();
  const double mask = spec.dropout > 0 ? 1.0 : 0.0;  // bytes of dropout mask per element
  // Tensor parallelism: `t` divides what is split; `r` what sequence parallelism splits and
  // plain tensor parallelism replicates (layer norms, their inputs, dropout around them).
  const double t = std::max(1, spec.tensor_parallel);
  const double r = spec.sequence_parallel ? t : 1.0;

  const double norm_parameters = spec.norm == NormKind::rmsnorm ? 1.0 : 2.0;  // per hidden unit
  const double kv_fraction =
      spec.kv_heads > 0 ? static_cast<double>(spec.kv_heads) / spec.heads : 1.0;
  const bool swiglu = spec.mlp == MlpKind::swiglu;

  std::vector<Operator> operators;
  operators.reserve(2 * spec.layers + 2);

  const double h0 = spec.hidden_of_layer(0);
  Operator embedding;
  embedding.name = "embedding";
  embedding.kind = OperatorKind::embedding;
  // Token table split by vocabulary; position table replicated.
  const double positions = spec.position_embedding == PositionEmbedding::learned ? s * h0 : 0.0;
  embedding.parameter_count = vocabulary * h0 / t + positions;
  embedding.activation_bytes_per_sample = 8.0 * s + mask * s * h0 / r;  // ids + dropout mask
  embedding.input_activation_bytes_per_sample = 8.0 * s;
  embedding.output_bytes_per_sample = e * s * h0;
  embedding.splittable = false;  // a table lookup has no reduction dimension to split
  set_model_states(embedding, bytes);
  operators.push_back(embedding);

  double previous_hidden = h0;
  for (int layer = 0; layer < spec.layers; ++layer) {
    const double h = spec.hidden_of_layer(layer);
    Operator attention;
    attention.name = fmt::format("layer{}.attention", layer);
    attention.kind = OperatorKind::attention;
    // LN (replicated), QKV and its bias (split by heads), output projection (split by rows; its
    // bias replicated). With grouped-query attention K and V have a fraction g of Q's width.
    const double bias = spec.biases ? 1.0 : 0.0;
    const double g = kv_fraction;
    attention.parameter_count =
        ((2.0 + 2.0 * g) * h * h + bias * (1.0 + 2.0 * g) * h) / t + norm_parameters * h + bias * h;
    double projection_flops = 0.0;
    if (previous_hidden != h) {
      // Width change between layers (I&C family): a projection from the previous width.
      attention.parameter_count += previous_hidden * h + h;
      projection_flops = 2.0 * s * previous_hidden * h;
    }
    // Saved: the LN input and the QKV input (the LN output) and the output dropout mask around
    // the split part; the split part: Q, K, V, the attention over V and the projection's input,
    // the scores, their softmax and its dropout (Megatron's 11 s h + 5 a s^2 bytes in fp16).
    // FlashAttention keeps no score tensor, only the softmax's log-sum-exp (fp32 per head and
    // token).
    const double scores = spec.attention == AttentionKernel::flash
                              ? 4.0 * a * s / t
                              : a * s * s * (e + mask * (e + 1.0)) / t;
    attention.activation_bytes_per_sample = s * h * (2.0 * e + mask) / r +
                                            s * h * (2.0 + 2.0 * g) * e / t + scores +
                                            e * s * (previous_hidden - h);
    attention.input_activation_bytes_per_sample = e * s * previous_hidden / r;
    attention.output_bytes_per_sample = e * s * h;
    // The scores QK^T and their product with V: 4 s^2 h, all of it computed by the standard
    // kernel under a causal mask, the half below the diagonal by FlashAttention (it skips the
    // masked blocks), whose backward recomputes QK^T beside the four gradient products (2.5 x
    // its forward).
    const bool flash = spec.attention == AttentionKernel::flash;
    attention.score_forward_flops_per_sample = (flash ? 2.0 : 4.0) * s * s * h / t;
    attention.score_backward_flops_per_sample =
        (flash ? 2.5 : 2.0) * attention.score_forward_flops_per_sample;
    attention.score_rows_per_sample = s * a / t;
    const double projections_forward = 4.0 * (1.0 + g) * s * h * h / t + projection_flops;
    attention.forward_flops_per_sample =
        projections_forward + attention.score_forward_flops_per_sample;
    attention.backward_flops_per_sample =
        2.0 * projections_forward + attention.score_backward_flops_per_sample;
    const int tensor_ranks = std::max(1, spec.tensor_parallel);
    attention.split_units = (spec.kv_heads > 0 ? spec.kv_heads : spec.heads) / tensor_ranks;
    set_model_states(attention, bytes);
    operators.push_back(attention);

    Operator mlp;
    mlp.name = fmt::format("layer{}.mlp", layer);
    mlp.kind = OperatorKind::mlp;
    // LN and the second bias replicated; fc (h -> f) by columns, projection (f -> h) by rows.
    // SwiGLU has two input matrices (gate and up) and keeps both outputs, the SiLU's and the
    // product; GeLU keeps its input and output (19 s h with f = 4h).
    const double f = spec.ffn_hidden > 0 ? spec.ffn_hidden : 4.0 * h;
    const double inputs = swiglu ? 2.0 : 1.0;
    mlp.parameter_count =
        ((inputs + 1.0) * h * f + bias * inputs * f) / t + norm_parameters * h + bias * h;
    mlp.activation_bytes_per_sample =
        s * h * (2.0 * e + mask) / r + s * f * (swiglu ? 4.0 : 2.0) * e / t;
    mlp.input_activation_bytes_per_sample = e * s * h / r;
    mlp.output_bytes_per_sample = e * s * h;
    mlp.forward_flops_per_sample = 2.0 * (inputs + 1.0) * s * h * f / t;
    mlp.backward_flops_per_sample = 2.0 * mlp.forward_flops_per_sample;
    mlp.split_units = static_cast<int>(f) / tensor_ranks;
    set_model_states(mlp, bytes);
    operators.push_back(mlp);
    previous_hidden = h;
  }

  const double h = previous_hidden;
  Operator head;
  head.name = "head";
  head.kind = OperatorKind::head;
  head.split_units = static_cast<int>(h);  // slices of its input width (the reduction dimension)
  // Final norm + LM head (no bias; untied unless tied_embeddings), split by vocabulary.
  head.parameter_count = norm_parameters * h + (spec.tied_embeddings ? 0.0 : h * vocabulary / t);
  // LN input, head input, and what the loss keeps of the logits (a vocabulary slice of each on
  // every tensor-parallel rank): PyTorch's cross-entropy the logits and its fp32 log-softmax, a
  // fused one the logits and a log-sum-exp per token.
  const bool fused_loss = spec.loss == LossKernel::fused;
  const double logits_saved =
      fused_loss ? e * s * vocabulary / t + 4.0 * s : (e + 4.0) * s * vocabulary / t;
  head.activation_bytes_per_sample = 2.0 * e * s * h / r + logits_saved;
  head.input_activation_bytes_per_sample = e * s * h / r;
  head.output_bytes_per_sample = e * s * vocabulary / t;
  // The loss's backward holds the gradients beside those: PyTorch's of the fp32 log-probabilities
  // and of the logits (measured by the validator: every plan peaked there, 8 x s x V bytes per
  // sample in fp32); a fused kernel's of the logits alone, in their dtype.
  head.workspace_bytes_per_sample =
      fused_loss ? e * s * vocabulary / t : (4.0 + e) * s * vocabulary / t;
  head.forward_flops_per_sample = 2.0 * s * h * vocabulary / t;
  head.backward_flops_per_sample = 2.0 * head.forward_flops_per_sample;
  set_model_states(head, bytes);
  operators.push_back(head);

  return Workload::chain(spec.name, std::move(operators));
}

}  // namespace osdp
