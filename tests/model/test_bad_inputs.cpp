// The table of bad inputs (tests/inputs/bad_inputs.json): each is refused with an InputError
// whose message starts with the file and contains the key words of the case. The CLI tests run
// the same table through `osdp plan` for exit code 2.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "model/scenario.hpp"

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
    const std::string name = bad["name"].get<std::string>();
    const std::string file = inputs + "case.json";
    std::string message = "no error";
    try {
      if (bad.contains("text")) {
        (void)scenario_from_json(parse_json_text(bad["text"].get<std::string>(), file), file);
      } else {
        Json document = base;
        if (bad.contains("set")) {
          for (const auto& [pointer, value] : bad["set"].items()) {
            if (value.is_null()) {
              document.at(Json::json_pointer(pointer).parent_pointer())
                  .erase(Json::json_pointer(pointer).back());
            } else {
              document[Json::json_pointer(pointer)] = value;
            }
          }
        }
        if (bad.contains("remove")) {
          for (const auto& pointer : bad["remove"]) {
            const Json::json_pointer at(pointer.get<std::string>());
            document.at(at.parent_pointer()).erase(at.back());
          }
        }
        (void)scenario_from_json(document, file);
      }
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
