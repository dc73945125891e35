#include "sim/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "model/chrome_trace.hpp"
#include "model/json_reader.hpp"

namespace osdp::sim {
namespace {

constexpr double us_per_s = 1e6;

std::string_view group_label(GroupKind kind) {
  switch (kind) {
    case GroupKind::world:
      return "world";
    case GroupKind::intra_node:
      return "intra-node";
    case GroupKind::inter_node:
      return "inter-node";
  }
  return "?";
}

// Track 0 is compute; communication lanes follow, two per group kind; then the compute's waits.
constexpr int wait_track = 1 + 3 * 2;

int track_of(const ProgramItem& item) {
  return item.collective || item.host_copy ? 1 + static_cast<int>(item.group) * 2 + item.lane : 0;
}

std::string item_name(const ProgramItem& item, const Workload& workload) {
  const std::string op = item.op >= 0 ? workload.op(item.op).name : "";
  if (item.collective) return fmt::format("{} {}", collective_name(item.kind), op);
  if (item.host_copy) {
    return fmt::format("copy {} {}",
                       item.copy_direction == CopyDirection::to_device ? "to device" : "to host",
                       op);
  }
  if (item.phase == Phase::optimizer) return "optimizer step";
  return fmt::format("{} {}", phase_name(item.phase), op);
}

std::vector<double> peak_bytes(const Executor& executor) {
  std::vector<double> peaks;
  for (const MemoryTimeline& memory : executor.memory()) peaks.push_back(memory.peak_bytes());
  return peaks;
}

}  // namespace

std::string chrome_trace(const Executor& executor, const Workload& workload, int max_ranks) {
  const Program& program = executor.program();
  const int ranks = std::min(executor.ranks(), max_ranks);
  Json events = Json::array();
  for (int r = 0; r < ranks; ++r) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"name", fmt::format("rank {}", r)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"sort_index", r}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    for (GroupKind kind : {GroupKind::world, GroupKind::intra_node, GroupKind::inter_node}) {
      for (int lane = 0; lane < program.lanes; ++lane) {
        if (kind != GroupKind::world && !program.uses_node_groups) continue;
        ProgramItem probe;
        probe.collective = true;
        probe.group = kind;
        probe.lane = lane;
        const std::string name =
            fmt::format("comm {}{}", group_label(kind), lane == 1 ? " (reductions)" : "");
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", r},
                          {"tid", track_of(probe)},
                          {"args", {{"name", name}}}});
      }
    }
  }
  const auto& times = executor.times();
  for (int t = 0; t < static_cast<int>(times.size()); ++t) {
    const int item_index = executor.item_of_task(t);
    const ProgramItem& item = program.items[item_index];
    const std::string name = item_name(item, workload);
    const std::string category = item.collective || item.host_copy
                                     ? std::string(comm_category_name(item.category))
                                     : std::string(phase_name(item.phase));
    Json args = {{"slice", item.slice}};
    if (item.collective || item.host_copy) args["bytes"] = item.bytes;
    auto add = [&](int rank) {
      events.push_back(chrome_complete_event(name, category, rank, track_of(item), times[t].start_s,
                                             times[t].end_s - times[t].start_s, args));
    };
    if (item.collective) {
      for (int rank : executor.members(item_index, executor.who_of_task(t))) {
        if (rank < ranks) add(rank);
      }
    } else if (executor.who_of_task(t) < ranks) {
      add(executor.who_of_task(t));
    }
  }
  // Where each rank's compute waited for a collective, on a track of its own, as the measured
  // trace (osdp validate --out) has it.
  for (int r = 0; r < ranks && r < static_cast<int>(executor.waits().size()); ++r) {
    const std::vector<ComputeWait>& waits = executor.waits()[r];
    if (waits.empty()) continue;
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", wait_track},
                      {"args", {{"name", "compute waits"}}}});
    for (const ComputeWait& wait : waits) {
      events.push_back(chrome_complete_event(
          "wait", "wait", r, wait_track, wait.start_s, wait.duration_s,
          {{"waited_s", wait.duration_s}, {"for", item_name(program.items[wait.item], workload)}}));
    }
  }
  // Memory: a counter per category (Perfetto stacks them into the live total), and an instant
  // event per allocation or free naming its cause.
  for (int r = 0; r < ranks; ++r) {
    std::array<double, memory_categories> live{};
    for (const MemoryEvent& event : executor.memory()[r].events()) {
      live[static_cast<int>(event.category)] += event.delta_bytes;
      Json counters = Json::object();
      for (int c = 0; c < memory_categories; ++c) {
        counters[std::string(memory_category_name(static_cast<MemoryCategory>(c)))] = live[c];
      }
      events.push_back({{"ph", "C"},
                        {"name", "memory"},
                        {"pid", r},
                        {"tid", 0},
                        {"ts", event.time_s * us_per_s},
                        {"args", std::move(counters)}});
      Json cause = {{"bytes", event.delta_bytes},
                    {"category", std::string(memory_category_name(event.category))},
                    {"live_bytes", event.live_bytes}};
      if (event.op >= 0) cause["operator"] = workload.op(event.op).name;
      events.push_back({{"ph", "i"},
                        {"s", "t"},
                        {"name", event.delta_bytes >= 0 ? "alloc" : "free"},
                        {"cat", "memory"},
                        {"pid", r},
                        {"tid", 0},
                        {"ts", event.time_s * us_per_s},
                        {"args", std::move(cause)}});
    }
  }
  const Json trace = {{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ms"},
                      {"otherData",
                       {{"time_unit", "us"},
                        {"memory_unit", "bytes"},
                        {"peak_memory_bytes", peak_bytes(executor)},
                        {"generator", "osdp simulate"}}}};
  return trace.dump() + "\n";
}

}  // namespace osdp::sim
