// validate/tensor_parallel: Megatron's splits of the GPT's parameters over a tensor group.
#include "validate/tensor_parallel.hpp"

#include <catch2/catch.hpp>

#include "validate/gpt_parameters.hpp"

namespace osdp::validate {
namespace {

const GptShape shape{2, 64, 4, 16, 128};  // 2 layers, hidden 64, 4 heads, sequence 16, vocab 128

}  // namespace

TEST_CASE("tensor parallel: every parameter's shards assemble to it, and split its elements",
          "[parallel]") {
  for (const int ranks : {1, 2, 4}) {
    for (const auto& [name, full] : initial_gpt_parameters(shape, 3)) {
      INFO(name << " over " << ranks << " ranks");
      const TensorSplit split = tensor_split_of(name);
      std::vector<at::Tensor> shards;
      int64_t elements = 0;
      for (int rank = 0; rank < ranks; ++rank) {
        shards.push_back(tensor_shard_of(full, split, rank, ranks));
        elements += shards.back().numel();
      }
      CHECK(at::equal(assemble_tensor_shards(shards, split), full));
      if (split.kind == TensorSplit::Kind::replicated) {
        for (const at::Tensor& shard : shards) CHECK(at::equal(shard, full));
      } else {
        CHECK(elements == full.numel());
      }
    }
  }
}

TEST_CASE(
    "tensor parallel: Megatron's splits: QKV and the MLP's first layer by rows, the "
    "projections by columns, the vocabulary by rows, LayerNorms whole",
    "[parallel]") {
  using Kind = TensorSplit::Kind;
  for (const auto& [name, full] : initial_gpt_parameters(shape, 3)) {
    INFO(name);
    const TensorSplit split = tensor_split_of(name);
    if (name.find("qkv.") != std::string::npos) {
      CHECK(split.kind == Kind::rows);
      CHECK(split.blocks == 3);
    } else if (name.find("fc.") != std::string::npos || name == "embedding.token" ||
               name == "head.weight") {
      CHECK(split.kind == Kind::rows);
      CHECK(split.blocks == 1);
    } else if (name.find("proj.weight") != std::string::npos) {
      CHECK(split.kind == Kind::columns);
    } else {
      CHECK((name.starts_with("embedding.position") || name.find("ln.") != std::string::npos ||
             name.find("proj.bias") != std::string::npos));
      CHECK(split.kind == Kind::replicated);
    }
  }
}

TEST_CASE("tensor parallel: a rank's QKV rows are its heads' queries, keys and values",
          "[parallel]") {
  // Rows numbered 0 .. 3h - 1: Q's rows, then K's, then V's; 4 heads of 16 over 2 ranks.
  const int64_t hidden = 64;
  const at::Tensor rows = at::arange(3 * hidden, at::kFloat).unsqueeze(1);
  const TensorSplit split = tensor_split_of("layer0.attention.qkv.weight");
  const at::Tensor second = tensor_shard_of(rows, split, 1, 2);
  REQUIRE(second.size(0) == 3 * hidden / 2);
  // Rank 1 holds heads 2 and 3 of each: rows 32-63 of Q, 96-127 of K, 160-191 of V.
  CHECK(second[0].item<float>() == 32);
  CHECK(second[31].item<float>() == 63);
  CHECK(second[32].item<float>() == 96);
  CHECK(second[64].item<float>() == 160);
  CHECK(second[95].item<float>() == 191);
}

}  // namespace osdp::validate
