// A scenario's "training" object, read strictly.
#pragma once

#include "model/json_reader.hpp"
#include "model/training.hpp"

namespace osdp {

Training load_training(const JsonReader& reader);

}  // namespace osdp
