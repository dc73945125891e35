#include "sim/pipeline_simulation.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "model/input_error.hpp"
#include "sim/child_process.hpp"
#include "sim/kernel.hpp"
#include "sim/network.hpp"
#include "sim/ring_collective.hpp"

namespace osdp::sim {
namespace {

// Which ring of the plan each pair, reduction and tied embedding uses.
struct Layout {
  std::vector<Group> groups;
  std::map<std::vector<int>, int> ring_of_members;
  std::vector<std::vector<int>> reduction_ring;  // [rank][reduction]
  std::vector<std::vector<int>> prologue_ring;   // [rank][gather before the first pass]
  std::vector<int> tied_ring;                    // [rank]: -1 none
  // [rank]: the ring of each group its passes' data-parallel collectives run in
  std::vector<std::map<GroupAxis, int>> pass_ring;

  int ring_for(std::vector<int> members) {
    std::sort(members.begin(), members.end());
    auto [it, inserted] = ring_of_members.try_emplace(members, static_cast<int>(groups.size()));
    if (inserted) groups.push_back({GroupKind::world, members});
    return it->second;
  }
};

int rank_on_stage(const ParallelLayout& layout, int rank, int stage) {
  RankCoordinates coordinates = layout.coordinates_of(rank);
  coordinates.pipeline = stage;
  return layout.rank_of(coordinates);
}

Layout lay_out(const ParallelLayout& layout, const ParallelIterationCost& cost) {
  Layout out;
  const int p = layout.degrees().pipeline;
  const int chunks = cost.work.chunks();
  out.reduction_ring.resize(layout.world());
  out.prologue_ring.resize(layout.world());
  out.tied_ring.assign(layout.world(), -1);
  out.pass_ring.resize(layout.world());
  for (int rank = 0; rank < layout.world(); ++rank) {
    const int stage = layout.coordinates_of(rank).pipeline;
    // Its pairs with the next chunk's stage (interleaved chunks wrap around to stage 0).
    for (int c = stage; c + 1 < chunks; c += p) {
      out.ring_for({rank, rank_on_stage(layout, rank, (c + 1) % p)});
    }
    for (const StageCost::Reduction& reduction : cost.stages[stage].reductions) {
      out.reduction_ring[rank].push_back(
          out.ring_for(layout.group_of(reduction.group, rank).ranks));
    }
    for (const StageCost::Reduction& gather : cost.stages[stage].prologue) {
      out.prologue_ring[rank].push_back(out.ring_for(layout.group_of(gather.group, rank).ranks));
    }
    for (const ChunkCost& chunk : cost.chunks) {
      if (chunk.stage != stage) continue;
      for (const auto* collectives : {&chunk.forward_collectives, &chunk.backward_collectives}) {
        for (const PassCollective& collective : *collectives) {
          if (!out.pass_ring[rank].count(collective.group)) {
            out.pass_ring[rank][collective.group] =
                out.ring_for(layout.group_of(collective.group, rank).ranks);
          }
        }
      }
    }
    if (cost.stages[stage].tied_embedding_bytes > 0) {
      const int other =
          stage == 0 ? rank_on_stage(layout, rank, p - 1) : rank_on_stage(layout, rank, 0);
      out.tied_ring[rank] = out.ring_for({rank, other});
    }
  }
  return out;
}

struct RankState {
  int stage = 0;
  std::vector<PipelineStep> order;
  std::size_t next = 0;
  std::size_t prologue = 0;  // the next of its stage's gathers before the first pass
  bool ready = false;        // they are done: its passes may run
  bool busy = false;
  std::set<std::tuple<int, int, int>> arrived;  // (chunk, micro-batch, pass) inputs here
  double busy_s = 0;
  double finish_s = 0;
  std::vector<TimedStep> passes;  // as they ran
  std::size_t reduction = 0;      // the next of its stage's reductions (then the tied embedding)
  bool tied_done = false;
  double synchronised_s = 0;
};

class PipelineRun {
 public:
  PipelineRun(Kernel& kernel, const NetworkPlan& plan, const ParallelLayout& layout,
              const ParallelRun& run, const ParallelIterationCost& cost, Layout rings,
              Granularity granularity)
      : kernel_(kernel),
        plan_(plan),
        layout_(layout),
        cost_(cost),
        rings_(std::move(rings)),
        granularity_(granularity) {
    const int p = layout.degrees().pipeline;
    for (int rank = 0; rank < layout.world(); ++rank) {
      RankState state;
      state.stage = layout.coordinates_of(rank).pipeline;
      state.order = stage_order(run.schedule, p, cost.work.chunks_per_stage,
                                cost.work.micro_batches, state.stage);
      states_.push_back(std::move(state));
    }
  }

