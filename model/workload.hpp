// A model as the planner sees it: operators with their sizes and costs, held in a Boost.Graph
// DAG and executed in topological order. Generated for GPT families or given explicitly.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/training.hpp"

namespace osdp {

enum class OperatorKind { embedding, attention, mlp, head, generic };
std::string_view operator_kind_name(OperatorKind kind);

struct Operator {
  std::string name;
  OperatorKind kind = OperatorKind::generic;
  double parameter_count = 0;
  // S_i: bytes of parameters as communicated (parameter dtype).
  double parameter_bytes = 0;
  double gradient_bytes = 0;
  // Optimizer moments, plus the fp32 master copy in mixed precision.
  double optimizer_bytes = 0;
  // Activations saved for backward, per sample.
  double activation_bytes_per_sample = 0;
  // What a checkpointed operator keeps instead (its input), per sample; unset: not checkpointable.
  std::optional<double> input_activation_bytes_per_sample;
  // Output activation per sample (sizes the partial-sum add of split operators).
  double output_bytes_per_sample = 0;
  // M_i^extra: memory the operator holds whatever the mode (e.g. buffers).
  double extra_bytes = 0;
  // Transient workspace while the operator computes, per sample.
  double workspace_bytes_per_sample = 0;
  double forward_flops_per_sample = 0;
  double backward_flops_per_sample = 0;
  // Of which attention's score products (QK^T and the attention over V; in backward their
  // gradients and FlashAttention's recompute), which a compute law may rate apart.
  double score_forward_flops_per_sample = 0;
  double score_backward_flops_per_sample = 0;
  // The score kernel's query rows per sample, one per token and attention head (on this
  // tensor-parallel rank): what a compute law's per-row cost (softmax, tile loads) is paid on.
  double score_rows_per_sample = 0;
  // gamma_i: measured or given compute seconds per sample (forward + backward). When unset the
  // cost model derives it from the FLOPs and the GPU's sustained compute rate.
  std::optional<double> compute_s_per_sample;
  std::optional<double> forward_compute_s_per_sample;
  // Whether the operator may be split along its reduction dimension (MatMuls).
  bool splittable = true;
  // What its slices partition (attention heads, MLP hidden units, the head's input width; on one
  // tensor-parallel rank its share): a slice count must divide it, as the runtime splits
  // operators. 0: any count.
  int split_units = 0;
  // An FSDP unit of several operators (model/wrapping.hpp): its members, whose own compute
  // laws its compute sums. Empty for an operator.
  std::vector<Operator> members;

  double model_state_bytes() const { return parameter_bytes + gradient_bytes + optimizer_bytes; }
};

using OperatorGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;

class Workload {
 public:
  // `edges` are (producer, consumer) operator indices. Throws InputError on a cycle.
  Workload(std::string name, std::vector<Operator> operators,
           std::vector<std::pair<int, int>> edges, std::string source_file = "");
  // A chain: operator i feeds operator i + 1.
  static Workload chain(std::string name, std::vector<Operator> operators,
                        std::string source_file = "");

  const std::string& name() const { return name_; }
  const std::vector<Operator>& operators() const { return operators_; }
  const Operator& op(int index) const { return operators_[index]; }
  int size() const { return static_cast<int>(operators_.size()); }
  const OperatorGraph& graph() const { return graph_; }
  // Operator indices in execution (topological) order.
  const std::vector<int>& execution_order() const { return order_; }
  std::optional<int> find(const std::string& name) const;

  double parameter_count() const;
  double model_state_bytes() const;

 private:
  std::string name_;
  std::vector<Operator> operators_;
  OperatorGraph graph_;
  std::vector<int> order_;
};

// How attention computes its scores. standard: the heads x s x s scores, their softmax and its
// dropout mask are saved for backward. flash (FlashAttention): none of them is saved (only the
// output's log-sum-exp, 4 bytes a head and token); backward recomputes the scores (QK^T) first.
enum class AttentionKernel { standard, flash };
std::string_view attention_kernel_name(AttentionKernel kernel);
// Learned absolute position embeddings (GPT-2, MPT's as llm-foundry counts them), or none in the
// parameters (rotary / ALiBi: computed, not learned).
enum class PositionEmbedding { learned, none };

// How the LM head's cross-entropy keeps its logits. torch: PyTorch's cross_entropy, the logits
// in the activation dtype plus the fp32 log-probabilities it saves; its backward holds their fp32
// gradient and the logits' (what the validator measures). fused: a fused kernel (flash-attn's
// CrossEntropyLoss, llm-foundry's MPT default) keeps the logits and a log-sum-exp per token and
// writes the logits' gradient in their dtype.
enum class LossKernel { torch, fused };

// The transformer MLP: GPT's fc -> GeLU -> projection, or Llama's SwiGLU (two input matrices,
// gate and up, their SiLU-gated product, then down).
enum class MlpKind { gelu, swiglu };
// The block's normalisation: LayerNorm (weight and bias) or RMSNorm (weight only, Llama).
enum class NormKind { layernorm, rmsnorm };

// GPT (minGPT-shaped) family; with swiglu, rmsnorm, grouped-query attention (kv_heads), no
// position table, no biases and an untied head it is Llama's. hidden_sizes has one entry per layer
// (I&C family) or one for all.
struct GptSpec {
  std::string name = "gpt";
  int layers = 12;
  std::vector<int> hidden_sizes{768};
  int heads = 12;
  int sequence_length = 1024;
  int vocabulary = 50257;
  // Megatron pads the vocabulary to a multiple of this (--make-vocab-size-divisible-by); 1: none.
  int vocabulary_multiple = 1;
  // Dropout probability; above 0, each dropout keeps a 1-byte mask per element for backward.
  double dropout = 0.1;
  // Megatron tensor parallelism: the operators are one rank's part of a group of this many
  // (attention split by heads, MLP by hidden units, embedding and head by vocabulary); its
  // parameters, FLOPs and split activations are 1/t of the model's, the layer norms and the
  // activations around them replicated unless sequence parallelism splits those too.
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  AttentionKernel attention = AttentionKernel::standard;
  // The LM head uses the token embedding's matrix (GPT-2, MPT): its parameters, gradient and
  // optimizer states are counted once, on the embedding.
  bool tied_embeddings = false;
  PositionEmbedding position_embedding = PositionEmbedding::learned;
  bool biases = true;  // linear layers' biases (MPT and Llama have none)
  LossKernel loss = LossKernel::torch;
  MlpKind mlp = MlpKind::gelu;
  NormKind norm = NormKind::layernorm;
  // Grouped-query attention: heads of K and V (each shared by heads / kv_heads query heads);
  // 0: as many as the query heads (multi-head attention).
  int kv_heads = 0;
  // The MLP's inner width; 0: 4 x hidden (GPT's).
  int ffn_hidden = 0;

  int padded_vocabulary() const {
    return (vocabulary + vocabulary_multiple - 1) / vocabulary_multiple * vocabulary_multiple;
  }
  int hidden_of_layer(int layer) const {
    return hidden_sizes.size() == 1 ? hidden_sizes[0] : hidden_sizes[layer];
  }
};

// Operators: embedding, per layer attention and MLP, final norm + LM head (2 x layers + 2).
Workload make_gpt(const GptSpec& spec, const Training& training);

}  // namespace osdp
