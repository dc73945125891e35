#include <catch2/catch.hpp>

#include "model/json_reader.hpp"
#include "model/workload.hpp"
#include "model/workload_json.hpp"
#include "tests/support/gpt_spec.hpp"

using namespace osdp;

TEST_CASE("GPT-2 small has minGPT's parameter count", "[model][gpt]") {
  GptSpec spec;
  spec.layers = 12;
  spec.hidden_sizes = {768};
  spec.heads = 12;
  const Workload gpt = make_gpt(spec, Training{});
  REQUIRE(gpt.size() == 2 * 12 + 2);
  // minGPT reports 124M for gpt2, not counting the (untied) LM head matrix.
  const double lm_head = 768.0 * 50257;
  CHECK((gpt.parameter_count() - lm_head) / 1e6 == Approx(124.4).epsilon(0.002));
  CHECK(gpt.op(0).name == "embedding");
  CHECK(gpt.op(1).name == "layer0.attention");
  CHECK(gpt.op(2).name == "layer0.mlp");
  CHECK(gpt.op(25).name == "head");
}

TEST_CASE("model states per parameter follow precision and optimizer", "[model][gpt]") {
  GptSpec spec;
  spec.layers = 2;
  spec.hidden_sizes = {256};
  spec.heads = 4;
  for (auto [precision, optimizer, bytes] : {std::tuple{Precision::fp32, Optimizer::adam, 16.0},
                                             {Precision::mixed, Optimizer::adam, 16.0},
                                             {Precision::fp32, Optimizer::sgd, 12.0},
                                             {Precision::mixed, Optimizer::sgd, 12.0}}) {
    Training training;
    training.precision = precision;
    training.optimizer = optimizer;
    const Workload gpt = make_gpt(spec, training);
    CHECK(gpt.model_state_bytes() == Approx(bytes * gpt.parameter_count()));
    const double parameter_bytes = precision == Precision::fp32 ? 4.0 : 2.0;
    CHECK(gpt.op(1).parameter_bytes == Approx(parameter_bytes * gpt.op(1).parameter_count));
  }
}

TEST_CASE("activation sizes match Korthikanti et al. for 2-byte activations", "[model][gpt]") {
  GptSpec spec;
  spec.layers = 1;
  spec.hidden_sizes = {1024};
  spec.heads = 16;
  spec.sequence_length = 512;
  Training training;
  training.precision = Precision::mixed;
  const Workload gpt = make_gpt(spec, training);
  const double s = 512, h = 1024, a = 16;
  // One layer: s*b*h*(34 + 5*a*s/h) bytes per sample.
  const double layer =
      gpt.op(1).activation_bytes_per_sample + gpt.op(2).activation_bytes_per_sample;
  CHECK(layer == Approx(s * h * (34 + 5 * a * s / h)));
}

TEST_CASE(
    "without dropout the masks leave the activations; the loss backward is the head's "
    "workspace",
    "[model][gpt]") {
  GptSpec spec;
  spec.layers = 2;
  spec.hidden_sizes = {256};
  spec.heads = 8;
  spec.sequence_length = 128;
  spec.vocabulary = 2048;
  Training training;  // fp32: 4-byte activations
  const Workload with_dropout = make_gpt(spec, training);
  spec.dropout = 0;
  const Workload without = make_gpt(spec, training);
  const double s = 128, h = 256, a = 8, vocabulary = 2048;
  // One byte per element of each dropout's mask (embedding output; attention probabilities
  // and output; MLP output) and the attention's dropped-out copy of its probabilities.
  CHECK(with_dropout.op(0).activation_bytes_per_sample -
            without.op(0).activation_bytes_per_sample ==
        Approx(s * h));
  CHECK(with_dropout.op(1).activation_bytes_per_sample -
            without.op(1).activation_bytes_per_sample ==
        Approx(s * h + a * s * s * (4 + 1)));
  CHECK(with_dropout.op(2).activation_bytes_per_sample -
            without.op(2).activation_bytes_per_sample ==
        Approx(s * h));
  for (const Workload* gpt : {&with_dropout, &without}) {
    const Operator& head = gpt->op(gpt->size() - 1);
    CHECK(head.workspace_bytes_per_sample == Approx(8 * s * vocabulary));
    CHECK(head.activation_bytes_per_sample == Approx(2 * 4 * s * h + 8 * s * vocabulary));
  }
}

TEST_CASE("per-layer hidden sizes add width projections", "[model][gpt]") {
  GptSpec spec;
  spec.layers = 3;
  spec.hidden_sizes = {1024, 2048, 2048};
  spec.heads = 16;
  const Workload gpt = make_gpt(spec, Training{});
  const double plain = 4.0 * 2048 * 2048 + 6 * 2048;
  CHECK(gpt.op(3).parameter_count == Approx(plain + 1024.0 * 2048 + 2048));  // layer1.attention
  CHECK(gpt.op(5).parameter_count == Approx(plain));                         // layer2.attention
}

TEST_CASE("branching operator graphs run in topological order", "[model][graph]") {
  std::vector<Operator> ops(4);
  for (int i = 0; i < 4; ++i) ops[i].name = "op" + std::to_string(i);
  // 3 -> 1 -> 0, 3 -> 2 -> 0
  const Workload w("diamond", ops, {{3, 1}, {3, 2}, {1, 0}, {2, 0}});
  const auto& order = w.execution_order();
  REQUIRE(order.size() == 4);
  CHECK(order.front() == 3);
  CHECK(order.back() == 0);
}

namespace {

GptSpec spec_of(int layers, int hidden, int heads, int sequence) {
  return testing::gpt_spec(layers, hidden, heads, sequence);
}

}  // namespace

