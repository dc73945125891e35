// Loading inputs: the paper's own form, units, and clear errors naming path, value, expectation.
#include <catch2/catch.hpp>

#include "model/scenario.hpp"

using namespace osdp;

namespace {

const char* paper_form = R"({
  "model": {"operators": [
    {"name": "op0", "parameter_bytes": 50331648, "model_state_bytes": 201326592,
     "activation_bytes_per_sample": 12582912, "extra_bytes": 0,
     "compute_s_per_sample": 0.0021}
  ]},
  "cluster": {"ranks": 8, "collective": {"alpha_s": 5e-6, "beta_s_per_byte": 8.3e-11}},
  "training": {"memory_limit": "8GiB", "max_batch_size": 64},
  "cost_model": "paper"
})";

Scenario load(const std::string& text) {
  return scenario_from_json(Json::parse(text), "test.json");
}

// The message of the InputError thrown by loading `text`.
std::string error_of(const std::string& text) {
  try {
    load(text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("the paper's input form loads as written", "[model][scenario]") {
  const Scenario scenario = load(paper_form);
  REQUIRE(scenario.workload->size() == 1);
  const Operator& op = scenario.workload->op(0);
  CHECK(op.parameter_bytes == 50331648);
  CHECK(op.model_state_bytes() == 201326592);
  CHECK(scenario.cluster.ranks == 8);
  CHECK(scenario.cluster.world.all_gather.alpha_beta.alpha_s == 5e-6);
  CHECK(*scenario.training.memory_limit_bytes == 8.0 * 1073741824.0);
  CHECK(scenario.cost.kind == CostModelKind::paper);
}

TEST_CASE("bad inputs name the path, the value and what was expected", "[model][scenario]") {
  struct Case {
    std::string from, to;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases{
      {R"("ranks": 8)", R"("ranks": 0)", {"$.cluster.ranks", "0", "integer from 1"}},
      {R"("ranks": 8)", R"("rank": 8)", {"$.cluster.rank", "did you mean \"ranks\""}},
      {R"("8GiB")", R"("8 parsecs")", {"$.training.memory_limit", "8 parsecs", "size in bytes"}},
      {R"("8GiB")", R"("-8GiB")", {"$.training.memory_limit", "above zero"}},
      {R"("paper")", R"("papr")", {"$.cost_model", "one of"}},
      {R"("max_batch_size": 64)", R"("max_batch_size": 1.5)", {"max_batch_size", "integer"}},
      {R"("alpha_s": 5e-6)", R"("alpha_s": -1)", {"alpha_s", "from 0 to 1"}},
      {R"("model_state_bytes": 201326592)",
       R"("model_state_bytes": 10)",
       {"model_state_bytes", "at least parameter + gradient"}},
      {R"("compute_s_per_sample": 0.0021)",
       R"("compute_s_per_sample": "fast")",
       {"compute_s_per_sample", "duration"}},
      {R"("name": "op0")", R"("name": 7)", {"operators[0].name", "a string"}},
      {R"("extra_bytes": 0)",
       R"("extra_bytez": 0)",
       {"extra_bytez", "did you mean \"extra_bytes\""}},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(replace(paper_form, c.from, c.to));
    INFO(message);
    CHECK(message.rfind("test.json", 0) == 0);
    for (const auto& word : c.words) CHECK(message.find(word) != std::string::npos);
  }
}

TEST_CASE("a GPT with a hidden size not divisible by heads is refused", "[model][scenario]") {
  const std::string text = R"({
    "model": {"family": "gpt", "layers": 2, "hidden": 100, "heads": 16},
    "cluster": {"ranks": 2, "gpu": {"memory": "24GiB", "compute": "10TFLOPS"},
                "collective": {"alpha": "5us", "bandwidth": "12GBps"}}
  })";
  const std::string message = error_of(text);
  CHECK(message.find("$.model.hidden") != std::string::npos);
  CHECK(message.find("divisible by heads") != std::string::npos);
}

TEST_CASE("topologies derive ring alpha-beta: mean hop latency, narrowest bandwidth",
          "[model][cluster]") {
  const std::string text = R"({
    "model": {"family": "gpt", "layers": 2, "hidden": 256, "heads": 4},
    "cluster": {"gpu": {"memory": "24GiB", "compute": "10TFLOPS"},
      "topology": {"kind": "pcie", "gpus_per_node": 8, "gpu_link": {"bandwidth": "12GBps", "latency": "1us"},
        "pcie": {"sockets": 2, "switches_per_socket": 2,
                 "switch_uplink": {"bandwidth": "12GBps", "latency": "1us"},
                 "inter_socket": {"bandwidth": "9GBps", "latency": "2us"}}}}
  })";
  const Scenario scenario = load(text);
  CHECK(scenario.cluster.ranks == 8);
  const AlphaBeta ring = scenario.cluster.world.all_gather.alpha_beta;
  // 8 hops: 4 within a switch (two ports), 2 between a socket's switches (ports and uplinks),
  // 2 between sockets (and the inter-socket link).
  CHECK(ring.alpha_s == Approx((4 * 2e-6 + 2 * 4e-6 + 2 * 6e-6) / 8));
  CHECK(ring.beta_s_per_byte == Approx(1 / 9e9));
}