  void start() {
    for (int rank = 0; rank < static_cast<int>(states_.size()); ++rank) gather_first(rank);
  }

  const std::vector<RankState>& states() const { return states_; }
  long long collectives() const { return collectives_; }

 private:
  static constexpr int forward = 0;
  static constexpr int backward = 1;
  // join's ids beside a reduction's index: the tied embedding, and gather k before the first
  // pass as first_gather - k.
  static constexpr int tied_embedding = -1;
  static constexpr int first_gather = -2;

  // The stage's gathers before its first pass, in order, each once every member of its group is
  // there; then its passes.
  void gather_first(int rank) {
    RankState& state = states_[rank];
    const StageCost& stage = cost_.stages[state.stage];
    if (state.prologue < stage.prologue.size()) {
      const StageCost::Reduction& gather = stage.prologue[state.prologue];
      join(rings_.prologue_ring[rank][state.prologue],
           first_gather - static_cast<int>(state.prologue), gather.kind, gather.bytes, rank);
      return;
    }
    state.ready = true;
    advance(rank);
  }

  void advance(int rank) {
    RankState& state = states_[rank];
    if (!state.ready || state.busy || state.next == state.order.size()) return;
    const PipelineStep step = state.order[state.next];
    const int last_chunk = cost_.work.chunks() - 1;
    const bool is_forward = step.pass == Pass::forward;
    const bool needs_input = is_forward ? step.chunk > 0 : step.chunk < last_chunk;
    if (needs_input &&
        !state.arrived.count({step.chunk, step.micro_batch, is_forward ? forward : backward})) {
      return;  // its input's arrival calls advance again
    }
    state.busy = true;
    const double start_s = kernel_.now();
    const double pass_s =
        is_forward ? cost_.work.forward_s[step.chunk] : cost_.work.backward_s[step.chunk];
    const ChunkCost& chunk = cost_.chunks[step.chunk];
    const std::vector<PassCollective>& collectives =
        is_forward ? chunk.forward_collectives : chunk.backward_collectives;
    if (collectives.empty()) {
      kernel_.after(pass_s, [this, rank, step, start_s] { computed(rank, step, start_s); });
      return;
    }
    // The data-parallel stream beside the compute: the pass goes on once both are done, then
    // runs the rest (tensor-parallel collectives, the pass's overhead) as the model does.
    const double compute_s = is_forward ? chunk.forward_compute_s : chunk.backward_compute_s;
    const double stream_s =
        is_forward ? chunk.forward_data_parallel_s : chunk.backward_data_parallel_s;
    // (The model's pass also holds its operators' waits for the stream: what it adds beyond
    // max(compute, stream) joins the rest, never less than the tensor-parallel collectives.)
    const double tensor_s =
        is_forward ? chunk.forward_communication_s : chunk.backward_communication_s;
    const double rest_s = std::max(tensor_s, pass_s - std::max(compute_s, stream_s));
    auto outstanding = std::make_shared<int>(2);
    auto both_done = [this, rank, step, start_s, rest_s, outstanding] {
      if (--*outstanding > 0) return;
      kernel_.after(rest_s, [this, rank, step, start_s] { computed(rank, step, start_s); });
    };
    kernel_.after(compute_s, both_done);
    run_pass_collective(rank, step, 0, both_done);
  }

