// `osdp sweep SCENARIO --memory-limits 4GiB:24GiB:1GiB`: throughput against the per-GPU memory
// limit for OSDP and each strategy baseline; writes sweep.csv and, when python3 with matplotlib
// is present, the plot throughput_vs_memory.{png,svg} (plots/throughput_vs_memory.py).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include "cli/command.hpp"
#include "cli/comparison.hpp"
#include "cli/format.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/atomic_file.hpp"
#include "model/units.hpp"

#ifndef OSDP_PLOTS_DIR
#define OSDP_PLOTS_DIR "plots"
#endif

namespace osdp::cli {
namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  ScenarioOptions scenario;
  std::string memory_limits;
  std::string out_dir;
  bool json = false;
  bool no_plot = false;
};

constexpr int max_sweep_points = 1000;

// "4GiB:24GiB:1GiB" (start:stop:step, stop included) or "8GiB,16GiB".
std::vector<double> parse_memory_limits(const std::string& text) {
  const std::string flag = "--memory-limits";
  std::vector<std::string> parts;
  const char separator = text.find(':') != std::string::npos ? ':' : ',';
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (separator == ',') {
    std::vector<double> limits;
    for (const auto& part : parts) limits.push_back(parse_bytes_flag(flag, part));
    return limits;
  }
  if (parts.size() != 3) {
    throw InputError("command line", flag, text,
                     "START:STOP:STEP (e.g. 4GiB:24GiB:1GiB) or a list 8GiB,16GiB");
  }
  const double start = parse_bytes_flag(flag, parts[0]);
  const double stop = parse_bytes_flag(flag, parts[1]);
  const double step = parse_bytes_flag(flag, parts[2]);
  if (stop < start) throw InputError("command line", flag, text, "STOP at least START");
  const double count = std::floor((stop - start) / step * (1.0 + 1e-12)) + 1.0;
  if (count > max_sweep_points) {
    throw InputError("command line", flag, text,
                     fmt::format("at most {} memory limits (a larger STEP)", max_sweep_points));
  }
  std::vector<double> limits;
  for (int i = 0; i < static_cast<int>(count); ++i) limits.push_back(start + i * step);
  return limits;
}

// "ddp+ckpt" -> "ddp_ckpt", "fsdp+ckpt-fairscale" -> "fsdp_ckpt_fairscale", for CSV columns.
std::string column_prefix(const std::string& strategy) {
  std::string prefix = strategy;
  for (char& c : prefix) {
    if (c == '+' || c == '-') c = '_';
  }
  return prefix;
}

void append_cells(std::string& line, const std::optional<ScheduledPlan>& best) {
  if (!best) {
    line += ",,,,";
    return;
  }
  const PlanCost& cost = best->cost;
  line += fmt::format(",{},{:.6g},{:.6g},{:.0f}", cost.batch_size, cost.throughput_samples_per_s,
                      cost.iteration_time_s, cost.peak_memory_bytes);
}

std::string sweep_csv(const std::vector<Comparison>& points) {
  std::string text = "memory_limit_bytes,memory_limit_GiB";
  std::vector<std::string> prefixes{"osdp"};
  for (const Strategy& strategy : standard_strategies()) {
    prefixes.push_back(column_prefix(strategy.name));
  }
  for (const auto& prefix : prefixes) {
    text += fmt::format(
        ",{0}_batch_size,{0}_throughput_samples_per_s,{0}_iteration_time_s,"
        "{0}_peak_memory_bytes",
        prefix);
  }
  text += "\n";
  for (const Comparison& point : points) {
    std::string line = fmt::format("{:.0f},{:.6g}", point.memory_limit_bytes,
                                   point.memory_limit_bytes / 1073741824.0);
    append_cells(line, point.osdp.best);
    for (const BaselineOutcome& outcome : point.baselines) append_cells(line, outcome.best);
    text += line + "\n";
  }
  return text;
}

Json point_json(const std::optional<ScheduledPlan>& best) {
  if (!best) return {{"feasible", false}};
  return {{"feasible", true},
          {"batch_size", best->cost.batch_size},
          {"throughput_samples_per_s", best->cost.throughput_samples_per_s},
          {"iteration_time_s", best->cost.iteration_time_s},
          {"peak_memory_bytes", best->cost.peak_memory_bytes}};
}

Json sweep_json(const Scenario& scenario, const std::vector<Comparison>& points,
                const std::string& csv_path) {
  Json rows = Json::array();
  for (const Comparison& point : points) {
    Json row = {{"memory_limit_bytes", point.memory_limit_bytes},
                {"search_time_s", point.search_time_s},
                {"osdp", point_json(point.osdp.best)}};
    for (const BaselineOutcome& outcome : point.baselines) {
      row[outcome.strategy.name] = point_json(outcome.best);
    }
    rows.push_back(std::move(row));
  }
  return {{"scenario", scenario.name},
          {"cost_model", std::string(cost_model_name(scenario.cost.kind))},
          {"ranks", scenario.cluster.ranks},
          {"csv", csv_path},
          {"points", std::move(rows)}};
}

std::string throughput_cell(const std::optional<ScheduledPlan>& best) {
  return best ? format_throughput(best->cost.throughput_samples_per_s) : "OOM";
}

