// The table of bad inputs (tests/inputs/bad_inputs.json): each is refused with an InputError
// whose message starts with the file and contains the key words of the case. The CLI tests run
// the same table through `osdp plan` for exit code 2.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "model/scenario.hpp"
#include "tests/support/bad_input_case.hpp"

using namespace osdp;

namespace {

Json read(const std::string& path) {
  std::ifstream stream(path);
  std::stringstream text;
  text << stream.rdbuf();
  return Json::parse(text.str());
}

}  // namespace

TEST_CASE("every bad input gets one clear error", "[model][errors]") {
  const std::string inputs = std::string(OSDP_SOURCE_DIR) + "/tests/inputs/";
  const Json base = read(inputs + "base_scenario.json");
  const Json cases = read(inputs + "bad_inputs.json");
  REQUIRE(cases.size() >= 40);
  // The base itself is valid.
  REQUIRE_NOTHROW(scenario_from_json(base, inputs + "base_scenario.json"));
  for (const auto& bad : cases) {
    if (test::cli_only_case(bad)) continue;
    const std::string name = bad["name"].get<std::string>();
    const std::string file = inputs + "case.json";
    std::string message = "no error";
    try {
      (void)scenario_from_json(parse_json_text(test::bad_case_text(base, bad), file), file);
    } catch (const InputError& error) {
      message = error.what();
    }
    INFO(name << ": " << message);
    CHECK(message.rfind(file, 0) == 0);
    for (const auto& word : bad["expect"]) {
      CHECK(message.find(word.get<std::string>()) != std::string::npos);
    }
  }
}
