#include "validate/runtime_request.hpp"

#include <cmath>

namespace osdp::validate {

Json gpt_shape_to_json(const GptShape& shape) {
  return {{"layers", shape.layers},         {"hidden", shape.hidden},
          {"heads", shape.heads},           {"sequence_length", shape.sequence_length},
          {"vocabulary", shape.vocabulary}, {"dropout", shape.dropout}};
}

GptShape gpt_shape_from_json(const JsonReader& reader) {
  reader.require_only({"layers", "hidden", "heads", "sequence_length", "vocabulary", "dropout"});
  GptShape shape;
  shape.layers = static_cast<int>(reader.integer("layers", 1, 1 << 16));
  shape.hidden = static_cast<int>(reader.integer("hidden", 1, 1 << 20));
  shape.heads = static_cast<int>(reader.integer("heads", 1, 1 << 16));
  shape.sequence_length = static_cast<int>(reader.integer("sequence_length", 1, 1 << 24));
  shape.vocabulary = static_cast<int>(reader.integer("vocabulary", 1, 1 << 24));
  shape.dropout = reader.non_negative_number("dropout");
  return shape;
}

ValidationOptions validation_options_from_json(const JsonReader& reader) {
  reader.require_only({"batch_size", "accumulation_steps", "warmup_iterations", "iterations",
                       "rounds", "seed", "learning_rate", "collective_timeout_s", "prefetch_depth",
                       "backward_prefetch", "dp_all_reduce_after_backward", "device",
                       "speed_probe"});
  ValidationOptions options;
  options.batch_size = static_cast<int>(reader.integer("batch_size", 1, 1 << 16));
  options.accumulation_steps = static_cast<int>(reader.integer("accumulation_steps", 1, 1 << 16));
  options.warmup_iterations = static_cast<int>(reader.integer("warmup_iterations", 0, 1000));
  options.iterations = static_cast<int>(reader.integer("iterations", 1, 100000));
  options.rounds = static_cast<int>(reader.integer("rounds", 1, options.iterations));
  options.seed = static_cast<std::uint64_t>(reader.integer("seed", 0, 1LL << 62));
  options.learning_rate = reader.positive_number("learning_rate");
  options.collective_timeout = std::chrono::milliseconds(
      std::llround(1000.0 * reader.positive_number("collective_timeout_s")));
  options.prefetch_depth = static_cast<int>(reader.integer("prefetch_depth", 0, 8));
  options.backward_prefetch = read_backward_prefetch(reader, "backward_prefetch");
  options.dp_all_reduce_after_backward =
      reader.optional_boolean("dp_all_reduce_after_backward").value_or(false);
  options.device =
      reader.choice("device", {"cpu", "cuda"}) == "cuda" ? DeviceKind::cuda : DeviceKind::cpu;
  if (reader.has("speed_probe") && !reader.raw("speed_probe").is_null()) {
    const JsonReader probe = reader.object("speed_probe");
    probe.require_only({"shape", "batch_size"});
    options.speed_probe = gpt_shape_from_json(probe.object("shape"));
    options.speed_probe_batch_size = static_cast<int>(probe.integer("batch_size", 1, 1 << 16));
  }
  return options;
}

Json measure_request_to_json(const MeasureRequest& request) {
  return {{"shape", gpt_shape_to_json(request.shape)},
          {"plans", plan_runs_to_json(request.plans)},
          {"local_ranks", request.local_ranks},
          {"options", validation_options_to_json(request.options)},
          {"gpus_per_node", request.gpus_per_node},
          {"trace_directory", request.trace_directory}};
}

MeasureRequest measure_request_from_json(const Json& json, const std::string& file) {
  const JsonReader reader(json, file);
  reader.require_only(
      {"shape", "plans", "local_ranks", "options", "gpus_per_node", "trace_directory"});
  MeasureRequest request;
  request.shape = gpt_shape_from_json(reader.object("shape"));
  request.plans = plan_runs_from_json(reader);
  request.local_ranks = static_cast<int>(reader.integer("local_ranks", 1, 1024));
  request.options = validation_options_from_json(reader.object("options"));
  request.gpus_per_node = static_cast<int>(reader.integer("gpus_per_node", 1, 1 << 16));
  request.trace_directory = reader.string("trace_directory");
  return request;
}

Json measure_response_to_json(const std::optional<std::vector<PlanMeasurement>>& measurements,
                              const std::vector<ComputeCheck>& compute_check) {
  if (!measurements) return {{"reported", false}};
  return {{"reported", true},
          {"measurements", measurements_to_json(*measurements)},
          {"compute_check", compute_check_to_json(compute_check)}};
}

std::optional<std::vector<PlanMeasurement>> measure_response_from_json(
    const Json& json, const std::string& file, std::vector<ComputeCheck>* compute_check) {
  const JsonReader reader(json, file);
  reader.require_only({"reported", "measurements", "compute_check"});
  if (compute_check) {
    *compute_check = reader.has("compute_check") ? compute_check_from_json(reader, "compute_check")
                                                 : std::vector<ComputeCheck>{};
  }
  if (!reader.boolean("reported")) return std::nullopt;
  return measurements_from_json(reader.raw("measurements"), file);
}

}  // namespace osdp::validate