TEST_CASE("FlashAttention keeps no score tensor and recomputes the scores in backward",
          "[model][gpt]") {
  Training training;
  training.precision = Precision::mixed;
  for (int s : {512, 2048, 8192}) {
    GptSpec standard = spec_of(2, 1024, 16, s);
    GptSpec flash = standard;
    flash.attention = AttentionKernel::flash;
    const Operator a = make_gpt(standard, training).op(1);
    const Operator b = make_gpt(flash, training).op(1);
    const double h = 1024, heads = 16;
    // Standard keeps 5 a s^2 bytes (fp16 scores, softmax, 1-byte dropout mask); flash keeps a
    // fp32 log-sum-exp per head and token instead.
    CHECK(a.activation_bytes_per_sample - b.activation_bytes_per_sample ==
          Approx(5.0 * heads * s * s - 4.0 * heads * s));
    // The score products: standard computes all of QK^T and PV (4 s^2 h) under the causal mask,
    // flash the half below the diagonal; flash's backward adds the QK^T recompute to the four
    // gradient products (5 s^2 h against standard's 8 s^2 h); the projections are the same.
    CHECK(a.score_forward_flops_per_sample == Approx(4.0 * s * s * h));
    CHECK(b.score_forward_flops_per_sample == Approx(2.0 * s * s * h));
    CHECK(b.score_backward_flops_per_sample == Approx(5.0 * s * s * h));
    CHECK(a.forward_flops_per_sample - a.score_forward_flops_per_sample ==
          Approx(b.forward_flops_per_sample - b.score_forward_flops_per_sample));
    CHECK(a.forward_flops_per_sample - a.score_forward_flops_per_sample == Approx(8.0 * s * h * h));
    CHECK(a.backward_flops_per_sample - a.score_backward_flops_per_sample ==
          Approx(b.backward_flops_per_sample - b.score_backward_flops_per_sample));
    CHECK(b.parameter_count == a.parameter_count);
  }
}

TEST_CASE("tied embeddings, no position table and no biases drop exactly their parameters",
          "[model][gpt]") {
  const GptSpec base = spec_of(4, 512, 8, 1024);
  const double h = 512, layers = 4, vocabulary = 50257, s = 1024;
  const double all = make_gpt(base, Training{}).parameter_count();
  GptSpec tied = base;
  tied.tied_embeddings = true;
  CHECK(all - make_gpt(tied, Training{}).parameter_count() == Approx(vocabulary * h));
  GptSpec rotary = base;
  rotary.position_embedding = PositionEmbedding::none;
  CHECK(all - make_gpt(rotary, Training{}).parameter_count() == Approx(s * h));
  GptSpec unbiased = base;
  unbiased.biases = false;
  // QKV 3h, output h, fc 4h, projection h.
  CHECK(all - make_gpt(unbiased, Training{}).parameter_count() == Approx(layers * 9 * h));
}

TEST_CASE("the Llama 3 model files have Meta's parameter counts", "[model][gpt][llama]") {
  // Llama 3 8B: 8,030,261,248 parameters; 70B: 70,553,706,496 (the published checkpoints).
  const std::string models = std::string(OSDP_SOURCE_DIR) + "/scenarios/models/";
  const std::pair<const char*, double> expected[] = {{"llama3-8b.json", 8030261248.0},
                                                     {"llama3-70b.json", 70553706496.0}};
  for (const auto& [file, parameters] : expected) {
    INFO(file);
    const Json document = read_json_file(models + file);
    const GptSpec spec = read_gpt_spec(JsonReader(document, file));
    CHECK(make_gpt(spec, Training{}).parameter_count() == Approx(parameters).epsilon(1e-9));
  }
}

TEST_CASE(
    "SwiGLU and grouped-query attention change exactly their matrices, FLOPs and "
    "activations",
    "[model][gpt][llama]") {
  Training training;
  training.precision = Precision::mixed;
  GptSpec gpt = spec_of(2, 1024, 16, 2048);
  gpt.biases = false;
  gpt.dropout = 0;
  GptSpec llama = gpt;
  llama.mlp = MlpKind::swiglu;
  llama.ffn_hidden = 2816;
  llama.kv_heads = 4;
  llama.norm = NormKind::rmsnorm;
  const Workload a = make_gpt(gpt, training);
  const Workload b = make_gpt(llama, training);
  const double h = 1024, s = 2048, f = 2816, g = 4.0 / 16;
  // Attention: Q and O full, K and V a quarter; one norm weight instead of two.
  CHECK(b.op(1).parameter_count == Approx((2 + 2 * g) * h * h + h));
  CHECK(a.op(1).parameter_count == Approx(4 * h * h + 2 * h));
  CHECK(b.op(1).forward_flops_per_sample - b.op(1).score_forward_flops_per_sample ==
        Approx(4 * (1 + g) * s * h * h));
  // Saved Q, K, V and the context: (2 + 2g) s h elements instead of 4 s h.
  CHECK(a.op(1).activation_bytes_per_sample - b.op(1).activation_bytes_per_sample ==
        Approx(2.0 * (2 - 2 * g) * s * h));
  // MLP: three h x f matrices, 6 s h f FLOPs forward, four s x f tensors kept.
  CHECK(b.op(2).parameter_count == Approx(3 * h * f + h));
  CHECK(b.op(2).forward_flops_per_sample == Approx(6 * s * h * f));
  CHECK(b.op(2).activation_bytes_per_sample - 2.0 * s * h * 2 == Approx(4 * 2.0 * s * f));
}