std::string sweep_table(const std::vector<Comparison>& points) {
  std::vector<Table::Column> columns{{"memory limit", Table::Align::right},
                                     {"OSDP", Table::Align::right}};
  for (const Strategy& strategy : standard_strategies()) {
    columns.push_back({strategy.name, Table::Align::right});
  }
  Table table(std::move(columns));
  for (const Comparison& point : points) {
    std::vector<std::string> row{units::format_bytes(point.memory_limit_bytes),
                                 throughput_cell(point.osdp.best)};
    for (const BaselineOutcome& outcome : point.baselines)
      row.push_back(throughput_cell(outcome.best));
    table.add_row(std::move(row));
  }
  return table.render();
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

fs::path plot_script() {
  if (const char* dir = std::getenv("OSDP_PLOTS_DIR"))
    return fs::path(dir) / "throughput_vs_memory.py";
  return fs::path(OSDP_PLOTS_DIR) / "throughput_vs_memory.py";
}

// The first Python with matplotlib: $OSDP_PYTHON, python3 on the PATH, then Debian's own
// /usr/bin/python3 (a pyenv or venv python3 on the PATH often lacks python3-matplotlib).
std::optional<std::string> python_with_matplotlib() {
  std::vector<std::string> candidates;
  if (const char* python = std::getenv("OSDP_PYTHON")) candidates.emplace_back(python);
  candidates.emplace_back("python3");
  candidates.emplace_back("/usr/bin/python3");
  for (const std::string& python : candidates) {
    const std::string probe = shell_quote(python) + " -c 'import matplotlib' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  return std::nullopt;
}

// Runs the plot script; returns a note for the user (empty on success).
std::string make_plot(const fs::path& csv, const fs::path& out_dir, const std::string& title) {
  const fs::path script = plot_script();
  if (!fs::exists(script)) return "no plot: " + script.string() + " not found";
  const auto python = python_with_matplotlib();
  if (!python) {
    return "no plot: no python3 with matplotlib found (Debian: apt-get install "
           "python3-matplotlib, or set OSDP_PYTHON)";
  }
  const std::string command = fmt::format("{} {} {} --out {} --title {} 1>&2", shell_quote(*python),
                                          shell_quote(script.string()), shell_quote(csv.string()),
                                          shell_quote(out_dir.string()), shell_quote(title));
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status)) return "no plot: could not run " + *python;
  const int code = WEXITSTATUS(status);
  if (code != 0) return fmt::format("no plot: {} failed (exit code {})", script.string(), code);
  return "";
}

std::string plot_title(const Scenario& scenario) {
  return fmt::format("{}: {} on {}, {} cost model", scenario.name, scenario.workload->name(),
                     scenario.cluster.name, cost_model_name(scenario.cost.kind));
}

std::vector<Comparison> run_points(const CostModel& model, const SearchSpec& spec,
                                   const std::vector<double>& limits) {
  const bool progress = isatty(STDERR_FILENO) != 0;
  std::vector<Comparison> points;
  points.reserve(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (progress) {
      fmt::print(stderr, "\rsweep: {}/{} memory limits ({})   ", i + 1, limits.size(),
                 units::format_bytes(limits[i]));
    }
    points.push_back(compare_with_baselines(model, spec, limits[i]));
  }
  if (progress) fmt::print(stderr, "\r{:60}\r", "");
  return points;
}

void write_csv(const fs::path& path, const std::string& contents) {
  try {
    write_file_atomically(path.string(), contents);
  } catch (const std::runtime_error& error) {
    throw InputError("command line", "--out", path.parent_path().string(),
                     std::string("a directory osdp can write to (") + error.what() + ")");
  }
}

int run_sweep(const SweepOptions& options) {
  const std::vector<double> limits = parse_memory_limits(options.memory_limits);
  const std::unique_ptr<const Scenario> scenario = load_with_overrides(options.scenario);
  refuse_unless_forced(planning_work(*scenario, static_cast<int>(limits.size())),
                       options.scenario.force);
  const CostModel model = scenario->cost_model();
  const std::vector<Comparison> points = run_points(model, scenario->search, limits);

  const fs::path out_dir =
      options.out_dir.empty() ? fs::path("out") / scenario->name : fs::path(options.out_dir);
  const fs::path csv = out_dir / "sweep.csv";
  write_csv(csv, sweep_csv(points));
  const std::string plot_note =
      options.no_plot ? "" : make_plot(csv, out_dir, plot_title(*scenario));

  if (options.json) {
    fmt::print("{}\n", sweep_json(*scenario, points, csv.string()).dump(2));
  } else {
    fmt::print("Throughput (all ranks) against the per-GPU memory limit: {}\n  {}\n\n{}",
               scenario->name, describe_search(*scenario), sweep_table(points));
    fmt::print("\nwrote {}\n", csv.string());
    if (!options.no_plot && plot_note.empty()) {
      fmt::print("wrote {} and .svg\n", (out_dir / "throughput_vs_memory.png").string());
    }
  }
  if (!plot_note.empty()) fmt::print(stderr, "osdp: note: {}\n", plot_note);
  return exit_ok;
}

}  // namespace

Subcommand add_sweep_command(CLI::App& root) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* app = root.add_subcommand(
      "sweep", "Throughput against the memory limit for OSDP and DDP / FSDP / ZeRO-2; CSV + plot");
  add_scenario_options(*app, options->scenario, false);
  app->add_option("--memory-limits", options->memory_limits,
                  "START:STOP:STEP (e.g. 4GiB:24GiB:1GiB) or a list 8GiB,16GiB")
      ->required();
  app->add_option("--out", options->out_dir, "Output directory (default out/SCENARIO-NAME)");
  app->add_flag("--json", options->json, "Print the sweep as JSON on stdout");
  app->add_flag("--no-plot", options->no_plot, "Write the CSV only");
  return {app, [options] { return run_sweep(*options); }};
}

}  // namespace osdp::cli
