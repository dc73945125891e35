// A model as JSON: a GPT generator spec or an explicit operator list, read strictly.
#pragma once

#include "model/json_reader.hpp"
#include "model/training.hpp"
#include "model/workload.hpp"

namespace osdp {

// Sizes depend on the training's precision and optimizer.
Workload load_model(const JsonReader& reader, const Training& training);
// The spec of a {"family": "gpt", ...} model (what the runtime builds).
GptSpec read_gpt_spec(const JsonReader& reader);

}  // namespace osdp