  // The pass's data-parallel collectives one after another, each once every member of its
  // group has reached it in the same pass; then `done`.
  void run_pass_collective(int rank, PipelineStep step, std::size_t index,
                           std::function<void()> done) {
    const ChunkCost& chunk = cost_.chunks[step.chunk];
    const bool is_forward = step.pass == Pass::forward;
    const std::vector<PassCollective>& collectives =
        is_forward ? chunk.forward_collectives : chunk.backward_collectives;
    if (index == collectives.size()) {
      done();
      return;
    }
    const PassCollective& collective = collectives[index];
    const int ring_index = rings_.pass_ring[rank].at(collective.group);
    const auto key = std::make_tuple(ring_index, step.chunk, step.micro_batch,
                                     is_forward ? forward : backward, static_cast<int>(index));
    auto& waiting = pass_waiting_[key];
    waiting.push_back({rank, std::move(done)});
    const GroupRing& ring = plan_.rings.at(ring_index);
    if (waiting.size() < ring.order.size()) return;
    auto members = std::make_shared<std::vector<PassMember>>(std::move(waiting));
    pass_waiting_.erase(key);
    ++collectives_;
    start_ring_collective(kernel_, ring, collective.kind, collective.bytes, granularity_,
                          [this, members, step, index] {
                            for (PassMember& member : *members) {
                              run_pass_collective(member.rank, step, index + 1,
                                                  std::move(member.done));
                            }
                          });
  }

  void computed(int rank, PipelineStep step, double start_s) {
    const int p = layout_.degrees().pipeline;
    const bool is_forward = step.pass == Pass::forward;
    const int to_chunk = is_forward ? step.chunk + 1 : step.chunk - 1;
    if (to_chunk < 0 || to_chunk >= cost_.work.chunks()) {
      pass_done(rank, start_s);
      return;
    }
    const int to = rank_on_stage(layout_, rank, to_chunk % p);
    const auto key = std::make_tuple(to_chunk, step.micro_batch, is_forward ? forward : backward);
    const bool blocking = cost_.work.blocking_transfers;
    transfer(rank, to, [this, rank, to, key, start_s, blocking] {
      states_[to].arrived.insert(key);
      advance(to);
      if (blocking) pass_done(rank, start_s);
    });
    if (!blocking) pass_done(rank, start_s);
  }

  void pass_done(int rank, double start_s) {
    RankState& state = states_[rank];
    state.busy = false;
    state.busy_s += kernel_.now() - start_s;
    state.passes.push_back({state.order[state.next], start_s, kernel_.now()});
    ++state.next;
    if (state.next < state.order.size()) {
      advance(rank);
    } else {
      state.finish_s = kernel_.now();
      // The model's stream drain (its per-pass stream's last reductions) before the stage's
      // gradient reductions, as a delay: the passes' flows above are done by now.
      const double drain_s = cost_.stages[state.stage].stream_drain_s;
      if (drain_s > 0) {
        kernel_.after(drain_s, [this, rank] { reduce(rank); });
      } else {
        reduce(rank);
      }
    }
  }

  // The slice's flows on the pair's ring edge from `from` to `to`, then the regather.
  void transfer(int from, int to, std::function<void()> arrived) {
    auto then = [this, arrived = std::move(arrived)]() mutable {
      if (cost_.regather_s > 0) {
        kernel_.after(cost_.regather_s, std::move(arrived));
      } else {
        arrived();
      }
    };
    const GroupRing& ring =
        plan_.rings.at(rings_.ring_of_members.at({std::min(from, to), std::max(from, to)}));
    const RingEdge* edge = nullptr;
    for (const RingEdge& candidate : ring.edges) {
      if (!candidate.channels.empty() && candidate.channels.front().from.rank == from) {
        edge = &candidate;
      }
    }
    if (edge == nullptr || cost_.transfer_bytes <= 0) {
      kernel_.after(0.0, std::move(then));
      return;
    }
    auto outstanding = std::make_shared<int>(static_cast<int>(edge->channels.size()));
    auto done = std::make_shared<std::function<void()>>(std::move(then));
    for (const Channel& channel : edge->channels) {
      kernel_.send(channel, cost_.transfer_bytes * channel.share, 0.0, [outstanding, done] {
        if (--*outstanding == 0) (*done)();
      });
    }
  }

