#include "sim/trace.hpp"

#include <fmt/format.h>

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

// Track 0 is compute; communication lanes follow, two per group kind.
int track_of(const ProgramItem& item) {
  return item.collective ? 1 + static_cast<int>(item.group) * 2 + item.lane : 0;
}

std::string item_name(const ProgramItem& item, const Workload& workload) {
  const std::string op = item.op >= 0 ? workload.op(item.op).name : "";
  if (item.collective) return fmt::format("{} {}", collective_name(item.kind), op);
  if (item.phase == Phase::optimizer) return "optimizer step";
  return fmt::format("{} {}", phase_name(item.phase), op);
}

}  // namespace

std::string chrome_trace(const Executor& executor, const Workload& workload) {
  const Program& program = executor.program();
  Json events = Json::array();
  for (int r = 0; r < executor.ranks(); ++r) {
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0},
                      {"args", {{"name", fmt::format("rank {}", r)}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"tid", 0},
                      {"args", {{"sort_index", r}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    for (GroupKind kind : {GroupKind::world, GroupKind::intra_node, GroupKind::inter_node}) {
      for (int lane = 0; lane < program.lanes; ++lane) {
        if (kind != GroupKind::world && !program.uses_hsdp) continue;
        ProgramItem probe;
        probe.collective = true;
        probe.group = kind;
        probe.lane = lane;
        const std::string name = fmt::format("comm {}{}", group_label(kind),
                                             lane == 1 ? " (reductions)" : "");
        events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r},
                          {"tid", track_of(probe)}, {"args", {{"name", name}}}});
      }
    }
  }
  const auto& times = executor.times();
  for (int t = 0; t < static_cast<int>(times.size()); ++t) {
    const int item_index = executor.item_of_task(t);
    const ProgramItem& item = program.items[item_index];
    const std::string name = item_name(item, workload);
    const std::string category =
        item.collective ? std::string(comm_category_name(item.category))
                        : std::string(phase_name(item.phase));
    Json args = {{"slice", item.slice}};
    if (item.collective) args["bytes"] = item.bytes;
    auto add = [&](int rank) {
      events.push_back({{"ph", "X"},
                        {"name", name},
                        {"cat", category},
                        {"pid", rank},
                        {"tid", track_of(item)},
                        {"ts", times[t].start_s * us_per_s},
                        {"dur", (times[t].end_s - times[t].start_s) * us_per_s},
                        {"args", args}});
    };
    if (item.collective) {
      for (int rank : executor.members(item_index, executor.who_of_task(t))) add(rank);
    } else {
      add(executor.who_of_task(t));
    }
  }
  for (int r = 0; r < executor.ranks(); ++r) {
    for (const MemoryEvent& event : executor.memory()[r].events()) {
      events.push_back({{"ph", "C"},
                        {"name", "memory"},
                        {"pid", r},
                        {"tid", 0},
                        {"ts", event.time_s * us_per_s},
                        {"args", {{"live_bytes", event.live_bytes}}}});
    }
  }
  const Json trace = {{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ms"},
                      {"otherData", {{"time_unit", "us"}, {"memory_unit", "bytes"},
                                     {"generator", "osdp simulate"}}}};
  return trace.dump() + "\n";
}

}  // namespace osdp::sim
