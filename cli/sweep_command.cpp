// `osdp sweep SCENARIO [--memory-limits 4GiB:24GiB:1GiB]`: throughput against the per-GPU memory
// limit for OSDP and each strategy baseline; writes sweep.csv and, when python3 with matplotlib
// is present, the plot throughput_vs_memory.{png,svg} (plots/throughput_vs_memory.py).
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cli/command.hpp"
#include "cli/comparison.hpp"
#include "cli/format.hpp"
#include "cli/layout_views.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_guard.hpp"
#include "model/atomic_file.hpp"
#include "model/units.hpp"

#ifndef OSDP_PLOTS_DIR
#define OSDP_PLOTS_DIR "plots"
#endif

extern char** environ;

namespace osdp::cli {
namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  ScenarioOptions scenario;
  LayoutFlags layout;  // --tp, --pp, --schedule: 3D layouts instead
  std::string memory_limits;
  std::string out_dir;
  bool json = false;
  bool no_plot = false;
};

constexpr int max_sweep_points = 1000;

// The scenario's name as a folder name inside out/: only [A-Za-z0-9._-] (a '/', a newline or a
// space becomes '_'), no ".." and no leading dot (never a path outside out/, never hidden), at
// most 64 characters; "scenario" when nothing is left.
std::string folder_name(const std::string& name) {
  constexpr std::size_t max_chars = 64;
  std::string folder;
  for (char c : name.substr(0, max_chars)) {
    const bool kept =
        std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    const bool second_dot = c == '.' && !folder.empty() && folder.back() == '.';
    if (second_dot) folder.back() = '_';
    folder += kept && !second_dot ? c : '_';
  }
  const std::size_t first = folder.find_first_not_of('.');
  folder = first == std::string::npos ? "" : folder.substr(first);
  return folder.empty() ? "scenario" : folder;
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
  // The baselines' names as the points hold them (every point has the same, in order).
  if (!points.empty()) {
    for (const BaselineOutcome& outcome : points.front().baselines) {
      prefixes.push_back(column_prefix(outcome.strategy.name));
    }
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
  return best ? fmt::format("{:.2f}", best->cost.throughput_samples_per_s) : "-";
}

// The fastest baseline inside (or outside) the search space at one limit; nullptr if none fits.
const BaselineOutcome* fastest_baseline(const Comparison& point, bool in_search_space) {
  const BaselineOutcome* fastest = nullptr;
  for (const BaselineOutcome& outcome : point.baselines) {
    if (outcome.in_search_space != in_search_space || !outcome.best) continue;
    if (!fastest || outcome.best->cost.throughput_samples_per_s >
                        fastest->best->cost.throughput_samples_per_s) {
      fastest = &outcome;
    }
  }
  return fastest;
}

std::string named_throughput(const BaselineOutcome* outcome, const char* mark) {
  if (!outcome) return "-";
  return fmt::format("{}{} {:.2f}", outcome->strategy.name, mark,
                     outcome->best->cost.throughput_samples_per_s);
}

// A readable width: OSDP, the three classic baselines, the fastest baseline the search space
// contains (OSDP is never below it) and the fastest outside it (starred, as plan stars them).
// Every strategy's column is in sweep.csv and --json.
std::string sweep_table(const std::vector<Comparison>& points) {
  const std::vector<std::string> classic{"ddp", "fsdp", "zero2"};
  std::vector<Table::Column> columns{{"memory limit", Table::Align::right},
                                     {"OSDP", Table::Align::right}};
  for (const std::string& name : classic) columns.push_back({name, Table::Align::right});
  columns.push_back({"fastest baseline", Table::Align::right});
  columns.push_back({"OSDP speed-up", Table::Align::right});
  columns.push_back({"fastest outside the search space", Table::Align::right});
  Table table(std::move(columns));
  for (const Comparison& point : points) {
    std::vector<std::string> row{units::format_bytes(point.memory_limit_bytes),
                                 throughput_cell(point.osdp.best)};
    for (const std::string& name : classic) {
      const auto outcome =
          std::find_if(point.baselines.begin(), point.baselines.end(),
                       [&](const BaselineOutcome& o) { return o.strategy.name == name; });
      row.push_back(outcome == point.baselines.end() ? "" : throughput_cell(outcome->best));
    }
    const BaselineOutcome* inside = fastest_baseline(point, true);
    row.push_back(named_throughput(inside, ""));
    row.push_back(inside && point.osdp.best
                      ? fmt::format("{:.2f}x", point.osdp.best->cost.throughput_samples_per_s /
                                                   inside->best->cost.throughput_samples_per_s)
                      : "-");
    row.push_back(named_throughput(fastest_baseline(point, false), " *"));
    table.add_row(std::move(row));
  }
  return "Throughput in samples/s, all ranks (-: does not fit; every strategy's figure is in "
         "sweep.csv and --json)\n" +
         table.render() +
         "  * outside this search space (mode, checkpointing, FSDP units or offload not allowed by "
         "the search options), so OSDP may be slower than it\n";
}

// 3D layouts at each limit: one LayoutSearchResult per limit, each strategy's best (3d_osdp
// first). Batch size in the CSV: the samples of one iteration over all GPUs.
struct LayoutPoint {
  double memory_limit_bytes = 0;
  LayoutSearchResult result;
};

std::string layout_sweep_csv(const std::vector<LayoutPoint>& points) {
  std::string text = "memory_limit_bytes,memory_limit_GiB";
  for (const std::string& name : layout_strategy_names()) {
    text += fmt::format(
        ",{0}_batch_size,{0}_throughput_samples_per_s,{0}_iteration_time_s,"
        "{0}_peak_memory_bytes",
        name);
  }
  text += "\n";
  for (const LayoutPoint& point : points) {
    text += fmt::format("{:.0f},{:.6g}", point.memory_limit_bytes,
                        point.memory_limit_bytes / 1073741824.0);
    for (const auto& [name, plan] : point.result.strategies) {
      if (!plan) {
        text += ",,,,";
        continue;
      }
      const ParallelRun& run = plan->run;
      text += fmt::format(
          ",{},{:.6g},{:.6g},{:.0f}", run.micro_batch * run.micro_batches * run.degrees.data,
          plan->throughput_samples_per_s, plan->iteration_time_s, plan->peak_memory_bytes);
    }
    text += "\n";
  }
  return text;
}

Json layout_sweep_json(const Scenario& scenario, const std::vector<LayoutPoint>& points,
                       const std::string& csv_path) {
  Json rows = Json::array();
  for (const LayoutPoint& point : points) {
    Json row = {{"memory_limit_bytes", point.memory_limit_bytes}};
    for (const auto& [name, plan] : point.result.strategies) {
      row[name] = layout_plan_json(scenario, name, plan);
    }
    rows.push_back(std::move(row));
  }
  return {{"scenario", scenario.name},
          {"gpus", scenario.cluster.ranks},
          {"csv", csv_path},
          {"points", std::move(rows)}};
}

std::string layout_sweep_table(const std::vector<LayoutPoint>& points) {
  std::vector<Table::Column> columns{{"memory limit", Table::Align::right}};
  for (const std::string& name : layout_strategy_names()) {
    columns.push_back({name, Table::Align::right});
  }
  columns.push_back({"3d_osdp layout"});
  Table table(std::move(columns));
  for (const LayoutPoint& point : points) {
    std::vector<std::string> row{units::format_bytes(point.memory_limit_bytes)};
    for (const auto& [name, plan] : point.result.strategies) {
      row.push_back(plan ? fmt::format("{:.2f}", plan->throughput_samples_per_s) : "-");
    }
    const std::optional<LayoutPlan>& best = point.result.strategies.front().second;
    row.push_back(best ? fmt::format("{}, {}", degrees_text(best->run), schedule_text(best->run))
                       : "-");
    table.add_row(std::move(row));
  }
  return "Throughput in samples/s, all GPUs (-: does not fit; tp x pp x dp of the best layout)\n" +
         table.render();
}

// Ctrl-C or SIGTERM while the outputs are written: the run ends with 130 and leaves nothing
// (std::system would ignore SIGINT while the plot runs). Set by the handler, read by the run.
volatile std::sig_atomic_t interrupt_signal = 0;

extern "C" void note_interrupt(int signal) { interrupt_signal = signal; }

constexpr int kInterruptedExit = 130;  // 128 + SIGINT, what a shell reports for Ctrl-C

struct Interrupted {};  // unwinds to run_sweep, which discards the outputs

void throw_if_interrupted() {
  if (interrupt_signal != 0) throw Interrupted{};
}

// Catches SIGINT and SIGTERM while alive; the previous handlers come back afterwards.
class InterruptGuard {
 public:
  InterruptGuard() {
    interrupt_signal = 0;
    struct sigaction action {};
    action.sa_handler = note_interrupt;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_int_);
    sigaction(SIGTERM, &action, &previous_term_);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  ~InterruptGuard() {
    sigaction(SIGINT, &previous_int_, nullptr);
    sigaction(SIGTERM, &previous_term_, nullptr);
  }

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

// Runs a program (PATH lookup) with its stdout on our stderr, or both on /dev/null when quiet;
// returns its exit code, -1 if it could not run or died of a signal. An interrupt is forwarded
// to the child, which is waited for (killed after 5 s), and then throws Interrupted.
int run_program(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (quiet) {
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  } else {
    posix_spawn_file_actions_adddup2(&files, STDERR_FILENO, STDOUT_FILENO);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, argv[0], &files, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) return -1;
  // Polled, so that an interrupt between the spawn and the wait is not missed.
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> forwarded_at;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    if (interrupt_signal != 0 && !forwarded_at) {
      kill(pid, interrupt_signal);
      forwarded_at = Clock::now();
    }
    if (forwarded_at && Clock::now() - *forwarded_at > std::chrono::seconds(5)) kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw_if_interrupted();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// One sweep's outputs as a unit: --out is locked (flock on the directory) so that two sweeps
// never mix their files; the files are made in a private staging directory inside it and
// renamed into place together, or removed if the run ends early.
class OutputUnit {
 public:
  // `flag` names the output in messages: "--out", or the default folder when none was given.
  OutputUnit(const fs::path& out_dir, std::string flag)
      : out_dir_(out_dir), flag_(std::move(flag)) {
    std::error_code error;
    created_ = fs::create_directories(out_dir_, error);
    lock_fd_ = ::open(out_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock_fd_ < 0)
      refuse(std::string("a directory osdp can write to (") + std::strerror(errno) + ")");
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(lock_fd_);
      refuse(
          "a directory no other osdp sweep is writing (another sweep holds its lock; wait for "
          "it or give another --out)");
    }
    std::string pattern = (out_dir_ / ".tmp.sweep.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      ::close(lock_fd_);
      refuse(std::string("a directory osdp can write to (") + std::strerror(errno) + ")");
    }
    staging_ = pattern;
  }
  OutputUnit(const OutputUnit&) = delete;
  OutputUnit& operator=(const OutputUnit&) = delete;
  ~OutputUnit() {
    std::error_code error;
    fs::remove_all(staging_, error);
    if (created_ && !committed_) fs::remove(out_dir_, error);  // only if still empty
    ::close(lock_fd_);                                         // releases the lock
  }

  const fs::path& staging() const { return staging_; }

  // Renames every staged file into --out.
  void commit() {
    for (const auto& entry : fs::directory_iterator(staging_)) {
      std::error_code error;
      fs::rename(entry.path(), out_dir_ / entry.path().filename(), error);
      if (error) refuse("a directory osdp can write to (" + error.message() + ")");
    }
    committed_ = true;
  }

 private:
  [[noreturn]] void refuse(const std::string& expected) const {
    throw InputError("command line", flag_, out_dir_.string(), expected);
  }

  fs::path out_dir_;
  std::string flag_;
  fs::path staging_;
  int lock_fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
};

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
    if (run_program({python, "-c", "import matplotlib"}, /*quiet=*/true) == 0) return python;
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
  const int code = run_program(
      {*python, script.string(), csv.string(), "--out", out_dir.string(), "--title", title},
      /*quiet=*/false);
  if (code < 0) return "no plot: could not run " + *python;
  if (code != 0) return fmt::format("no plot: {} failed (exit code {})", script.string(), code);
  return "";
}

std::string plot_title(const Scenario& scenario) {
  return fmt::format("{}: {} on {}, {} cost model", scenario.name, scenario.workload->name(),
                     scenario.cluster.name, cost_model_name(scenario.cost.kind));
}

std::vector<Comparison> run_points(const CostModel& model, const Scenario& scenario,
                                   const std::vector<double>& limits) {
  const SearchSpec& spec = scenario.search;
  const bool progress = isatty(STDERR_FILENO) != 0;
  std::vector<Comparison> points;
  points.reserve(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (progress) {
      fmt::print(stderr, "\rsweep: {}/{} memory limits ({})   ", i + 1, limits.size(),
                 units::format_bytes(limits[i]));
    }
    points.push_back(compare_with_baselines(model, spec, limits[i]));
    require_search_answer(points.back().osdp, scenario);
  }
  if (progress) fmt::print(stderr, "\r{:60}\r", "");
  return points;
}

void write_csv(const fs::path& path, const std::string& contents, const std::string& flag) {
  try {
    write_file_atomically(path.string(), contents);
  } catch (const std::runtime_error& error) {
    throw InputError("command line", flag, path.parent_path().string(),
                     std::string("a directory osdp can write to (") + error.what() + ")");
  }
}

// Where the outputs go, checked before the run so that an unusable --out is bad input, not a
// late failure; `out_flag` names it in messages (without --out: the default folder).
struct OutputPlace {
  fs::path dir;
  std::string flag;
};

OutputPlace output_place(const SweepOptions& options, const Scenario& scenario) {
  OutputPlace place{
      options.out_dir.empty() ? fs::path("out") / folder_name(scenario.name)
                              : fs::path(options.out_dir),
      options.out_dir.empty() ? "the default output folder (--out not given; give one)" : "--out"};
  if (const auto why = unusable_output((place.dir / "sweep.csv").string())) {
    throw InputError("command line", place.flag, place.dir.string(),
                     "a directory osdp can write to (this is " + *why + ")");
  }
  return place;
}

// Writes sweep.csv and the plot as one unit (all or nothing; Ctrl-C discards both). Returns
// the plot's note for the user (empty: written) or nothing when interrupted.
std::optional<std::string> write_outputs(const OutputPlace& place, const std::string& csv_text,
                                         bool plot, const std::string& title) {
  std::string plot_note;
  try {
    const InterruptGuard guard;  // from here on Ctrl-C discards the outputs: exit 130
    OutputUnit unit(place.dir, place.flag);
    const fs::path staged_csv = unit.staging() / "sweep.csv";
    write_csv(staged_csv, csv_text, place.flag);
    if (plot) plot_note = make_plot(staged_csv, unit.staging(), title);
    throw_if_interrupted();
    unit.commit();
  } catch (const Interrupted&) {
    fmt::print(stderr, "osdp: interrupted: no output written\n");
    return std::nullopt;
  }
  return plot_note;
}

// --tp, --pp or --schedule: the 3D strategies' throughput at each limit (search/layout_search).
int run_layout_sweep(const SweepOptions& options) {
  refuse_data_parallel_flags(options.scenario);
  LayoutSearchOptions search = layout_search_options(options.layout);
  const std::unique_ptr<const Scenario> scenario = load_for_layouts(options.scenario);
  const std::vector<double> limits =
      sweep_memory_limits(options.memory_limits, max_sweep_points, *scenario);
  refuse_unless_forced(layout_search_work(*scenario, search, static_cast<int>(limits.size())),
                       options.scenario.force);
  const OutputPlace place = output_place(options, *scenario);
  std::vector<LayoutPoint> points;
  for (double limit : limits) {
    search.memory_limit_bytes = limit;
    points.push_back({limit, search_layouts(*scenario, search)});
  }
  const fs::path csv = place.dir / "sweep.csv";
  const std::optional<std::string> plot_note =
      write_outputs(place, layout_sweep_csv(points), !options.no_plot,
                    fmt::format("{}: {} on {}, 3D layouts", scenario->name,
                                scenario->workload->name(), scenario->cluster.name));
  if (!plot_note) return kInterruptedExit;
  if (options.json) {
    fmt::print("{}\n", layout_sweep_json(*scenario, points, csv.string()).dump(2));
  } else {
    fmt::print("Throughput (all GPUs) of 3D layouts against the per-GPU memory limit: {}\n\n{}",
               scenario->name, layout_sweep_table(points));
    fmt::print("\nwrote {}\n", csv.string());
    if (!options.no_plot && plot_note->empty()) {
      fmt::print("wrote {} and .svg\n", (place.dir / "throughput_vs_memory.png").string());
    }
  }
  if (!plot_note->empty()) fmt::print(stderr, "osdp: note: {}\n", *plot_note);
  return exit_ok;
}

int run_sweep(const SweepOptions& options) {
  if (!options.memory_limits.empty()) {
    parse_memory_limits(options.memory_limits, max_sweep_points);  // bad text before any load
  }
  if (layout_requested(options.layout)) return run_layout_sweep(options);
  const std::unique_ptr<const Scenario> scenario = load_with_overrides(options.scenario);
  const std::vector<double> limits =
      sweep_memory_limits(options.memory_limits, max_sweep_points, *scenario);
  refuse_unless_forced(planning_work(*scenario, static_cast<int>(limits.size())),
                       options.scenario.force);
  const OutputPlace place = output_place(options, *scenario);
  const CostModel model = scenario->cost_model();
  const std::vector<Comparison> points = run_points(model, *scenario, limits);
  const fs::path csv = place.dir / "sweep.csv";
  const std::optional<std::string> plot_note =
      write_outputs(place, sweep_csv(points), !options.no_plot, plot_title(*scenario));
  if (!plot_note) return kInterruptedExit;

  if (options.json) {
    fmt::print("{}\n", sweep_json(*scenario, points, csv.string()).dump(2));
  } else {
    fmt::print("Throughput (all ranks) against the per-GPU memory limit: {}\n  {}\n\n{}",
               scenario->name, describe_search(*scenario), sweep_table(points));
    fmt::print("\nwrote {}\n", csv.string());
    if (!options.no_plot && plot_note->empty()) {
      fmt::print("wrote {} and .svg\n", (place.dir / "throughput_vs_memory.png").string());
    }
  }
  if (!plot_note->empty()) fmt::print(stderr, "osdp: note: {}\n", *plot_note);
  return exit_ok;
}

}  // namespace

Subcommand add_sweep_command(CLI::App& root) {
  auto options = std::make_shared<SweepOptions>();
  CLI::App* app = root.add_subcommand(
      "sweep", "Throughput against the memory limit for OSDP and DDP / FSDP / ZeRO-2; CSV + plot");
  add_scenario_options(*app, options->scenario, false);
  add_layout_flags(*app, options->layout);
  app->add_option("--memory-limits", options->memory_limits,
                  "START:STOP:STEP (e.g. 4GiB:24GiB:1GiB) or a list 8GiB,16GiB (any order: swept "
                  "increasing, each once); default 16 steps up to the GPU's memory");
  app->add_option("--out", options->out_dir, "Output directory (default out/SCENARIO-NAME)");
  app->add_flag("--json", options->json, "Print the sweep as JSON on stdout");
  app->add_flag("--no-plot", options->no_plot, "Write the CSV only");
  return {app, [options] { return run_sweep(*options); }};
}

}  // namespace osdp::cli