  // The stage's reductions in order, each once every member of its group is there; then the
  // tied embedding's all-reduce.
  void reduce(int rank) {
    RankState& state = states_[rank];
    const StageCost& stage = cost_.stages[state.stage];
    if (state.reduction < stage.reductions.size()) {
      const StageCost::Reduction& reduction = stage.reductions[state.reduction];
      join(rings_.reduction_ring[rank][state.reduction], static_cast<int>(state.reduction),
           reduction.kind, reduction.bytes, rank);
      return;
    }
    if (rings_.tied_ring[rank] >= 0 && !state.tied_done) {
      join(rings_.tied_ring[rank], tied_embedding, CollectiveKind::all_reduce,
           stage.tied_embedding_bytes, rank);
      return;
    }
    state.synchronised_s = kernel_.now();
  }

  // Rank `rank` reaches collective `id` (a reduction's index, tied_embedding, or a gather before
  // the first pass) of the group whose ring is `ring_index`; the last member starts it.
  void join(int ring_index, int id, CollectiveKind kind, double bytes, int rank) {
    const auto key = std::make_pair(ring_index, id);
    std::vector<int>& waiting = waiting_[key];
    waiting.push_back(rank);
    const GroupRing& ring = plan_.rings.at(ring_index);
    if (waiting.size() < ring.order.size()) return;
    std::vector<int> members = std::move(waiting);
    waiting_.erase(key);
    ++collectives_;
    start_ring_collective(kernel_, ring, kind, bytes, granularity_, [this, members, id] {
      for (int member : members) {
        if (id <= first_gather) {
          ++states_[member].prologue;
          gather_first(member);
        } else if (id == tied_embedding) {
          states_[member].tied_done = true;
          reduce(member);
        } else {
          ++states_[member].reduction;
          reduce(member);
        }
      }
    });
  }

