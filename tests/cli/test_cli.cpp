// Runs the built `osdp` on the scenarios and checks what a user sees: exit codes (0, 2 bad
// input, 3 nothing fits), messages, `plan --json` loadable as a plan, and sweep's files.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/scenario.hpp"

namespace fs = std::filesystem;

namespace {

const std::string source_dir = OSDP_SOURCE_DIR;
const std::string scenarios = source_dir + "/scenarios/";

// A fresh temporary directory, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "osdp-cli-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code error;
    fs::remove_all(path_, error);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string read_text(const fs::path& path) {
  std::ifstream stream(path);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

Run run_osdp(const std::vector<std::string>& args) {
  TempDir capture;
  std::string command = quote(OSDP_EXE);
  for (const auto& arg : args) {
    command += ' ';
    command += quote(arg);
  }
  const fs::path out = capture.path() / "stdout";
  const fs::path err = capture.path() / "stderr";
  command += " >";
  command += quote(out.string());
  command += " 2>";
  command += quote(err.string());
  command += " </dev/null";
  const int status = std::system(command.c_str());
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(out);
  run.err = read_text(err);
  return run;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream stream(path);
  stream << text;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, separator)) cells.push_back(cell);
  if (!line.empty() && line.back() == separator) cells.emplace_back();
  return cells;
}

std::vector<std::string> temporary_files(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".tmp", 0) == 0) names.push_back(name);
  }
  return names;
}

}  // namespace

