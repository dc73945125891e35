// Runs a Program on the simulated cluster: compute items per rank on the compute stream (timed
// by maestro timers, slowed by the overlap factor while a collective of the rank is in flight),
// collectives per group instance as ring collectives on the network. On a cluster whose ranks
// share the host's cores, compute and collectives are both CPU work of their calibrated time,
// each busy thread (a rank's compute, a rank's communication) going at the node's core_rate. Tasks
// are created lazily: a task starts when its last predecessor completes, so the work per event
// stays constant.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/kernel.hpp"
#include "sim/memory_timeline.hpp"
#include "sim/program.hpp"

namespace osdp::sim {

// Process groups of a cluster in the order the executor lays them out: the world, then (for
// HSDP) one intra-node group per node and one inter-node group per local rank.
std::vector<Group> program_groups(const Cluster& cluster, const Program& program);

// Whether the program's collectives run one at a time and meet no other traffic: one lane of
// collectives on the world group, no host copies. In scale mode they then cost their
// uncontended ring time and send no flow (start_ring_collective's `alone`), so the platform
// needs no route for the rings.
bool collectives_run_alone(const Cluster& cluster, const Program& program);

struct TaskTimes {
  double start_s = -1;
  double end_s = -1;
};

// A stretch in which a rank's compute stream waited for a collective (or a host copy) before
// its next compute: that collective's exposure, as the trace draws it.
struct ComputeWait {
  double start_s = 0;
  double duration_s = 0;
  int item = -1;  // the collective or copy waited for
};

class Executor {
 public:
  Executor(const Program& program, const Cluster& cluster, const NetworkPlan& network,
           const SimOptions& options, Kernel& kernel, int recorded_ranks);

  // Memory events are kept for ranks below `recorded_ranks` (for traces); peaks for all.
  // Starts the tasks without predecessors; then run the kernel.
  void start();

  int ranks() const { return ranks_; }
  const Program& program() const { return program_; }
  // Task layout: item -> first task; compute items have one task per rank, collectives one per
  // instance of their group kind.
  int task_of(int item, int rank) const;
  int item_of_task(int task) const { return task_item_[task]; }
  int who_of_task(int task) const { return task_who_[task]; }
  const std::vector<TaskTimes>& times() const { return times_; }
  const std::vector<int>& members(int item, int who) const;
  int ring_of(int item, int who) const;

  const std::vector<MemoryTimeline>& memory() const { return memory_; }
  const std::vector<std::array<double, comm_categories>>& exposed_comm_s() const {
    return exposed_;
  }
  // Each recorded rank's waits in order (ranks below `recorded_ranks`); per rank they add up to
  // its exposed communication.
  const std::vector<std::vector<ComputeWait>>& waits() const { return waits_; }
  const std::vector<double>& compute_s() const { return compute_busy_; }
  const std::vector<double>& finish_s() const { return finish_; }
  double optimizer_step_s(int rank) const;
  std::int64_t compute_tasks() const { return compute_tasks_; }
  std::int64_t collectives() const { return collectives_; }
  bool complete() const;

 private:
  struct RankState {
    int running = -1;  // compute task
    double remaining_s = 0;
    double rate = 1;
    double since_s = 0;
    std::uint64_t generation = 0;
    int active_collectives = 0;
    double previous_end_s = 0;
    // Where ranks outnumber their node's cores (takes_turns_): the CPU time its compute thread
    // has had (law seconds, as the scheduler's virtual runtime) and whether it holds a core.
    double served_s = 0;
    bool on_core = false;
  };

  // A collective on shared cores (cluster.host_cores): CPU work of its solo time, done at the
  // pace the busy threads of its members' nodes leave it.
  struct CoreCollective {
    int task = -1;
    double remaining_s = 0;
    double rate = 1;
    double since_s = 0;
    std::uint64_t generation = 0;
    // Issued while every core of a member's node computed: its communication thread waits for
    // the scheduler's next tick (model/cluster.hpp, HostCores::scheduler_tick_s).
    bool waits_for_tick = false;
  };

  int instance(GroupKind kind, int rank) const;
  void begin_core_collective(int task);
  void schedule_collective_end(CoreCollective& collective);
  // Re-rates every running compute and core collective after the busy threads changed.
  void share_cores();
  // Whether every core of the node computes (a woken communication thread finds none free).
  bool every_core_computing(int node) const;
  bool member_node_fully_computing(int task) const;
  void on_scheduler_tick();
  // Ranks outnumbering the cores take turns on them: the least-served runnable computes hold
  // the cores the compute threads get together, a whole core each, until the next tick.
  void assign_turns(int node, int busy_threads);
  void schedule_turn_tick(int node);
  double until_next_tick_s() const;  // to the next multiple of the host's scheduler tick
  double service_s(const RankState& state, double now_s) const;
  template <class F>
  void for_each_successor(int task, DepOn on, F&& f) const;
  void release(int task, int by);
  void begin(int task);
  void begin_compute(int task);
  void begin_collective(int task);
  void begin_host_copy(int task);
  void finish_compute(int task);
  void finish_collective(int task);
  void schedule_compute_end(int rank);
  void set_active(int rank, int delta);
  void apply(const std::vector<MemoryAction>& actions, int rank, int item);

  const Program& program_;
  const Cluster& cluster_;
  const NetworkPlan& network_;
  const SimOptions& options_;
  Kernel& kernel_;
  int ranks_ = 0;
  int nodes_ = 1;
  int gpus_per_node_ = 1;
  double slowdown_ = 1;
  std::vector<int> item_base_;
  std::vector<std::vector<Dep>> successors_;  // item -> (item, on) of its dependents
  std::vector<int> task_item_;
  std::vector<int> task_who_;
  std::vector<int> pending_;
  std::vector<int> ready_by_;
  std::vector<TaskTimes> times_;
  std::vector<std::vector<int>> group_members_;  // ring index -> members
  std::vector<RankState> rank_;
  std::vector<MemoryTimeline> memory_;
  std::vector<std::array<double, comm_categories>> exposed_;
  std::vector<std::vector<ComputeWait>> waits_;
  std::vector<double> compute_busy_;
  std::vector<double> finish_;
  bool shared_cores_ = false;
  bool collectives_alone_ = false;  // collectives_run_alone
  // Shared cores, more ranks a node than cores and a scheduler tick: the ranks' compute threads
  // take turns on the cores (a tick long each) instead of sharing every core at once.
  bool takes_turns_ = false;
  std::vector<char> turn_tick_pending_;  // per node
  std::vector<int> turn_ticks_;          // per node: turn ticks so far (who goes first on a tie)

  std::vector<CoreCollective> core_collectives_;  // running ones
  std::uint64_t core_generation_ = 0;
  std::int64_t compute_tasks_ = 0;
  std::int64_t collectives_ = 0;
};

}  // namespace osdp::sim
