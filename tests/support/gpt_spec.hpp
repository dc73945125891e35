// Test helper: a GPT generator spec of a given shape (GPT-2's vocabulary, dropout 0.1).
#pragma once

#include "model/workload.hpp"

namespace osdp::testing {

// `vocabulary_multiple` pads the vocabulary as Megatron does (vTrain's runs: 128).
inline GptSpec gpt_spec(int layers, int hidden, int heads, int sequence,
                        int vocabulary_multiple = 1) {
  GptSpec spec;
  spec.layers = layers;
  spec.hidden_sizes = {hidden};
  spec.heads = heads;
  spec.sequence_length = sequence;
  spec.vocabulary = 50257;
  spec.vocabulary_multiple = vocabulary_multiple;
  spec.dropout = 0.1;
  return spec;
}

}  // namespace osdp::testing