TEST_CASE("plan prints the plan, its peak and the baselines") {
  const Run run = run_osdp({"plan", scenarios + "default.json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.out, "OSDP plan: batch size"));
  CHECK(contains(run.out, "samples/s"));
  CHECK(contains(run.out, "peak memory"));
  CHECK(contains(run.out, "set by"));
  CHECK(contains(run.out, "search time"));
  CHECK(contains(run.out, "embedding"));
  for (const char* strategy :
       {"ddp", "fsdp", "zero2", "ddp+ckpt", "fsdp+ckpt", "zero2+ckpt", "fsdp+ckpt-fairscale"}) {
    CHECK(contains(run.out, std::string("\n  ") + strategy + " "));
  }
  CHECK(contains(run.out, "OOM"));  // DDP does not fit 8 GiB for this 1.5 B model
  CHECK(run.err.empty());
}

TEST_CASE("plan --json has the documented keys and loads back as a plan") {
  const Run run = run_osdp({"plan", scenarios + "default.json", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const osdp::Json document = osdp::Json::parse(run.out);
  for (const char* key :
       {"batch_size", "iteration_time_s", "throughput_samples_per_s", "peak_memory_bytes",
        "peak_memory_cause", "operators", "baselines", "memory_limit_bytes", "search_time_s",
        "search_proven_gap", "search_stopped_early", "cost_model", "ranks"}) {
    CHECK(document.contains(key));
  }
  CHECK(document["peak_memory_bytes"].get<double>() <=
        document["memory_limit_bytes"].get<double>());
  REQUIRE(document["operators"].size() == 98);
  CHECK(document["operators"][0]["name"] == "embedding");
  CHECK(document["operators"][0].contains("mode"));
  CHECK(document["baselines"].size() == 7);
  bool fairscale = false;
  for (const auto& baseline : document["baselines"]) {
    CHECK(baseline.contains("description"));
    fairscale = fairscale || baseline["strategy"] == "fsdp+ckpt-fairscale";
  }
  CHECK(fairscale);

  TempDir dir;
  const fs::path plan_file = dir.path() / "plan.json";
  write_text(plan_file, run.out);
  const osdp::Scenario scenario = osdp::load_scenario(scenarios + "default.json");
  const osdp::CostModel model = scenario.cost_model();
  const osdp::Plan plan = osdp::load_plan_file(plan_file.string(), *scenario.workload, model);
  CHECK(plan.batch_size == document["batch_size"].get<int>());
  const osdp::PlanCost cost = model.plan_cost(plan);
  CHECK(cost.throughput_samples_per_s ==
        Approx(document["throughput_samples_per_s"].get<double>()).epsilon(1e-9));
  CHECK(cost.peak_memory_bytes ==
        Approx(document["peak_memory_bytes"].get<double>()).epsilon(1e-9));
}

TEST_CASE("simulate runs both checkpointed FSDP baselines; FairScale's re-gathers") {
  const Run help = run_osdp({"--help"});
  if (!contains(help.out, "simulate")) return;  // a build without the simulator
  double recompute_gather_s[2] = {-1, -1};
  int index = 0;
  for (const char* strategy : {"fsdp+ckpt", "fsdp+ckpt-fairscale"}) {
    const Run run =
        run_osdp({"simulate", scenarios + "default.json", "--strategy", strategy, "--json"});
    INFO(strategy << ": " << run.err);
    REQUIRE(run.exit_code == 0);
    const osdp::Json document = osdp::Json::parse(run.out);
    recompute_gather_s[index++] = document["exposed_comm_s"]["ag_recompute"].get<double>();
  }
  CHECK(recompute_gather_s[0] == 0.0);  // PyTorch FSDP(checkpoint(op)): no recompute gather
  CHECK(recompute_gather_s[1] > 0.0);   // FairScale checkpoint_wrapper(FSDP(op)): one more
  const Run bad =
      run_osdp({"simulate", scenarios + "default.json", "--strategy", "fsdp+ckpt-torch"});
  CHECK(bad.exit_code == 2);
  CHECK(contains(bad.err, "fsdp+ckpt-fairscale"));
}

TEST_CASE("the paper-form scenario loads and the paper's problem has a plan") {
  const Run run = run_osdp({"plan", scenarios + "paper-form.json", "--modes", "dp,zdp", "--split",
                            "1", "--checkpoint", "off", "--cost-model", "paper", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const osdp::Json document = osdp::Json::parse(run.out);
  CHECK(document["cost_model"] == "paper");
  REQUIRE(document["operators"].size() == 1);
  CHECK(document["operators"][0]["name"] == "op0");
  const std::string mode = document["operators"][0]["mode"];
  CHECK((mode == "dp" || mode == "zdp"));
  CHECK(document["batch_size"].get<int>() >= 1);
  CHECK(document["batch_size"].get<int>() <= 64);
}

TEST_CASE("bad input exits 2 with a message naming what is wrong") {
  SECTION("missing file") {
    const Run run = run_osdp({"plan", scenarios + "no-such-scenario.json"});
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, "osdp: error:"));
    CHECK(contains(run.err, "no-such-scenario.json"));
    CHECK(run.out.empty());
  }
  SECTION("a typo'd key, with a suggestion") {
    TempDir dir;
    const fs::path file = dir.path() / "typo.json";
    write_text(file, "{\"model\": \"" + scenarios + "models/nd-48l-1536h.json\", \"cluster\": \"" +
                         scenarios + "clusters/titan-rtx-8x-pcie3.json\", \"trainnig\": {}}");
    const Run run = run_osdp({"plan", file.string()});
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, "typo.json"));
    CHECK(contains(run.err, "$.trainnig"));
    CHECK(contains(run.err, "unknown key"));
    CHECK(contains(run.err, "did you mean \"training\""));
  }
  SECTION("a bad value deep inside an included file") {
    TempDir dir;
    const fs::path file = dir.path() / "bad-limit.json";
    write_text(file, "{\"model\": \"" + scenarios + "models/nd-48l-1536h.json\", \"cluster\": \"" +
                         scenarios +
                         "clusters/titan-rtx-8x-pcie3.json\", \"training\": {\"memory_limit\": "
                         "\"8 parsecs\"}}");
    const Run run = run_osdp({"plan", file.string()});
    CHECK(run.exit_code == 2);
    CHECK(contains(run.err, "$.training.memory_limit"));
    CHECK(contains(run.err, "8 parsecs"));
  }
  SECTION("bad flags") {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"--modes", "dp,zpd"}, "--modes"},
        {{"--split", "3"}, "--split"},
        {{"--checkpoint", "maybe"}, "--checkpoint"},
        {{"--cost-model", "exact"}, "--cost-model"},
        {{"--memory-limit", "8 potatoes"}, "--memory-limit"},
        {{"--modes", "dp,hsdp"}, "hsdp"},
    };
    for (const auto& [flags, named] : cases) {
      std::vector<std::string> args{"plan", scenarios + "default.json"};
      args.insert(args.end(), flags.begin(), flags.end());
      const Run run = run_osdp(args);
      INFO(flags[0] << " " << flags[1] << ": " << run.err);
      CHECK(run.exit_code == 2);
      CHECK(contains(run.err, named));
    }
  }
  SECTION("unknown subcommand option") {
    CHECK(run_osdp({"plan", scenarios + "default.json", "--no-such-flag"}).exit_code == 2);
  }
}

