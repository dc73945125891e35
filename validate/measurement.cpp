#include "validate/measurement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/mode.hpp"

namespace osdp::validate {

namespace {

double slowest(const std::vector<RankFigures>& ranks, double RankFigures::*figure) {
  double worst = 0;
  for (const auto& rank : ranks) worst = std::max(worst, rank.*figure);
  return worst;
}

// An optional array of non-negative seconds (empty when absent).
std::vector<double> read_seconds(const JsonReader& reader, const std::string& key,
                                 const Range& range) {
  std::vector<double> seconds;
  if (!reader.has(key)) return seconds;
  const Json& values = reader.raw(key);
  if (!values.is_array()) reader.fail(key, "an array of seconds");
  for (const Json& value : values) {
    if (!value.is_number() || !std::isfinite(value.get<double>()) ||
        value.get<double>() < range.min || value.get<double>() > range.max) {
      reader.fail_value(key, render_value(value),
                        "seconds " + describe_range(range, units::Dimension::seconds));
    }
    seconds.push_back(value.get<double>());
  }
  return seconds;
}

}  // namespace

Spread spread_of(std::vector<double> times_s) {
  if (times_s.empty()) return {};
  std::sort(times_s.begin(), times_s.end());
  const auto quantile = [&](double q) {
    const double position = q * static_cast<double>(times_s.size() - 1);
    const auto below = static_cast<std::size_t>(position);
    const std::size_t above = std::min(below + 1, times_s.size() - 1);
    const double weight = position - static_cast<double>(below);
    return times_s[below] * (1.0 - weight) + times_s[above] * weight;
  };
  double sum_s = 0;
  for (double time_s : times_s) sum_s += time_s;
  return {quantile(0.25), quantile(0.5), quantile(0.75),
          sum_s / static_cast<double>(times_s.size())};
}

double median_of(std::vector<double> values) { return spread_of(std::move(values)).median_s; }

std::vector<double> PlanMeasurement::slowest_iteration_times_s() const {
  if (ranks.empty()) return {};
  const std::size_t count = ranks.front().iteration_times_s.size();
  for (const auto& rank : ranks) {
    if (rank.iteration_times_s.size() != count) return {};
  }
  std::vector<double> slowest_times(count, 0.0);
  for (const auto& rank : ranks) {
    for (std::size_t i = 0; i < count; ++i) {
      slowest_times[i] = std::max(slowest_times[i], rank.iteration_times_s[i]);
    }
  }
  return slowest_times;
}

double PlanMeasurement::iteration_time_s() const {
  const std::vector<double> times_s = slowest_iteration_times_s();
  if (times_s.empty()) return slowest(ranks, &RankFigures::iteration_time_s);
  return spread_of(times_s).median_s;
}

Spread PlanMeasurement::iteration_time_spread() const {
  const std::vector<double> times_s = slowest_iteration_times_s();
  if (times_s.empty()) {
    const double median_s = iteration_time_s();
    return {median_s, median_s, median_s};
  }
  return spread_of(times_s);
}

double PlanMeasurement::exposed_communication_s() const {
  return slowest(ranks, &RankFigures::exposed_communication_s);
}

double PlanMeasurement::peak_memory_bytes() const {
  return slowest(ranks, &RankFigures::peak_memory_bytes);
}

Json measurements_to_json(const std::vector<PlanMeasurement>& measurements) {
  Json list = Json::array();
  for (const auto& m : measurements) {
    Json ranks = Json::array();
    for (const auto& r : m.ranks) {
      ranks.push_back({{"iteration_time_s", r.iteration_time_s},
                       {"exposed_communication_s", r.exposed_communication_s},
                       {"peak_memory_bytes", r.peak_memory_bytes},
                       {"loss", r.loss},
                       {"iteration_times_s", r.iteration_times_s},
                       {"pipeline_wait_s", r.pipeline_wait_s},
                       {"exposed_communication_steps_s", r.exposed_communication_steps_s}});
      if (!r.peer_wait_steps_s.empty()) ranks.back()["peer_wait_steps_s"] = r.peer_wait_steps_s;
    }
    list.push_back({{"name", m.name}, {"ranks", std::move(ranks)}});
  }
  return list;
}

Json compute_check_to_json(const std::vector<ComputeCheck>& checks) {
  Json list = Json::array();
  for (const ComputeCheck& check : checks) {
    list.push_back({{"kind", check.kind},
                    {"batch_size", check.batch_size},
                    {"calls", check.calls},
                    {"before_s", check.before_s},
                    {"after_s", check.after_s},
                    {"speed_reference", check.speed_reference}});
  }
  return list;
}

std::vector<ComputeCheck> compute_check_from_json(const JsonReader& reader,
                                                  const std::string& key) {
  std::vector<ComputeCheck> checks;
  for (const JsonReader& entry : reader.objects(key)) {
    entry.require_only({"kind", "batch_size", "calls", "before_s", "after_s", "speed_reference"});
    checks.push_back({entry.string("kind"),
                      static_cast<int>(entry.integer("batch_size", 1, 1 << 20)),
                      static_cast<int>(entry.integer("calls", 1, 1 << 20)),
                      entry.non_negative_number("before_s"), entry.non_negative_number("after_s"),
                      entry.optional_boolean("speed_reference").value_or(false)});
  }
  return checks;
}

std::vector<PlanMeasurement> measurements_from_json(const Json& json, const std::string& file) {
  const Json document{{"measurements", json}};  // the reader keeps a pointer: keep it alive
  const JsonReader root(document, file);
  std::vector<PlanMeasurement> measurements;
  for (const JsonReader& entry : root.objects("measurements")) {
    entry.require_only({"name", "ranks"});
    PlanMeasurement m;
    m.name = entry.string("name");
    for (const JsonReader& r : entry.objects("ranks")) {
      r.require_only({"iteration_time_s", "exposed_communication_s", "peak_memory_bytes", "loss",
                      "iteration_times_s", "pipeline_wait_s", "exposed_communication_steps_s",
                      "peer_wait_steps_s"});
      RankFigures figures{
          r.quantity("iteration_time_s", units::Dimension::seconds, limits::measured_step_s),
          r.quantity("exposed_communication_s", units::Dimension::seconds, limits::measured_wait_s),
          r.quantity("peak_memory_bytes", units::Dimension::bytes, limits::measured_memory_bytes),
          r.number("loss"),
          {},
          r.optional_quantity("pipeline_wait_s", units::Dimension::seconds, limits::measured_wait_s)
              .value_or(0.0)};
      figures.iteration_times_s = read_seconds(r, "iteration_times_s", limits::measured_step_s);
      figures.exposed_communication_steps_s =
          read_seconds(r, "exposed_communication_steps_s", limits::measured_wait_s);
      figures.peer_wait_steps_s = read_seconds(r, "peer_wait_steps_s", limits::measured_wait_s);
      if (!figures.peer_wait_steps_s.empty() &&
          figures.peer_wait_steps_s.size() != figures.exposed_communication_steps_s.size()) {
        r.fail("peer_wait_steps_s", "one value per entry of exposed_communication_steps_s");
      }
      m.ranks.push_back(std::move(figures));
    }
    measurements.push_back(std::move(m));
  }
  return measurements;
}

namespace {

// A JSON array of whole numbers from `min` to 65536 (layer or operator counts).
std::vector<int> read_counts(const JsonReader& reader, const std::string& key, int min,
                             const std::string& what) {
  const std::string expected = fmt::format("{}: integers from {} to 65536", what, min);
  const Json& values = reader.raw(key);
  if (!values.is_array()) reader.fail(key, expected);
  std::vector<int> counts;
  for (const Json& count : values) {
    if (!count.is_number_integer() || count.get<long long>() < min ||
        count.get<long long>() > (1 << 16)) {
      reader.fail(key, expected);
    }
    counts.push_back(static_cast<int>(count.get<long long>()));
  }
  return counts;
}

// Every operator's mode where they differ (3D + OSDP); none where one mode stands for all.
Json modes_json(const std::vector<Mode>& modes) {
  Json names = Json::array();
  const bool uniform =
      std::all_of(modes.begin(), modes.end(), [&](Mode mode) { return mode == modes.front(); });
  if (uniform) return names;
  for (Mode mode : modes) names.push_back(std::string(mode_name(mode)));
  return names;
}

Json layout_to_json(const ParallelRun& run) {
  return {{"tensor", run.degrees.tensor},
          {"pipeline", run.degrees.pipeline},
          {"data", run.degrees.data},
          {"order", run.order},
          {"micro_batch", run.micro_batch},
          {"micro_batches", run.micro_batches},
          {"schedule", std::string(pipeline_schedule_name(run.schedule))},
          {"chunks_per_stage", run.chunks_per_stage},
          {"layers_per_chunk", run.layers_per_chunk},
          {"data_parallel_mode",
           std::string(mode_name(run.modes.empty() ? Mode::dp : run.modes.front()))},
          {"modes", modes_json(run.modes)},
          {"sequence_parallel", run.sequence_parallel},
          {"checkpoint_layers", !run.checkpointed_kinds.empty()}};
}

ParallelRun layout_from_json(const JsonReader& reader) {
  reader.require_only({"tensor", "pipeline", "data", "order", "micro_batch", "micro_batches",
                       "schedule", "chunks_per_stage", "layers_per_chunk", "data_parallel_mode",
                       "modes", "sequence_parallel", "checkpoint_layers"});
  ParallelRun run;
  run.degrees.tensor = static_cast<int>(reader.integer("tensor", 1, 1 << 16));
  run.degrees.pipeline = static_cast<int>(reader.integer("pipeline", 1, 1 << 16));
  run.degrees.data = static_cast<int>(reader.integer("data", 1, 1 << 16));
  run.order = reader.string("order");
  run.micro_batch = static_cast<int>(reader.integer("micro_batch", 1, 1 << 16));
  run.micro_batches = static_cast<int>(reader.integer("micro_batches", 1, 1 << 16));
  const std::string schedule = reader.string("schedule");
  const auto parsed = pipeline_schedule_from_name(schedule);
  if (!parsed) reader.fail_value("schedule", schedule, "gpipe, 1f1b or interleaved");
  run.schedule = *parsed;
  run.chunks_per_stage = static_cast<int>(reader.integer("chunks_per_stage", 1, 1 << 16));
  run.layers_per_chunk = read_counts(reader, "layers_per_chunk", 0, "layers per model chunk");
  if (reader.has("sequence_parallel")) run.sequence_parallel = reader.boolean("sequence_parallel");
  if (reader.has("checkpoint_layers") && reader.boolean("checkpoint_layers")) {
    run.checkpointed_kinds = {OperatorKind::attention, OperatorKind::mlp};
  }
  if (reader.has("data_parallel_mode")) {
    const std::string name = reader.string("data_parallel_mode");
    const auto mode = mode_from_name(name);
    if (!mode)
      reader.fail_value("data_parallel_mode", name, "a parallel mode (" + mode_names() + ")");
    // The runtime shards uniformly: one mode stands for every operator's (the front end's run
    // has one per operator for the 3D model).
    if (*mode != Mode::dp) run.modes.assign(1, *mode);
  }
  // Per operator, where they differ (the runtime checks the count against the model).
  if (reader.has("modes") && !reader.raw("modes").empty()) {
    const Json& names = reader.raw("modes");
    if (!names.is_array()) reader.fail("modes", "an array of mode names");
    run.modes.clear();
    for (const Json& name : names) {
      const auto mode = name.is_string() ? mode_from_name(name.get<std::string>()) : std::nullopt;
      if (!mode) reader.fail_value("modes", name.dump(), "mode names (" + mode_names() + ")");
      run.modes.push_back(*mode);
    }
  }
  return run;
}

}  // namespace

Json plan_runs_to_json(const std::vector<PlanRun>& plans) {
  Json list = Json::array();
  for (const auto& run : plans) {
    Json choices = Json::array();
    for (const auto& choice : run.plan.choices) {
      Json entry = {{"mode", std::string(mode_name(choice.mode))},
                    {"slices", choice.slices},
                    {"sharded_slices", choice.sharded_slices},
                    {"checkpoint", std::string(checkpoint_name(choice.checkpoint))}};
      if (choice.offload) entry["offload"] = true;
      choices.push_back(std::move(entry));
    }
    Json entry = {
        {"name", run.name}, {"batch_size", run.plan.batch_size}, {"choices", std::move(choices)}};
    if (!run.plan.unit_sizes.empty()) entry["units"] = run.plan.unit_sizes;
    if (run.layout) entry["layout"] = layout_to_json(*run.layout);
    list.push_back(std::move(entry));
  }
  return list;
}

std::vector<PlanRun> plan_runs_from_json(const JsonReader& reader) {
  std::vector<PlanRun> plans;
  for (const JsonReader& entry : reader.objects("plans")) {
    entry.require_only({"name", "batch_size", "choices", "units", "layout"});
    PlanRun run;
    run.name = entry.string("name");
    run.plan.batch_size = static_cast<int>(entry.integer("batch_size", 1, 1 << 16));
    for (const JsonReader& choice : entry.objects("choices")) {
      choice.require_only({"mode", "slices", "sharded_slices", "checkpoint", "offload"});
      OperatorChoice parsed;
      const std::string mode = choice.string("mode");
      const std::string checkpoint = choice.string("checkpoint");
      if (const auto value = mode_from_name(mode)) {
        parsed.mode = *value;
      } else {
        choice.fail_value("mode", mode, "a parallel mode (" + mode_names() + ")");
      }
      if (const auto value = checkpoint_from_name(checkpoint)) {
        parsed.checkpoint = *value;
      } else {
        choice.fail_value("checkpoint", checkpoint, "none, unfused or fused");
      }
      parsed.slices = static_cast<int>(choice.integer("slices", 1, 1 << 16));
      parsed.sharded_slices = static_cast<int>(choice.integer("sharded_slices", 0, parsed.slices));
      parsed.offload = choice.optional_boolean("offload").value_or(false);
      run.plan.choices.push_back(parsed);
    }
    // FSDP units: operators per unit, checked against the GPT by check_runnable.
    if (entry.has("units")) {
      run.plan.unit_sizes = read_counts(entry, "units", 1, "operators per FSDP unit");
    }
    if (entry.has("layout")) run.layout = layout_from_json(entry.object("layout"));
    plans.push_back(std::move(run));
  }
  return plans;
}

}  // namespace osdp::validate
