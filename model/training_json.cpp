// Reading a scenario's "training" object: precision, optimizer, memory limit, batch sizes.
#include "model/training_json.hpp"

#include <fmt/format.h>

#include "model/limits.hpp"
#include "model/units.hpp"

namespace osdp {

using units::Dimension;

Training load_training(const JsonReader& reader) {
  reader.require_only({"precision", "optimizer", "memory_limit", "min_batch_size", "max_batch_size",
                       "micro_batch_size", "accumulation_steps", "global_batch_size",
                       "gradient_reduce"});
  Training training;
  if (reader.has("precision")) {
    training.precision = reader.choice("precision", {"fp32", "mixed"}) == "fp32" ? Precision::fp32
                                                                                 : Precision::mixed;
  }
  if (reader.has("optimizer")) {
    training.optimizer =
        reader.choice("optimizer", {"adam", "sgd"}) == "adam" ? Optimizer::adam : Optimizer::sgd;
  }
  training.memory_limit_bytes =
      reader.optional_quantity("memory_limit", Dimension::bytes, limits::memory_limit_bytes);
  if (reader.has("micro_batch_size")) {
    // A fixed micro-batch: the scheduler tries only it.
    for (const char* key : {"min_batch_size", "max_batch_size"}) {
      if (reader.has(key)) reader.fail(key, "either micro_batch_size or a batch-size range");
    }
    training.min_batch_size = static_cast<int>(reader.integer("micro_batch_size", 1, 1 << 20));
    training.max_batch_size = training.min_batch_size;
  } else {
    training.min_batch_size =
        static_cast<int>(reader.optional_integer("min_batch_size", 1, 1 << 20).value_or(1));
    training.max_batch_size =
        static_cast<int>(reader.optional_integer("max_batch_size", 1, 1 << 20).value_or(64));
  }
  if (training.max_batch_size < training.min_batch_size) {
    reader.fail("max_batch_size",
                fmt::format("at least min_batch_size ({})", training.min_batch_size));
  }
  training.accumulation_steps =
      static_cast<int>(reader.optional_integer("accumulation_steps", 1, 1 << 16).value_or(1));
  if (reader.has("global_batch_size")) {
    if (reader.has("accumulation_steps")) {
      reader.fail("global_batch_size",
                  "either global_batch_size (the scheduler chooses micro-batch and accumulation) "
                  "or accumulation_steps, not both");
    }
    training.global_batch_size = static_cast<int>(reader.integer("global_batch_size", 1, 1 << 24));
  }
  if (reader.has("gradient_reduce")) {
    const std::string reduce = reader.choice("gradient_reduce", {"parameters", "fp32", "fp16"});
    training.gradient_reduce = reduce == "fp32"   ? ReducePrecision::fp32
                               : reduce == "fp16" ? ReducePrecision::fp16
                                                  : ReducePrecision::parameters;
  }
  return training;
}

}  // namespace osdp