TEST_CASE("nothing fits: exit 3 with the least memory needed and what dominates it") {
  const Run run = run_osdp({"plan", scenarios + "default.json", "--memory-limit", "2GiB"});
  CHECK(run.exit_code == 3);
  CHECK(run.out.empty());
  CHECK(contains(run.err, "nothing fits"));
  CHECK(contains(run.err, "the least memory any plan needs is"));
  CHECK(contains(run.err, "dominated by model states"));
  CHECK(contains(run.err, "try --memory-limit"));
}

TEST_CASE("sweep writes sweep.csv atomically and OSDP is never below a baseline") {
  TempDir dir;
  const fs::path out = dir.path() / "study";
  const Run run = run_osdp({"sweep", scenarios + "default.json", "--memory-limits",
                            "4GiB:24GiB:2GiB", "--out", out.string(), "--no-plot"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(contains(run.out, "memory limit"));
  CHECK(contains(run.out, "OOM"));
  CHECK(temporary_files(out).empty());
  std::ifstream csv(out / "sweep.csv");
  std::string header;
  REQUIRE(std::getline(csv, header));
  const std::vector<std::string> columns = split(header, ',');
  REQUIRE(columns.size() == 2 + 8 * 4);
  CHECK(columns[0] == "memory_limit_bytes");
  CHECK(columns[3] == "osdp_throughput_samples_per_s");
  std::vector<std::size_t> baseline_columns;
  for (std::size_t c = 4; c < columns.size(); ++c) {
    if (columns[c].ends_with("_throughput_samples_per_s")) baseline_columns.push_back(c);
  }
  REQUIRE(baseline_columns.size() == 7);
  CHECK(std::find(columns.begin(), columns.end(), "fsdp_ckpt_fairscale_throughput_samples_per_s") !=
        columns.end());
  int rows = 0;
  std::string line;
  while (std::getline(csv, line)) {
    const std::vector<std::string> cells = split(line, ',');
    REQUIRE(cells.size() == columns.size());
    ++rows;
    INFO(line);
    REQUIRE(!cells[3].empty());  // OSDP fits from 4 GiB in the default study
    const double osdp_throughput = std::stod(cells[3]);
    for (std::size_t c : baseline_columns) {
      if (!cells[c].empty()) CHECK(osdp_throughput >= std::stod(cells[c]) * (1 - 1e-5));
    }
  }
  CHECK(rows == 11);
}

TEST_CASE("sweep draws the plot when matplotlib is there, and says so when not") {
  TempDir dir;
  const Run run = run_osdp({"sweep", scenarios + "default.json", "--memory-limits", "6GiB,12GiB",
                            "--out", dir.path().string()});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const bool plotted = fs::exists(dir.path() / "throughput_vs_memory.png") &&
                       fs::exists(dir.path() / "throughput_vs_memory.svg");
  CHECK((plotted || contains(run.err, "no plot")));
  CHECK(temporary_files(dir.path()).empty());
}

TEST_CASE("sweep with a bad range exits 2 and writes nothing") {
  TempDir dir;
  const fs::path out = dir.path() / "study";
  const Run run = run_osdp({"sweep", scenarios + "default.json", "--memory-limits",
                            "8GiB:4GiB:1GiB", "--out", out.string()});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "--memory-limits"));
  CHECK(!fs::exists(out));
}

TEST_CASE("explain shows each mode's memory, time, collectives and the reason") {
  const Run run = run_osdp({"explain", scenarios + "default.json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  for (const char* part : {"all-gather", "reduce-scatter", "all-reduce", "why:", "<- plan",
                           "48 identical operators", "Batch sizes tried"}) {
    CHECK(contains(run.out, part));
  }
  const Run one = run_osdp({"explain", scenarios + "default.json", "--op", "layer3.mlp"});
  REQUIRE(one.exit_code == 0);
  CHECK(contains(one.out, "layer0.mlp .. layer47.mlp"));
  CHECK(!contains(one.out, "attention ["));
  const Run typo = run_osdp({"explain", scenarios + "default.json", "--op", "layer3.mpl"});
  CHECK(typo.exit_code == 2);
  CHECK(contains(typo.err, "did you mean \"layer3.mlp\""));
}

