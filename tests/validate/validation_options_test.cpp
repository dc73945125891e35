#include "validate/validation_options.hpp"

#include <catch2/catch.hpp>

#include "model/input_error.hpp"
#include "validate/gpt_shape.hpp"
#include "validate/runtime_request.hpp"

using namespace osdp;
using namespace osdp::validate;

namespace {

Scenario tiny_scenario(const Json& validation, const Json& simulation = Json::object(),
                       const Json& training = Json::object()) {
  Json document = {{"model",
                    {{"family", "gpt"},
                     {"layers", 2},
                     {"hidden", 64},
                     {"heads", 4},
                     {"sequence_length", 16},
                     {"vocabulary", 128}}},
                   {"cluster",
                    {{"ranks", 2},
                     {"gpu", {{"compute", "10GFLOPS"}, {"memory", "1GiB"}}},
                     {"collective", {{"alpha_s", 1e-5}, {"beta_s_per_byte", 1e-9}}}}},
                   {"validation", validation},
                   {"simulation", simulation}};
  if (!training.empty()) document["training"] = training;
  return scenario_from_json(document, "test.json");
}

}  // namespace

TEST_CASE("the scenario's validation object", "[validate][options]") {
  const ValidationOptions defaults = read_validation_options(tiny_scenario(Json::object()));
  CHECK(defaults.iterations == 9);
  CHECK(defaults.rounds == 3);
  CHECK(defaults.prefetch_depth == 1);
  const ValidationOptions set = read_validation_options(tiny_scenario(
      {{"iterations", 3}, {"collective_timeout", "2s"}, {"batch_size", 8}, {"seed", 4}}));
  CHECK(set.iterations == 3);
  CHECK(set.rounds == 3);  // the default, at most the iterations
  CHECK(read_validation_options(tiny_scenario({{"iterations", 2}})).rounds == 2);
  CHECK(read_validation_options(tiny_scenario({{"iterations", 6}, {"rounds", 2}})).rounds == 2);
  CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"iterations", 2}, {"rounds", 3}})),
                  InputError);
  CHECK(set.collective_timeout == std::chrono::seconds(2));
  CHECK(set.batch_size == 8);
  CHECK(set.seed == 4);
  CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"iteration", 3}})), InputError);
  CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"collective_timeout", "1ms"}})),
                  InputError);
  // The simulator's forward prefetch is the runtime's default; "prefetch_depth" wins.
  CHECK(read_validation_options(tiny_scenario(Json::object(), {{"forward_prefetch", 0}}))
            .prefetch_depth == 0);
  CHECK(read_validation_options(tiny_scenario({{"prefetch_depth", 2}}, {{"forward_prefetch", 0}}))
            .prefetch_depth == 2);
}

TEST_CASE("the validator runs the GPT the scenario was generated from", "[validate][options]") {
  const Scenario scenario = tiny_scenario(Json::object());
  const GptShape shape = require_gpt_shape(scenario, "test.json");
  CHECK(shape.layers == 2);
  CHECK(shape.hidden == 64);
  CHECK(shape.heads == 4);
  CHECK(shape.sequence_length == 16);
  CHECK(shape.vocabulary == 128);
  // The runtime's GPT is the workload the plans were made for, operator by operator.
  const Workload rebuilt = make_gpt(shape.spec(), scenario.training);
  REQUIRE(rebuilt.size() == scenario.workload->size());
  for (int i = 0; i < rebuilt.size(); ++i) {
    CHECK(rebuilt.op(i).name == scenario.workload->op(i).name);
    CHECK(rebuilt.op(i).parameter_count == scenario.workload->op(i).parameter_count);
    CHECK(rebuilt.op(i).activation_bytes_per_sample ==
          scenario.workload->op(i).activation_bytes_per_sample);
  }
  Scenario mixed = scenario;
  mixed.training.precision = Precision::mixed;
  CHECK_THROWS_AS(require_gpt_shape(mixed, "test.json"), InputError);
  Scenario listed = scenario;
  listed.gpt.reset();  // an explicit operator list keeps no spec
  CHECK_THROWS_AS(require_gpt_shape(listed, "test.json"), InputError);
  Scenario inconsecutive = scenario;
  inconsecutive.gpt->hidden_sizes = {64, 128};
  CHECK_THROWS_AS(require_gpt_shape(inconsecutive, "test.json"), InputError);
}

