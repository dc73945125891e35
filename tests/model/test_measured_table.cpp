// Reading vTrain's measured-table format: the published header exactly, whole numbers, the
// time in ms; every error names the file, the row's line, the column and the value.
#include <catch2/catch.hpp>

#include "model/input_error.hpp"
#include "model/measured_runs.hpp"
#include "model/measured_table.hpp"

using namespace osdp;

namespace {

const std::string header =
    "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
    "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n";

std::string error_of(const std::string& text) {
  try {
    parse_measured_table(text, "m.csv");
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a measured table is read with its accumulation steps", "[table]") {
  const MeasuredTable table =
      parse_measured_table(header + "2,32,4,1024,16,12,1024,1,2,1,321.7926\r\n", "m.csv");
  REQUIRE(table.runs.size() == 1);
  const MeasuredRun& run = table.runs[0];
  CHECK(run.line == 2);
  CHECK(run.accumulation_steps() == 4);
  CHECK(run.iteration_time_s == Approx(0.3217926));
  CHECK(run.model_size() == "h1024-a16-l12-s1024");
  CHECK(table.has_times());
  const MeasuredTable configs = parse_measured_table(
      header.substr(0, header.find(",iteration")) + "\n8,64,2,2048,16,24,1024,1,8,1\n", "c.csv");
  CHECK_FALSE(configs.runs[0].iteration_time_s);
}

TEST_CASE("bad measured tables name file, row, column and value", "[table][errors]") {
  CHECK_THAT(error_of("GPUs,global batch\n2,4\n"),
             Catch::Contains("m.csv") && Catch::Contains("header") &&
                 Catch::Contains("# GPUs,global batch,micro batch"));
  CHECK_THAT(error_of(header + "2,32,4,1024,16,12,1024,1,2,1\n"),
             Catch::Contains("line 2") && Catch::Contains("10 cells") &&
                 Catch::Contains("11 comma-separated cells"));
  CHECK_THAT(error_of(header + "2,32,four,1024,16,12,1024,1,2,1,3.5\n"),
             Catch::Contains("m.csv") && Catch::Contains("line 2") &&
                 Catch::Contains("\"micro batch\"") && Catch::Contains("\"four\"") &&
                 Catch::Contains("whole number"));
  CHECK_THAT(error_of(header + "2,32,4,1024,16,12,1024,1,2,1,3.5\n2,32,4,1024,16,12,1024,1,2,1,"
                               "fast\n"),
             Catch::Contains("line 3") && Catch::Contains("iteration time (ms)") &&
                 Catch::Contains("\"fast\"") && Catch::Contains("milliseconds"));
  CHECK_THAT(error_of(header + "4,32,4,1024,16,12,1024,1,2,1,3.5\n"),
             Catch::Contains("\"# GPUs\"") && Catch::Contains("tensor x data x pipeline"));
  CHECK_THAT(error_of(header + "2,30,4,1024,16,12,1024,1,2,1,3.5\n"),
             Catch::Contains("\"global batch\"") && Catch::Contains("30"));
  CHECK_THAT(error_of(header), Catch::Contains("at least one row"));
  CHECK_THAT(error_of(""), Catch::Contains("header"));
}

TEST_CASE("a header that differs names its first differing column, invisible characters shown",
          "[table][errors]") {
  const std::string row = "2,32,4,1024,16,12,1024,1,2,1,3.5\n";
  std::string renamed = header;
  renamed.replace(renamed.find("micro batch"), 11, "micro-batch");
  CHECK_THAT(error_of(renamed + row),
             Catch::Contains("column 3 is \"micro-batch\" where \"micro batch\" is expected"));
  const std::string extra = header.substr(0, header.size() - 1) + ",extra\n";
  CHECK_THAT(error_of(extra + row), Catch::Contains("column 12, \"extra\", is one too many"));
  const std::string carriage = header.substr(0, header.size() - 1) + "\r,extra\n";
  CHECK_THAT(error_of(carriage + row), Catch::Contains("\"iteration time (ms)\\r\""));
  std::string missing = header;
  missing.erase(missing.find(",pipeline parallelism"), 21);
  CHECK_THAT(
      error_of(missing + row),
      Catch::Contains("column 10 is \"iteration time (ms)\" where \"pipeline parallelism\""));
  const std::string timeless_missing = missing.substr(0, missing.find(",iteration")) + "\n";
  CHECK_THAT(error_of(timeless_missing + "2,32,4,1024,16,12,1024,1,2\n"),
             Catch::Contains("column 10, \"pipeline parallelism\", is missing"));
  // A spreadsheet's byte-order mark before the header is not part of the first column.
  CHECK(parse_measured_table("\xEF\xBB\xBF" + header + row, "m.csv").runs.size() == 1);
}

TEST_CASE("rows whose tensor parallelism does not divide the heads are refused by name",
          "[table][errors]") {
  const MeasuredTable table =
      parse_measured_table(header + "6,32,4,1024,16,12,1024,3,2,1,3.5\n", "m.csv");
  Scenario scenario;
  scenario.gpt = GptSpec{};
  try {
    (void)scenario_for_run(scenario, table, table.runs[0]);
    FAIL("no error");
  } catch (const InputError& error) {
    CHECK_THAT(std::string(error.what()), Catch::Contains("m.csv") && Catch::Contains("line 2") &&
                                              Catch::Contains("tensor parallelism"));
  }
}