TEST_CASE("every study in scenarios/ loads and plans (exit 0 or 3)") {
  int studies = 0;
  for (const auto& entry : fs::directory_iterator(scenarios)) {
    if (entry.path().extension() != ".json") continue;
    // Studies name a model and a cluster; plans and clusters kept here by other parts do not.
    const osdp::Json document = osdp::Json::parse(read_text(entry.path()));
    if (!document.is_object() || !document.contains("model") || !document.contains("cluster")) {
      continue;
    }
    ++studies;
    const Run run = run_osdp({"plan", entry.path().string(), "--json"});
    INFO(entry.path().string() << ": " << run.err);
    CHECK((run.exit_code == 0 || run.exit_code == 3));
    if (run.exit_code == 0) CHECK(osdp::Json::parse(run.out).contains("operators"));
  }
  CHECK(studies >= 10);
}

TEST_CASE("sweep --json prints every point on stdout") {
  TempDir dir;
  const Run run = run_osdp({"sweep", scenarios + "default.json", "--memory-limits", "6GiB,12GiB",
                            "--out", dir.path().string(), "--no-plot", "--json"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const osdp::Json document = osdp::Json::parse(run.out);
  REQUIRE(document["points"].size() == 2);
  const osdp::Json& point = document["points"][1];
  CHECK(point["memory_limit_bytes"].get<double>() == 12.0 * 1073741824.0);
  CHECK(point["osdp"]["feasible"] == true);
  CHECK(point["osdp"]["throughput_samples_per_s"].get<double>() >=
        point["fsdp"]["throughput_samples_per_s"].get<double>());
  CHECK(fs::exists(dir.path() / "sweep.csv"));
}

TEST_CASE("explain on a multi-node cluster covers hsdp (debug builds assert the sums)") {
  // explain asserts that the collectives it lists add up to the cost model's communication time.
  for (const char* checkpoint : {"off", "on"}) {
    const Run run = run_osdp({"explain", scenarios + "a100-2x8-16g-ws-2l-10240h.json",
                              "--checkpoint", checkpoint, "--split", "4"});
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.out, "hsdp"));
    CHECK(contains(run.out, "all-reduce"));
  }
}

TEST_CASE("every input of the bad-input table exits 2 with its key words and no output") {
  const std::string inputs = source_dir + "/tests/inputs/";
  const osdp::Json base = osdp::Json::parse(read_text(inputs + "base_scenario.json"));
  const osdp::Json cases = osdp::Json::parse(read_text(inputs + "bad_inputs.json"));
  REQUIRE(cases.size() >= 40);
  TempDir dir;
  for (const auto& bad : cases) {
    std::string text;
    if (bad.contains("text")) {
      text = bad["text"].get<std::string>();
    } else {
      osdp::Json document = base;
      if (bad.contains("set")) {
        for (const auto& [pointer, value] : bad["set"].items()) {
          const osdp::Json::json_pointer at(pointer);
          if (value.is_null()) {
            document.at(at.parent_pointer()).erase(at.back());
          } else {
            document[at] = value;
          }
        }
      }
      if (bad.contains("remove")) {
        for (const auto& pointer : bad["remove"]) {
          const osdp::Json::json_pointer at(pointer.get<std::string>());
          document.at(at.parent_pointer()).erase(at.back());
        }
      }
      text = document.dump();
    }
    const fs::path file = dir.path() / "case.json";
    write_text(file, text);
    const Run run = run_osdp({"plan", file.string(), "--json"});
    INFO(bad["name"].get<std::string>() << ": " << run.err);
    CHECK(run.exit_code == 2);
    CHECK(run.out.empty());
    CHECK(contains(run.err, file.string()));
    for (const auto& word : bad["expect"]) CHECK(contains(run.err, word.get<std::string>()));
  }
}

TEST_CASE("absurd work is refused up front with an estimate unless --force") {
  TempDir dir;
  const fs::path file = dir.path() / "huge.json";
  write_text(file, R"({"model": {"family": "gpt", "layers": 1000, "hidden": 64, "heads": 4,
      "sequence_length": 16, "vocabulary": 128},
    "cluster": {"ranks": 8, "gpu": {"memory": "80GiB", "compute": "100TFLOPS"},
                "collective": {"alpha": "5us", "bandwidth": "10GBps"}},
    "training": {"max_batch_size": 1000000},
    "search": {"modes": "dp,zdp,z2", "split": "auto", "checkpoint": "auto"}})");
  const Run run = run_osdp({"plan", file.string()});
  CHECK(run.exit_code == 2);
  CHECK(contains(run.err, "--force"));
  CHECK(contains(run.err, "option evaluations (2002 operators"));
  CHECK(contains(run.err, "1000000 batch sizes"));
  CHECK(run.out.empty());
}