TEST_CASE("the backward prefetch policy is the simulator's", "[validate][options]") {
  CHECK(read_validation_options(tiny_scenario(Json::object())).backward_prefetch ==
        BackwardPrefetch::pre);
  CHECK(read_validation_options(tiny_scenario(Json::object(), {{"backward_prefetch", "post"}}))
            .backward_prefetch == BackwardPrefetch::post);
  CHECK(read_validation_options(tiny_scenario(Json::object(), {{"backward_prefetch", "none"}}))
            .backward_prefetch == BackwardPrefetch::none);
  CHECK_THROWS_AS(
      read_validation_options(tiny_scenario(Json::object(), {{"backward_prefetch", "late"}})),
      InputError);
  // No key of its own in "validation": one setting drives simulator and runtime.
  CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"backward_prefetch", "post"}})),
                  InputError);
}

TEST_CASE("the device: cpu, or cuda in a build with the device path", "[validate][options]") {
  CHECK(read_validation_options(tiny_scenario(Json::object())).device == DeviceKind::cpu);
  CHECK(read_validation_options(tiny_scenario({{"device", "cpu"}})).device == DeviceKind::cpu);
  CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"device", "gpu"}})), InputError);
  if (cuda_device_path_built()) {
    CHECK(read_validation_options(tiny_scenario({{"device", "cuda"}})).device == DeviceKind::cuda);
  } else {
    CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"device", "cuda"}})), InputError);
  }
}

TEST_CASE("gradient accumulation is the training's, and reaches the runtime",
          "[validate][options]") {
  CHECK(read_validation_options(tiny_scenario(Json::object())).accumulation_steps == 1);
  const ValidationOptions options = read_validation_options(
      tiny_scenario({{"batch_size", 2}}, Json::object(), {{"accumulation_steps", 3}}));
  CHECK(options.accumulation_steps == 3);
  CHECK(options.batch_size == 2);
  // No key of its own in "validation": the planner, simulator and runtime share one setting.
  CHECK_THROWS_AS(read_validation_options(tiny_scenario({{"accumulation_steps", 3}})), InputError);
  // The request osdp-runtime reads carries it.
  MeasureRequest request;
  request.shape = GptShape{2, 64, 4, 16, 128};
  request.options = options;
  const MeasureRequest read = measure_request_from_json(measure_request_to_json(request), "r.json");
  CHECK(read.options.accumulation_steps == 3);
  Json bad = measure_request_to_json(request);
  bad["options"]["accumulation_steps"] = 0;
  CHECK_THROWS_AS(measure_request_from_json(bad, "r.json"), InputError);
}

TEST_CASE("the DP gradients' all-reduce is the simulator's, and reaches the runtime",
          "[validate][options]") {
  CHECK_FALSE(read_validation_options(tiny_scenario(Json::object())).dp_all_reduce_after_backward);
  CHECK_FALSE(read_validation_options(
                  tiny_scenario(Json::object(), {{"gradient_all_reduce", "per_operator"}}))
                  .dp_all_reduce_after_backward);
  const ValidationOptions options = read_validation_options(
      tiny_scenario(Json::object(), {{"gradient_all_reduce", "after_backward"}}));
  CHECK(options.dp_all_reduce_after_backward);
  CHECK_THROWS_AS(
      read_validation_options(tiny_scenario(Json::object(), {{"gradient_all_reduce", "late"}})),
      InputError);
  MeasureRequest request;
  request.shape = GptShape{2, 64, 4, 16, 128};
  request.options = options;
  CHECK(measure_request_from_json(measure_request_to_json(request), "r.json")
            .options.dp_all_reduce_after_backward);
}
