#include "sim/executor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/ring_collective.hpp"

namespace osdp::sim {

std::vector<Group> program_groups(const Cluster& cluster, const Program& program) {
  std::vector<Group> groups{{GroupKind::world, world_members(cluster)}};
  if (program.uses_node_groups) {
    const int g = cluster.gpus_per_node;
    const int nodes = cluster.ranks / g;
    for (int n = 0; n < nodes; ++n) {
      Group group{GroupKind::intra_node, {}};
      for (int l = 0; l < g; ++l) group.members.push_back(n * g + l);
      groups.push_back(std::move(group));
    }
    for (int l = 0; l < g; ++l) {
      Group group{GroupKind::inter_node, {}};
      for (int n = 0; n < nodes; ++n) group.members.push_back(n * g + l);
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

bool collectives_run_alone(const Cluster& cluster, const Program& program) {
  const bool host_copies = std::any_of(program.items.begin(), program.items.end(),
                                       [](const ProgramItem& item) { return item.host_copy; });
  return program.lanes == 1 && program_groups(cluster, program).size() == 1 && !host_copies;
}

namespace {

// Work in progress (a compute, a collective on shared cores) going on at `rate` from now: what it
// did since its last change of rate is taken off what remains.
template <class Work>
void change_rate(Work& work, double now_s, double rate) {
  work.remaining_s = std::max(0.0, work.remaining_s - (now_s - work.since_s) * work.rate);
  work.since_s = now_s;
  work.rate = rate;
}

}  // namespace

Executor::Executor(const Program& program, const Cluster& cluster, const NetworkPlan& network,
                   const SimOptions& options, Kernel& kernel, int recorded_ranks)
    : program_(program), cluster_(cluster), network_(network), options_(options), kernel_(kernel) {
  ranks_ = cluster.ranks;
  gpus_per_node_ = cluster.gpus_per_node;
  nodes_ = ranks_ / gpus_per_node_;
  shared_cores_ = cluster.host_cores.has_value();
  slowdown_ = shared_cores_ ? 1.0 : options.overlap_slowdown.value_or(cluster.gpu.overlap_slowdown);
  for (const Group& group : program_groups(cluster, program))
    group_members_.push_back(group.members);
  collectives_alone_ = collectives_run_alone(cluster, program);
  takes_turns_ = shared_cores_ && cluster.host_cores->scheduler_tick_s > 0 &&
                 gpus_per_node_ > cluster.host_cores->cores;
  turn_tick_pending_.assign(nodes_, 0);
  turn_ticks_.assign(nodes_, 0);

  const auto& items = program.items;
  successors_.assign(items.size(), {});
  for (std::size_t i = 0; i < items.size(); ++i) {
    for (const Dep& dep : items[i].deps) {
      successors_[dep.item].push_back({static_cast<int>(i), dep.on});
    }
  }
  int tasks = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    item_base_.push_back(tasks);
    int count = ranks_;
    if (items[i].collective) {
      count = items[i].group == GroupKind::world        ? 1
              : items[i].group == GroupKind::intra_node ? nodes_
                                                        : gpus_per_node_;
    }
    for (int who = 0; who < count; ++who) {
      task_item_.push_back(static_cast<int>(i));
      task_who_.push_back(who);
    }
    tasks += count;
  }
  pending_.assign(tasks, 0);
  ready_by_.assign(tasks, -1);
  times_.assign(tasks, {});
  for (int t = 0; t < tasks; ++t) {
    for (DepOn on : {DepOn::start, DepOn::end}) {
      for_each_successor(t, on, [this](int successor) { ++pending_[successor]; });
    }
  }
  rank_.assign(ranks_, {});
  for (int r = 0; r < ranks_; ++r) memory_.emplace_back(r < recorded_ranks);
  exposed_.assign(ranks_, {});
  waits_.assign(std::clamp(recorded_ranks, 0, ranks_), {});
  compute_busy_.assign(ranks_, 0.0);
  finish_.assign(ranks_, 0.0);
}

int Executor::instance(GroupKind kind, int rank) const {
  switch (kind) {
    case GroupKind::world:
      return 0;
    case GroupKind::intra_node:
      return rank / gpus_per_node_;
    case GroupKind::inter_node:
      return rank % gpus_per_node_;
  }
  return 0;
}

int Executor::ring_of(int item, int who) const {
  switch (program_.items[item].group) {
    case GroupKind::world:
      return 0;
    case GroupKind::intra_node:
      return 1 + who;
    case GroupKind::inter_node:
      return 1 + nodes_ + who;
  }
  return 0;
}

const std::vector<int>& Executor::members(int item, int who) const {
  return group_members_.at(ring_of(item, who));
}

int Executor::task_of(int item, int rank) const {
  const ProgramItem& it = program_.items[item];
  return item_base_[item] + (it.collective ? instance(it.group, rank) : rank);
}

template <class F>
void Executor::for_each_successor(int task, DepOn on, F&& f) const {
  const int item = task_item_[task];
  const int who = task_who_[task];
  for (const Dep& next : successors_[item]) {
    if (next.on != on) continue;
    if (!program_.items[item].collective) {
      f(task_of(next.item, who));
      continue;
    }
    // A collective releases the matching task of each member; members are sorted by rank, so
    // a task shared by several members appears in a run.
    int previous = -1;
    for (int rank : members(item, who)) {
      const int successor = task_of(next.item, rank);
      if (successor != previous) f(successor);
      previous = successor;
    }
  }
}

void Executor::start() {
  for (int r = 0; r < ranks_; ++r) {
    for (const MemoryAction& action : program_.initial) {
      memory_[r].change(0.0, action.bytes, action.category, action.op, -1);
    }
  }
  // Collected first: starting one task may start others, which must not start twice.
  std::vector<int> ready;
  for (int t = 0; t < static_cast<int>(pending_.size()); ++t) {
    if (pending_[t] == 0) ready.push_back(t);
  }
  for (int t : ready) begin(t);
}

void Executor::release(int task, int by) {
  ready_by_[task] = by;
  if (--pending_[task] == 0) begin(task);
}

void Executor::begin(int task) {
  if (program_.items[task_item_[task]].collective) {
    begin_collective(task);
  } else if (program_.items[task_item_[task]].host_copy) {
    begin_host_copy(task);
  } else {
    begin_compute(task);
  }
}

void Executor::apply(const std::vector<MemoryAction>& actions, int rank, int item) {
  for (const MemoryAction& action : actions) {
    memory_[rank].change(kernel_.now(), action.bytes, action.category, action.op, item);
  }
}

void Executor::begin_compute(int task) {
  const int item = task_item_[task];
  const int rank = task_who_[task];
  const double now = kernel_.now();
  RankState& state = rank_[rank];
  if (state.running >= 0) throw std::logic_error("sim: two computes at once on one stream");
  ++compute_tasks_;
  // Idle time before this compute, waiting for a collective, is that collective's exposure.
  const double idle = now - state.previous_end_s;
  const int by = ready_by_[task];
  if (idle > 0 && by >= 0 &&
      (program_.items[task_item_[by]].collective || program_.items[task_item_[by]].host_copy)) {
    exposed_[rank][static_cast<int>(program_.items[task_item_[by]].category)] += idle;
    if (rank < static_cast<int>(waits_.size())) {
      waits_[rank].push_back({state.previous_end_s, idle, task_item_[by]});
    }
  }
  times_[task].start_s = now;
  apply(program_.items[item].at_start, rank, item);
  if (takes_turns_) {
    // A woken thread's virtual runtime is brought up to the node's least-served runnable one,
    // so that a long wait does not buy it the cores for as long.
    const int node = rank / gpus_per_node_;
    for (int r = node * gpus_per_node_; r < (node + 1) * gpus_per_node_; ++r) {
      if (r != rank && rank_[r].running >= 0) {
        state.served_s = std::max(state.served_s, service_s(rank_[r], now));
      }
    }
  }
  state.running = task;
  state.remaining_s = program_.items[item].work_s;
  state.since_s = now;
  state.rate = state.active_collectives > 0 ? 1.0 / slowdown_ : 1.0;
  schedule_compute_end(rank);
  if (shared_cores_) share_cores();
  for_each_successor(task, DepOn::start, [this, task](int next) { release(next, task); });
}

void Executor::schedule_compute_end(int rank) {
  RankState& state = rank_[rank];
  const std::uint64_t generation = ++state.generation;
  if (state.rate <= 0) return;  // waiting for a core: assign_turns schedules the end
  kernel_.after(state.remaining_s / state.rate, [this, rank, generation]() {
    if (rank_[rank].generation == generation) finish_compute(rank_[rank].running);
  });
}

void Executor::set_active(int rank, int delta) {
  RankState& state = rank_[rank];
  const bool was_active = state.active_collectives > 0;
  state.active_collectives += delta;
  const bool active = state.active_collectives > 0;
  if (was_active == active || state.running < 0 || slowdown_ == 1.0) return;
  change_rate(state, kernel_.now(), active ? 1.0 / slowdown_ : 1.0);
  schedule_compute_end(rank);
}

void Executor::finish_compute(int task) {
  const int item = task_item_[task];
  const int rank = task_who_[task];
  const double now = kernel_.now();
  RankState& state = rank_[rank];
  state.served_s = service_s(state, now);
  state.on_core = false;
  state.running = -1;
  state.previous_end_s = now;
  times_[task].end_s = now;
  if (shared_cores_) share_cores();
  if (program_.items[item].phase != Phase::optimizer) {
    compute_busy_[rank] += now - times_[task].start_s;
  } else {
    finish_[rank] = now;
  }
  apply(program_.items[item].at_end, rank, item);
  for_each_successor(task, DepOn::end, [this, task](int next) { release(next, task); });
}

// A host copy runs on the GPU's copy engine: it neither slows the compute nor waits for it; it
// takes its time (the node's GPUs copying at once, model/cluster's host_copy_s).
void Executor::begin_host_copy(int task) {
  const int item = task_item_[task];
  const int rank = task_who_[task];
  times_[task].start_s = kernel_.now();
  apply(program_.items[item].at_start, rank, item);
  for_each_successor(task, DepOn::start, [this, task](int next) { release(next, task); });
  auto done = [this, task]() {
    const int done_item = task_item_[task];
    times_[task].end_s = kernel_.now();
    apply(program_.items[done_item].at_end, task_who_[task], done_item);
    for_each_successor(task, DepOn::end, [this, task](int next) { release(next, task); });
  };
  // On a topology the copy is a flow over the GPU's path to its host memory, where it shares
  // the links with the collectives; otherwise it takes the time the cost model gives it.
  const ProgramItem& it = program_.items[item];
  if (!network_.host_channels.empty() && !shared_cores_) {
    const HostChannels& channels = network_.host_channels.at(rank);
    kernel_.send(
        it.copy_direction == CopyDirection::to_host ? channels.to_host : channels.to_device,
        it.bytes, 0.0, std::move(done));
  } else {
    kernel_.after(it.work_s, std::move(done));
  }
}

void Executor::begin_collective(int task) {
  const int item = task_item_[task];
  const int who = task_who_[task];
  const ProgramItem& it = program_.items[item];
  ++collectives_;
  times_[task].start_s = kernel_.now();
  for (int rank : members(item, who)) {
    apply(it.at_start, rank, item);
    set_active(rank, +1);
  }
  if (shared_cores_) {
    begin_core_collective(task);
  } else {
    start_ring_collective(
        kernel_, network_.rings.at(ring_of(item, who)), it.kind, it.bytes, options_.granularity,
        [this, task]() { finish_collective(task); }, collectives_alone_);
  }
  for_each_successor(task, DepOn::start, [this, task](int next) { release(next, task); });
}

void Executor::finish_collective(int task) {
  const int item = task_item_[task];
  const int who = task_who_[task];
  times_[task].end_s = kernel_.now();
  for (int rank : members(item, who)) {
    apply(program_.items[item].at_end, rank, item);
    set_active(rank, -1);
  }
  if (shared_cores_) {
    std::erase_if(core_collectives_, [task](const CoreCollective& c) { return c.task == task; });
    share_cores();
  }
  for_each_successor(task, DepOn::end, [this, task](int next) { release(next, task); });
}

void Executor::begin_core_collective(int task) {
  const ProgramItem& it = program_.items[task_item_[task]];
  const GroupTiming& timing = it.group == GroupKind::world        ? cluster_.world
                              : it.group == GroupKind::intra_node ? cluster_.intra_node
                                                                  : cluster_.inter_node;
  const int ranks = static_cast<int>(members(task_item_[task], task_who_[task]).size());
  CoreCollective collective;
  collective.task = task;
  collective.remaining_s = ranks > 1 ? timing.time_s(it.kind, it.bytes, ranks) : 0.0;
  collective.since_s = kernel_.now();
  collective.rate = 0;  // share_cores sets it and schedules the end
  const double tick_s = cluster_.host_cores->scheduler_tick_s;
  if (tick_s > 0 && member_node_fully_computing(task)) {
    collective.waits_for_tick = true;
    kernel_.after(until_next_tick_s(), [this]() { on_scheduler_tick(); });
  }
  core_collectives_.push_back(collective);
  share_cores();
}

bool Executor::every_core_computing(int node) const {
  int computing = 0;
  for (int r = node * gpus_per_node_; r < (node + 1) * gpus_per_node_; ++r) {
    computing += rank_[r].running >= 0;
  }
  return computing >= cluster_.host_cores->cores;
}

bool Executor::member_node_fully_computing(int task) const {
  for (int r : members(task_item_[task], task_who_[task])) {
    if (every_core_computing(r / gpus_per_node_)) return true;
  }
  return false;
}

// The scheduler runs the woken communication threads: every collective waiting for a core
// starts.
void Executor::on_scheduler_tick() {
  bool started = false;
  for (CoreCollective& collective : core_collectives_) {
    if (!collective.waits_for_tick) continue;
    collective.waits_for_tick = false;
    collective.since_s = kernel_.now();
    started = true;
  }
  if (started) share_cores();
}

void Executor::schedule_collective_end(CoreCollective& collective) {
  collective.generation = ++core_generation_;
  const int task = collective.task;
  const std::uint64_t generation = collective.generation;
  kernel_.after(collective.remaining_s / collective.rate, [this, task, generation]() {
    for (const CoreCollective& c : core_collectives_) {
      if (c.task == task && c.generation == generation) {
        finish_collective(task);
        return;
      }
    }
  });
}

void Executor::share_cores() {
  const double now = kernel_.now();
  // A compute that ended freed a core: a collective waiting for the tick starts on it.
  for (CoreCollective& collective : core_collectives_) {
    if (collective.waits_for_tick && !member_node_fully_computing(collective.task)) {
      collective.waits_for_tick = false;
      collective.since_s = now;
    }
  }
  // Busy threads per node: each rank's compute, and its communication thread while it runs a
  // collective (the runtime runs a rank's collectives on one thread).
  std::vector<int> running_collectives(ranks_, 0);
  for (const CoreCollective& collective : core_collectives_) {
    if (collective.waits_for_tick) continue;
    for (int r : members(task_item_[collective.task], task_who_[collective.task])) {
      ++running_collectives[r];
    }
  }
  std::vector<int> busy(nodes_, 0);
  for (int r = 0; r < ranks_; ++r) {
    busy[r / gpus_per_node_] += (rank_[r].running >= 0) + (running_collectives[r] > 0);
  }
  if (takes_turns_) {
    for (int node = 0; node < nodes_; ++node) assign_turns(node, busy[node]);
  } else {
    for (int r = 0; r < ranks_; ++r) {
      RankState& state = rank_[r];
      if (state.running < 0) continue;
      const double rate = core_rate(cluster_, busy[r / gpus_per_node_]);
      if (rate == state.rate) continue;
      change_rate(state, now, rate);
      schedule_compute_end(r);
    }
  }
  for (CoreCollective& collective : core_collectives_) {
    if (collective.waits_for_tick) continue;  // rate 0, no end scheduled
    // A ring goes at its slowest member's pace; collectives of one rank share its thread.
    double rate = std::numeric_limits<double>::infinity();
    for (int r : members(task_item_[collective.task], task_who_[collective.task])) {
      rate = std::min(rate, core_rate(cluster_, busy[r / gpus_per_node_]) /
                                std::max(1, running_collectives[r]));
    }
    if (rate == collective.rate) continue;
    change_rate(collective, now, rate);
    schedule_collective_end(collective);
  }
}

double Executor::service_s(const RankState& state, double now_s) const {
  return state.served_s + (state.running >= 0 ? (now_s - state.since_s) * state.rate : 0.0);
}

double Executor::until_next_tick_s() const {
  const double tick_s = cluster_.host_cores->scheduler_tick_s;
  const double now = kernel_.now();
  return (std::floor(now / tick_s + 1e-9) + 1) * tick_s - now;
}

void Executor::assign_turns(int node, int busy_threads) {
  const double now = kernel_.now();
  std::vector<int> runnable;
  for (int r = node * gpus_per_node_; r < (node + 1) * gpus_per_node_; ++r) {
    if (rank_[r].running >= 0) runnable.push_back(r);
  }
  if (runnable.empty()) return;
  // The cores the compute threads get together under a fair share with the busy communication
  // threads, held a whole core each: first by the computes that hold one until the tick, then
  // by the least served.
  const double cores = cluster_.host_cores->cores;
  const double capacity =
      static_cast<double>(runnable.size()) * std::min(1.0, cores / std::max(1, busy_threads));
  const int slots =
      std::min(static_cast<int>(runnable.size()), static_cast<int>(std::ceil(capacity - 1e-9)));
  // Ranks that did the same work since their last collective tie; who goes first among them
  // moves on with every tick, so that no rank is always the last to arrive (the one that never
  // waits), as the host's scheduler does not favour one process for good.
  const int first = turn_ticks_[node] % gpus_per_node_;
  const auto turn_order = [&](int r) { return (r - first + gpus_per_node_) % gpus_per_node_; };
  std::stable_sort(runnable.begin(), runnable.end(), [&](int a, int b) {
    if (rank_[a].on_core != rank_[b].on_core) return rank_[a].on_core;
    const double served_a = service_s(rank_[a], now);
    const double served_b = service_s(rank_[b], now);
    if (std::abs(served_a - served_b) > 1e-12) return served_a < served_b;
    return turn_order(a) < turn_order(b);
  });
  const double whole_core_rate = core_rate(cluster_, cluster_.host_cores->cores);
  for (int i = 0; i < static_cast<int>(runnable.size()); ++i) {
    RankState& state = rank_[runnable[i]];
    const double core_share = i < slots ? std::min(1.0, capacity - i) : 0.0;
    state.on_core = core_share > 0;
    const double rate = core_share * whole_core_rate;
    if (rate == state.rate) continue;
    state.served_s = service_s(state, now);
    change_rate(state, now, rate);
    schedule_compute_end(runnable[i]);
  }
  if (slots < static_cast<int>(runnable.size())) schedule_turn_tick(node);
}

void Executor::schedule_turn_tick(int node) {
  if (turn_tick_pending_[node]) return;
  turn_tick_pending_[node] = 1;
  kernel_.after(until_next_tick_s(), [this, node]() {
    // The cores change hands: every compute of the node gives its core up, and share_cores
    // hands them out again, least served first.
    turn_tick_pending_[node] = 0;
    ++turn_ticks_[node];
    for (int r = node * gpus_per_node_; r < (node + 1) * gpus_per_node_; ++r) {
      rank_[r].on_core = false;
    }
    share_cores();
  });
}

double Executor::optimizer_step_s(int rank) const {
  // The update, and the end of the iteration when a mode gathers after it (a zero-work item).
  double total_s = 0;
  for (int item = 0; item < static_cast<int>(program_.items.size()); ++item) {
    const ProgramItem& it = program_.items[item];
    if (it.collective || it.host_copy || it.phase != Phase::optimizer) continue;
    const TaskTimes& t = times_[task_of(item, rank)];
    total_s += t.end_s - t.start_s;
  }
  return total_s;
}

bool Executor::complete() const {
  for (const TaskTimes& t : times_) {
    if (t.end_s < 0) return false;
  }
  return true;
}

}  // namespace osdp::sim
