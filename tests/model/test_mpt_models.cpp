// The shipped MPT model files (scenarios/models/mpt-*.json: llm-foundry's shapes, tied
// embeddings, learned positions, FlashAttention) count exactly the parameters llm-foundry's
// published benchmark table reports for every run (NumParams, which grows with the sequence
// length through the position table).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/json_reader.hpp"
#include "model/workload.hpp"
#include "model/workload_json.hpp"

namespace osdp {
namespace {

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, ',')) cells.push_back(cell);
  return cells;
}

TEST_CASE("MPT model files count llm-foundry's published parameters exactly", "[model][mpt]") {
  const std::filesystem::path table =
      std::filesystem::path(OSDP_SOURCE_DIR) / ".." / "shared" / "data" / "foundry-fsdp-fit.csv";
  if (!std::filesystem::exists(table)) {
    WARN("skipped: " << table << " is not there");
    return;
  }
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = cells_of(line);
  const auto column = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::size_t model = column("Model"), sequence = column("SeqLen (T)"),
                    parameters = column("NumParams");
  REQUIRE(parameters < header.size());
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = cells_of(line);
    const std::string path =
        std::string(OSDP_SOURCE_DIR) + "/scenarios/models/mpt-" + cells[model] + ".json";
    GptSpec spec = read_gpt_spec(JsonReader(read_json_file(path), path));
    spec.sequence_length = std::stoi(cells[sequence]);
    CAPTURE(cells[model], cells[sequence]);
    CHECK(make_gpt(spec, Training{}).parameter_count() == std::stod(cells[parameters]));
    ++rows;
  }
  CHECK(rows == 92);
}

}  // namespace
}  // namespace osdp