  Kernel& kernel_;
  const NetworkPlan& plan_;
  const ParallelLayout& layout_;
  const ParallelIterationCost& cost_;
  Layout rings_;
  Granularity granularity_;
  std::vector<RankState> states_;
  std::map<std::pair<int, int>, std::vector<int>> waiting_;
  struct PassMember {
    int rank = 0;
    std::function<void()> done;
  };
  // (ring, chunk, micro-batch, pass, collective) -> the members there
  std::map<std::tuple<int, int, int, int, int>, std::vector<PassMember>> pass_waiting_;
  long long collectives_ = 0;
};

// A pass as [chunk, micro-batch, 0 forward | 1 backward, start, end].
Json passes_json(const std::vector<TimedStep>& passes) {
  Json json = Json::array();
  for (const TimedStep& pass : passes) {
    json.push_back({pass.step.chunk, pass.step.micro_batch, pass.step.pass == Pass::forward ? 0 : 1,
                    pass.start_s, pass.end_s});
  }
  return json;
}

std::vector<TimedStep> passes_from_json(const Json& json) {
  std::vector<TimedStep> passes;
  for (const Json& pass : json) {
    passes.push_back({{pass.at(0).get<int>(), pass.at(1).get<int>(),
                       pass.at(2).get<int>() == 0 ? Pass::forward : Pass::backward},
                      pass.at(3).get<double>(),
                      pass.at(4).get<double>()});
  }
  return passes;
}

Json to_json(const PipelineSimulation& result) {
  Json stage_passes = Json::array();
  for (const auto& passes : result.stage_passes) stage_passes.push_back(passes_json(passes));
  return Json{{"iteration_time_s", result.iteration_time_s},
              {"stage_passes", stage_passes},
              {"stage_synchronised_s", result.stage_synchronised_s},
              {"pipeline_s", result.pipeline_s},
              {"stage_finish_s", result.stage_finish_s},
              {"stage_busy_s", result.stage_busy_s},
              {"bubble_fraction", result.bubble_fraction},
              {"flows", result.flows},
              {"collectives", result.collectives}};
}

PipelineSimulation from_json(const Json& json) {
  PipelineSimulation result;
  result.iteration_time_s = json.at("iteration_time_s").get<double>();
  result.pipeline_s = json.at("pipeline_s").get<double>();
  result.stage_finish_s = json.at("stage_finish_s").get<std::vector<double>>();
  result.stage_busy_s = json.at("stage_busy_s").get<std::vector<double>>();
  result.bubble_fraction = json.at("bubble_fraction").get<double>();
  result.flows = json.at("flows").get<long long>();
  result.collectives = json.at("collectives").get<long long>();
  for (const Json& passes : json.at("stage_passes")) {
    result.stage_passes.push_back(passes_from_json(passes));
  }
  result.stage_synchronised_s = json.at("stage_synchronised_s").get<std::vector<double>>();
  return result;
}

}  // namespace

PipelineSimulation simulate_pipeline(const Scenario& scenario, const ParallelRun& run,
                                     const ParallelIterationCost& cost, Granularity granularity,
                                     const NetworkConfig& network, Deadline deadline) {
  if (!scenario.cluster.topology) {
    throw InputError(scenario.cluster_source.file, scenario.cluster_source.path("topology"), "none",
                     "a topology: the 3D simulation lays the ranks and their transfers on it");
  }
  const ParallelLayout layout(run.degrees, run.order);
  Layout rings = lay_out(layout, cost);
  const NetworkPlan plan = plan_network(scenario.cluster, rings.groups);
  const Granularity resolved = resolve_granularity(granularity, layout.world());
  const std::string reply = run_in_child(
      [&] {
        Kernel kernel(plan, network);
        PipelineRun pipeline(kernel, plan, layout, run, cost, rings, resolved);
        pipeline.start();
        kernel.run();
        PipelineSimulation result;
        const int p = layout.degrees().pipeline;
        result.stage_finish_s.assign(p, 0.0);
        result.stage_busy_s.assign(p, -1.0);
        result.stage_passes.resize(p);
        result.stage_synchronised_s.assign(p, 0.0);
        double synchronised_s = 0;
        for (const RankState& state : pipeline.states()) {
          if (state.next != state.order.size()) {
            throw std::logic_error("sim: the pipeline deadlocked");
          }
          result.pipeline_s = std::max(result.pipeline_s, state.finish_s);
          result.stage_finish_s[state.stage] =
              std::max(result.stage_finish_s[state.stage], state.finish_s);
          if (result.stage_busy_s[state.stage] < 0) {
            result.stage_busy_s[state.stage] = state.busy_s;
            result.stage_passes[state.stage] = state.passes;
          }
          result.stage_synchronised_s[state.stage] =
              std::max(result.stage_synchronised_s[state.stage], state.synchronised_s);
          synchronised_s = std::max(synchronised_s, state.synchronised_s);
        }
        double optimizer_s = 0;
        for (const StageCost& stage : cost.stages)
          optimizer_s = std::max(optimizer_s, stage.optimizer_step_s);
        result.iteration_time_s = synchronised_s + optimizer_s;
        const double busiest_s =
            *std::max_element(result.stage_busy_s.begin(), result.stage_busy_s.end());
        // From the first pass on, as the model counts it (gathers before it are no bubble).
        double first_start_s = result.pipeline_s;
        for (const auto& passes : result.stage_passes) {
          if (!passes.empty()) first_start_s = std::min(first_start_s, passes.front().start_s);
        }
        const double span_s = result.pipeline_s - first_start_s;
        result.bubble_fraction = span_s > 0 ? 1.0 - busiest_s / span_s : 0.0;
        result.flows = kernel.flows();
        result.collectives = pipeline.collectives();
        return to_json(result).dump();
      },
      deadline);
  return from_json(Json::parse(reply));
}

}  // namespace osdp::sim
