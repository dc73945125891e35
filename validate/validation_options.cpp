#include "validate/validation_options.hpp"

#include <algorithm>
#include <cmath>

#include "model/input_error.hpp"
#include "validate/runtime_request.hpp"

namespace osdp::validate {

bool cuda_device_path_built() {
#ifdef OSDP_RUNTIME_WITH_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

// The simulator's key, its value checked here too: a runtime built without the simulator must
// not run a policy the scenario does not name.
BackwardPrefetch backward_prefetch_of(const Scenario& scenario) {
  if (!scenario.simulation.is_object()) return BackwardPrefetch::pre;
  const JsonReader simulation(scenario.simulation, scenario.file, "$.simulation");
  return read_backward_prefetch(simulation, "backward_prefetch");
}

// The simulator's gradient_all_reduce, the same for the runtime (sim/ checks the whole object).
bool dp_all_reduce_after_backward(const Scenario& scenario) {
  if (!scenario.simulation.is_object() || !scenario.simulation.contains("gradient_all_reduce")) {
    return false;
  }
  const JsonReader simulation(scenario.simulation, scenario.file, "$.simulation");
  return simulation.choice("gradient_all_reduce", {"per_operator", "after_backward"}) ==
         "after_backward";
}

}  // namespace

ValidationOptions read_validation_options(const Scenario& scenario) {
  const JsonReader reader(scenario.validation, scenario.file, "$.validation");
  reader.require_only({"batch_size", "warmup_iterations", "iterations", "rounds", "seed",
                       "learning_rate", "collective_timeout", "prefetch_depth", "device",
                       "layouts"});
  ValidationOptions options;
  options.batch_size = static_cast<int>(
      reader.optional_integer("batch_size", 1, 1 << 16).value_or(options.batch_size));
  options.warmup_iterations = static_cast<int>(
      reader.optional_integer("warmup_iterations", 0, 1000).value_or(options.warmup_iterations));
  options.iterations = static_cast<int>(
      reader.optional_integer("iterations", 1, 100000).value_or(options.iterations));
  options.rounds = static_cast<int>(reader.optional_integer("rounds", 1, 1000)
                                        .value_or(std::min(options.rounds, options.iterations)));
  if (options.rounds > options.iterations) {
    reader.fail("rounds", "at most as many rounds as measured iterations (" +
                              std::to_string(options.iterations) + ")");
  }
  options.seed = static_cast<std::uint64_t>(
      reader.optional_integer("seed", 0, 1LL << 62).value_or(static_cast<long long>(options.seed)));
  if (reader.has("learning_rate")) options.learning_rate = reader.positive_number("learning_rate");
  if (const auto timeout =
          reader.optional_quantity("collective_timeout", units::Dimension::seconds)) {
    if (*timeout < 1.0 || *timeout > 3600.0) {
      reader.fail("collective_timeout", "a timeout from 1 s to 1 h");
    }
    options.collective_timeout = std::chrono::milliseconds(std::llround(*timeout * 1000.0));
  }
  // The simulator's forward prefetch is the default, so that both sides run the same policy.
  // (The simulator's object is checked strictly by sim/; here only its value is taken.)
  const Json& simulation = scenario.simulation;
  if (simulation.is_object() && simulation.contains("forward_prefetch") &&
      simulation["forward_prefetch"].is_number_integer()) {
    options.prefetch_depth = std::clamp(simulation["forward_prefetch"].get<int>(), 0, 8);
  }
  options.prefetch_depth = static_cast<int>(
      reader.optional_integer("prefetch_depth", 0, 8).value_or(options.prefetch_depth));
  options.backward_prefetch = backward_prefetch_of(scenario);
  options.dp_all_reduce_after_backward = dp_all_reduce_after_backward(scenario);
  options.accumulation_steps = scenario.training.accumulation_steps;
  if (reader.has("layouts")) options.layouts = reader.string("layouts");
  if (reader.has("device")) {
    options.device =
        reader.choice("device", {"cpu", "cuda"}) == "cuda" ? DeviceKind::cuda : DeviceKind::cpu;
    if (options.device == DeviceKind::cuda && !cuda_device_path_built()) {
      reader.fail("device",
                  "\"cpu\": this osdp was built without the CUDA + NCCL device path (configure "
                  "with -DOSDP_WITH_CUDA=ON and CMAKE_PREFIX_PATH pointing at a CUDA libtorch)");
    }
  }
  return options;
}

void override_measured_iterations(ValidationOptions& options, int iterations, int rounds) {
  if (iterations > 0) {
    options.iterations = iterations;
    if (rounds <= 0) options.rounds = std::min(options.rounds, iterations);
  }
  if (rounds > 0) options.rounds = rounds;
  if (options.rounds > options.iterations) {
    throw InputError("command line", "--rounds", std::to_string(options.rounds),
                     "at most as many rounds as measured iterations (" +
                         std::to_string(options.iterations) + ")");
  }
}

void set_speed_probe(ValidationOptions& options, const Cluster& cluster) {
  options.speed_probe.reset();
  options.speed_probe_batch_size = 0;
  const auto& reference = cluster.gpu.speed_reference;
  if (!reference) return;
  options.speed_probe = gpt_shape_of(reference->probe);
  options.speed_probe_batch_size = reference->batch_size;
}

Json validation_options_to_json(const ValidationOptions& options) {
  return {
      {"batch_size", options.batch_size},
      {"accumulation_steps", options.accumulation_steps},
      {"warmup_iterations", options.warmup_iterations},
      {"iterations", options.iterations},
      {"rounds", options.rounds},
      {"seed", options.seed},
      {"learning_rate", options.learning_rate},
      {"collective_timeout_s", options.collective_timeout.count() / 1000.0},
      {"prefetch_depth", options.prefetch_depth},
      {"backward_prefetch", std::string(backward_prefetch_name(options.backward_prefetch))},
      {"dp_all_reduce_after_backward", options.dp_all_reduce_after_backward},
      {"device", std::string(device_kind_name(options.device))},
      {"speed_probe", options.speed_probe ? Json{{"shape", gpt_shape_to_json(*options.speed_probe)},
                                                 {"batch_size", options.speed_probe_batch_size}}
                                          : Json()}};
}

}  // namespace osdp::validate