TEST_CASE("plans are checked against the model and the cluster", "[model][plan]") {
  const Scenario scenario = load(paper_form);
  const CostModel model = scenario.cost_model();
  auto plan_error = [&](const std::string& text) {
    try {
      (void)load_plan(JsonReader(Json::parse(text), "plan.json"), *scenario.workload, model);
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK(plan_error(R"({"batch_size": 2, "operators": [{"name": "op0", "mode": "zdp"}]})") ==
        "no error");
  CHECK(
      plan_error(R"({"batch_size": 2, "ranks": 16, "operators": [{"name": "op0", "mode": "zdp"}]})")
          .find("$.ranks: got 16: expected the cluster's world size (8 ranks)") !=
      std::string::npos);
  CHECK(plan_error(R"({"batch_size": 2, "operators": [{"name": "op9", "mode": "zdp"}]})")
            .find("$.operators[0].name") != std::string::npos);
  CHECK(plan_error(R"({"batch_size": 2, "operators": []})").find("missing \"op0\"") !=
        std::string::npos);
  CHECK(plan_error(R"({"batch_size": 2, "operators": [{"name": "op0", "mode": "hsdp"}]})")
            .find("a choice the operator and cluster allow") != std::string::npos);
  // The figures plan --json writes beside the choices are not read, but must be of their kind.
  const std::string op0 = R"("operators": [{"name": "op0", "mode": "zdp"}])";
  CHECK(plan_error(R"({"batch_size": 2, "iteration_time_s": 0.5, "search_proven_gap": null,
                       "cost_model": "paper", "strategy": "osdp", "baselines": [], )" +
                   op0 + "}") == "no error");
  CHECK(plan_error(R"({"batch_size": 2, "iteration_time_s": "fast", )" + op0 + "}")
            .find("$.iteration_time_s") != std::string::npos);
  CHECK(
      plan_error(R"({"batch_size": 2, "cost_model": "exact", )" + op0 + "}").find("$.cost_model") !=
      std::string::npos);
  CHECK(plan_error(R"({"batch_size": 2, "baselines": {}, )" + op0 + "}").find("$.baselines") !=
        std::string::npos);
}

TEST_CASE("an error message shows control characters escaped, never raw", "[model][errors]") {
  // A CSV cell or a command-line value holding an escape sequence (one that retitles the
  // terminal) is shown as text; a message's own line breaks stay.
  const InputError error("t\x07.csv", "column \"Model\"", "30b\x1b]0;pwned\x07",
                         "a name\n  (line two)");
  const std::string message = error.what();
  CHECK(message ==
        "t\\u0007.csv: column \"Model\": got 30b\\u001b]0;pwned\\u0007: expected a "
        "name\n  (line two)");
  for (const char c : message) CHECK((static_cast<unsigned char>(c) >= 0x20 || c == '\n'));
}
