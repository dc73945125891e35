// libFuzzer harness for the JSON loaders, the measured tables' CSV readers (vTrain's,
// llm-foundry's and the kernel tables, whose laws are fitted when they load) and the unit parser.
// Any input must either load or raise an InputError: another exception, a crash, a leak or a
// sanitizer report is a bug.
//   cmake --preset fuzz && cmake --build --preset fuzz
//   ./build/fuzz/tests/fuzz/fuzz_loaders tests/fuzz/corpus -dict=tests/fuzz/loaders.dict \
//     -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/foundry_table.hpp"
#include "model/input_error.hpp"
#include "model/kernel_table.hpp"
#include "model/measured_table.hpp"
#include "model/scenario.hpp"
#include "model/units.hpp"

namespace {

void parse_every_unit(const std::string& text) {
  using osdp::units::Dimension;
  for (Dimension dimension : {Dimension::bytes, Dimension::seconds, Dimension::bytes_per_second,
                              Dimension::flops_per_second}) {
    (void)osdp::units::parse(text, dimension);
  }
}

void load_everything(const std::string& text) {
  osdp::Json document;
  try {
    document = osdp::parse_json_text(text, "fuzz.json");
  } catch (const osdp::InputError&) {
    return;
  }
  try {
    const osdp::Scenario scenario = osdp::scenario_from_json(document, "fuzz.json");
    // A scenario that loads must also cost out and round-trip an all-DP plan.
    osdp::Plan plan;
    plan.batch_size = 1;
    plan.choices.assign(scenario.workload->size(), osdp::OperatorChoice{});
    const osdp::CostModel model = scenario.cost_model();
    (void)model.plan_cost(plan);
    const osdp::Json written = osdp::plan_to_json(plan, *scenario.workload);
    (void)osdp::load_plan(osdp::JsonReader(written, "plan.json"), *scenario.workload, model);
  } catch (const osdp::InputError&) {
  }
  // Plans against a fixed small model.
  try {
    static const osdp::Scenario fixed = osdp::scenario_from_json(
        osdp::Json::parse(R"({"model": {"family": "gpt", "layers": 2, "hidden": 64, "heads": 4,
          "sequence_length": 16, "vocabulary": 128},
          "cluster": {"ranks": 2, "gpu": {"memory": "1GiB", "compute": "1TFLOPS"},
                      "collective": {"alpha": "5us", "bandwidth": "10GBps"}}})"),
        "fixed.json");
    if (document.is_object()) {
      (void)osdp::load_plan(osdp::JsonReader(document, "fuzz.json"), *fixed.workload,
                            fixed.cost_model());
    }
  } catch (const osdp::InputError&) {
  }
}

// The CSV readers take the text as a file's contents; both refuse what is not theirs.
void read_tables(const std::string& text) {
  try {
    (void)osdp::parse_measured_table(text, "fuzz.csv");
  } catch (const osdp::InputError&) {
  }
  try {
    (void)osdp::parse_foundry_table(text, "fuzz.csv");
  } catch (const osdp::InputError&) {
  }
  try {
    (void)osdp::fit_kernel_table(osdp::parse_kernel_table(text, "fuzz.csv"));
  } catch (const osdp::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (size < 64) parse_every_unit(text);
  load_everything(text);
  read_tables(text);
  return 0;
}
