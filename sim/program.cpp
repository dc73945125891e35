#include "sim/program.hpp"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <stdexcept>

#include "model/input_error.hpp"
#include "model/mode.hpp"

namespace osdp::sim {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::forward:
      return "forward";
    case Phase::recompute:
      return "recompute";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
  }
  return "?";
}

namespace {

bool gathers_each_use(Mode mode) {
  return describe_mode(mode).parameters == ParameterUse::gathered_each_use;
}

GroupKind group_kind(GroupAxis group) {
  switch (group) {
    case GroupAxis::data:
      return GroupKind::world;
    case GroupAxis::data_shard:
      return GroupKind::intra_node;
    case GroupAxis::data_replicate:
      return GroupKind::inter_node;
    case GroupAxis::tensor:  // no data-parallel mode runs on these
    case GroupAxis::pipeline:
      break;
  }
  return GroupKind::world;
}

bool uses_node_groups(Mode mode) {
  for (const ModeCollective& collective : describe_mode(mode).collectives) {
    if (collective.group != GroupAxis::data) return true;
  }
  return false;
}

// One compute of the backward pass and the gather it needs, before emission.
struct BackwardStep {
  int op = 0;
  int slice = 0;
  Phase phase = Phase::backward;
  bool new_gather = false;  // needs a gather of its own
  CommCategory gather_category = CommCategory::ag_backward;
  bool frees_gather = false;      // frees the gather it uses when it ends
  bool post_collectives = false;  // reduce-scatter (and all-reduce) follow it
};

class Builder {
 public:
  Builder(const CostModel& model, const Plan& plan, const SimOptions& options)
      : model_(model), plan_(plan), options_(options), cluster_(model.cluster()) {
    program_.lanes = options.separate_reduce_scatter_lane ? 2 : 1;
    launch_s_ = options.kernel_launch_s.value_or(cluster_.gpu.kernel_launch_s);
  }

  Program build() {
    const Workload& workload = model_.workload();
    if (static_cast<int>(plan_.choices.size()) != workload.size()) {
      throw InputError("", "$.operators", std::to_string(plan_.choices.size()) + " choices",
                       fmt::format("one choice per operator ({})", workload.size()));
    }
    for (int i = 0; i < workload.size(); ++i) {
      (void)model_.option_cost(i, plan_.choices[i]);  // validates the choice
      if (uses_node_groups(plan_.choices[i].mode)) program_.uses_node_groups = true;
      add_initial_memory(i);
    }
    // Gradient accumulation: every micro-batch runs the whole forward and backward; the DP
    // all-reduce waits for the last one, the sharded modes reduce-scatter in each (FSDP).
    const int micro_batches = model_.training().accumulation_steps;
    program_.accumulation_steps = micro_batches;
    for (int micro = 0; micro < micro_batches; ++micro) {
      last_micro_batch_ = micro + 1 == micro_batches;
      forward();
      backward();
    }
    if (options_.gradient_all_reduce == GradientAllReduce::after_backward) bucket_all_reduce();
    optimizer();
    return std::move(program_);
  }

 private:
  const OperatorChoice& choice(int op) const { return plan_.choices[op]; }
  bool sharded(int op, int slice) const { return slice < choice(op).sharded_slices; }
  bool checkpointed(int op) const { return choice(op).checkpoint != Checkpoint::none; }
  double slice_bytes(int op) const {
    return model_.workload().op(op).parameter_bytes / choice(op).slices;
  }
  // The group a slice's parameters are gathered over (its mode's shard group).
  GroupKind shard_group(int op) const {
    return group_kind(describe_mode(choice(op).mode).shard_group.value_or(GroupAxis::data));
  }
  double saved_activation_bytes(int op) const {
    const Operator& o = model_.workload().op(op);
    return plan_.batch_size * (checkpointed(op) ? *o.input_activation_bytes_per_sample
                                                : o.activation_bytes_per_sample);
  }
  double recomputed_activation_bytes(int op) const {
    const Operator& o = model_.workload().op(op);
    return plan_.batch_size *
           (o.activation_bytes_per_sample - *o.input_activation_bytes_per_sample);
  }
  // What a slice after the first adds: measured for the operator's kind, or the partial-sum
  // add (read two operands, write one).
  double slice_add_s(int op, int slice, bool backward) const {
    if (slice == 0) return 0.0;
    if (const auto measured = model_.calibrated_extra_slice_s(op, backward)) return *measured;
    if (!cluster_.gpu.memory_bandwidth_Bps) return 0.0;
    return plan_.batch_size * 3.0 * model_.workload().op(op).output_bytes_per_sample /
           *cluster_.gpu.memory_bandwidth_Bps;
  }

  void add_initial_memory(int op) {
    const Operator& o = model_.workload().op(op);
    const OperatorChoice& c = choice(op);
    const double sharded_fraction = static_cast<double>(c.sharded_slices) / c.slices;
    const double states = o.model_state_bytes();
    // Parameters gathered once are held as gathered buffers from forward to backward, not here.
    const double sharded_states = resting_state_bytes(
        c.mode, cluster_, o.parameter_bytes, o.gradient_bytes, o.optimizer_bytes, c.offload);
    const double bytes = (1.0 - sharded_fraction) * states + sharded_fraction * sharded_states;
    if (bytes > 0) program_.initial.push_back({bytes, MemoryCategory::model_states, op});
    if (o.extra_bytes > 0) program_.initial.push_back({o.extra_bytes, MemoryCategory::extra, op});
  }

  int add_item(ProgramItem item) {
    program_.items.push_back(std::move(item));
    return static_cast<int>(program_.items.size()) - 1;
  }

  int add_compute(Phase phase, int op, int slice, double work_s, int launches) {
    ProgramItem item;
    item.phase = phase;
    item.op = op;
    item.slice = slice;
    item.work_s = work_s + launches * launch_s_;
    if (last_compute_ >= 0) item.deps.push_back({last_compute_, DepOn::end});
    const double workspace =
        op >= 0 ? plan_.batch_size * model_.workload().op(op).workspace_bytes_per_sample : 0.0;
    if (workspace > 0) {
      item.at_start.push_back({workspace, MemoryCategory::workspace, op});
      item.at_end.push_back({-workspace, MemoryCategory::workspace, op});
    }
    last_compute_ = add_item(std::move(item));
    stream_.push_back(last_compute_);
    ++program_.compute_items;
    return last_compute_;
  }

  int add_collective(CollectiveKind kind, GroupKind group, bool reduction, double bytes,
                     CommCategory category, int op, int slice, std::vector<Dep> deps) {
    ProgramItem item;
    item.collective = true;
    item.kind = kind;
    item.group = group;
    item.lane = reduction && options_.separate_reduce_scatter_lane ? 1 : 0;
    item.bytes = bytes;
    item.category = category;
    item.op = op;
    item.slice = slice;
    item.deps = std::move(deps);
    const int lane_key = static_cast<int>(group) * 2 + item.lane;
    if (lane_tail_[lane_key] >= 0) item.deps.push_back({lane_tail_[lane_key], DepOn::end});
    const int index = add_item(std::move(item));
    lane_tail_[lane_key] = index;
    ++program_.collective_items;
    if (reduction) reductions_.push_back(index);
    return index;
  }

  // The host copy an offloaded slice's mode runs at `stage` in `direction` (nullptr if none).
  const HostCopy* host_copy_of(int op, Stage stage, CopyDirection direction) const {
    const OperatorChoice& c = choice(op);
    const ModeDescription& description = describe_mode(c.mode);
    if (!c.offload || !description.offload) return nullptr;
    for (const HostCopy& copy : description.offload->copies) {
      if (copy.stage == stage && copy.direction == direction) return &copy;
    }
    return nullptr;
  }

  // A copy of one rank's shard of slice `slice` between device and host, on the lane of the
  // mode's collectives of that kind (after what the lane ran before, as a collective would be).
  int add_host_copy(const HostCopy& copy, int op, int slice, CommCategory category,
                    std::vector<Dep> deps) {
    ProgramItem item;
    item.host_copy = true;
    item.copy_direction = copy.direction;
    item.group = shard_group(op);
    item.lane = copy.gradients && options_.separate_reduce_scatter_lane ? 1 : 0;
    item.bytes = model_.host_copy_bytes(choice(op).mode, copy, slice_bytes(op));
    item.work_s = host_copy_s(cluster_, item.bytes);
    item.category = category;
    item.op = op;
    item.slice = slice;
    item.deps = std::move(deps);
    const int lane_key = static_cast<int>(item.group) * 2 + item.lane;
    if (lane_tail_[lane_key] >= 0) item.deps.push_back({lane_tail_[lane_key], DepOn::end});
    const int index = add_item(std::move(item));
    lane_tail_[lane_key] = index;
    return index;
  }

  static Stage stage_of(CommCategory category) {
    switch (category) {
      case CommCategory::ag_forward:
        return Stage::forward;
      case CommCategory::ag_recompute:
        return Stage::recompute;
      case CommCategory::ag_backward:
        return Stage::backward;
      case CommCategory::ag_after_step:
        return Stage::after_step;
      default:
        return Stage::after_backward;
    }
  }

  // Whether the rate limiter could admit one more gather now: the free it would wait for is
  // known (a buffer still held, e.g. by a fused recompute's operator, makes a prefetch wait).
  bool limiter_can_admit() const {
    const int earlier = static_cast<int>(gather_free_item_.size()) - options_.units_in_flight;
    return earlier < 0 || gather_free_item_[earlier] >= 0;
  }

  // A gather of one slice's parameters. `window` is the dependency that opens the prefetch
  // window; gathers freed after use also wait for the free of gather m - units_in_flight.
  int add_gather(int op, int slice, CommCategory category, std::optional<Dep> window,
                 bool rate_limited) {
    std::vector<Dep> deps;
    if (window) deps.push_back(*window);
    if (rate_limited) {
      const int m = static_cast<int>(gather_free_item_.size());
      const int earlier = m - options_.units_in_flight;
      if (earlier >= 0) {
        if (gather_free_item_[earlier] < 0) {
          throw std::logic_error("sim: a gather waits for the free of a buffer still in use");
        }
        deps.push_back({gather_free_item_[earlier], DepOn::end});
      }
    }
    // CPU offload of the parameters: the shard comes in from the host first; the gather waits
    // for it (on the same lane, right after it).
    if (const HostCopy* copy = host_copy_of(op, stage_of(category), CopyDirection::to_device)) {
      const int copied = add_host_copy(*copy, op, slice, category, std::move(deps));
      deps = {{copied, DepOn::end}};
    }
    const int index = add_collective(CollectiveKind::all_gather, shard_group(op), false,
                                     slice_bytes(op), category, op, slice, std::move(deps));
    program_.items[index].at_start.push_back(
        {slice_bytes(op), MemoryCategory::gathered_parameters, op});
    if (rate_limited) {
      gather_free_item_.push_back(-1);
      pending_free_[index] = static_cast<int>(gather_free_item_.size()) - 1;
    }
    return index;
  }

  // Marks compute `item` as the last user of `gather`: the buffer is freed when it ends.
  void free_after(int gather, int item) {
    program_.items[item].at_end.push_back({-program_.items[gather].bytes,
                                           MemoryCategory::gathered_parameters,
                                           program_.items[gather].op});
    const auto it = pending_free_.find(gather);
    if (it != pending_free_.end()) {
      gather_free_item_[it->second] = item;
      pending_free_.erase(it);
    }
  }

  std::optional<Dep> forward_window() const {
    const int d = options_.forward_prefetch;
    const int n = static_cast<int>(stream_.size());
    if (d == 0) {
      if (n == 0) return std::nullopt;
      return Dep{stream_.back(), DepOn::end};
    }
    if (n - d < 0) return std::nullopt;
    return Dep{stream_[n - d], DepOn::start};
  }

  void forward() {
    const Workload& workload = model_.workload();
    for (int op : workload.execution_order()) {
      const OperatorChoice& c = choice(op);
      for (int s = 0; s < c.slices; ++s) {
        int gather = -1;
        if (sharded(op, s) && describe_mode(c.mode).parameters != ParameterUse::replicated) {
          gather = add_gather(op, s, CommCategory::ag_forward, forward_window(),
                              gathers_each_use(c.mode));
        }
        const Linear law = model_.forward_compute_s(op);
        const double work = law.at(plan_.batch_size) / c.slices + slice_add_s(op, s, false);
        const int f = add_compute(Phase::forward, op, s, work, 1);
        if (gather >= 0) program_.items[f].deps.push_back({gather, DepOn::end});
        if (s == 0) {
          program_.items[f].at_start.push_back(
              {saved_activation_bytes(op), MemoryCategory::activations, op});
        }
        if (gather >= 0) {
          if (gathers_each_use(c.mode)) {
            free_after(gather, f);
          } else {
            held_gathers_[{op, s}] = gather;  // Z2: kept until the slice's backward
          }
        }
      }
    }
  }

  // The runtime's order (and torch.utils.checkpoint's): a checkpointed operator recomputes all
  // its slices' forwards, first to last, then runs their backwards, last to first.
  std::vector<BackwardStep> backward_steps() const {
    std::vector<BackwardStep> steps;
    const auto& order = model_.workload().execution_order();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int op = *it;
      const OperatorChoice& c = choice(op);
      const bool fused = c.checkpoint == Checkpoint::fused;
      if (checkpointed(op)) {
        for (int s = 0; s < c.slices; ++s) {
          BackwardStep recompute{op, s, Phase::recompute};
          if (sharded(op, s) && gathers_each_use(c.mode)) {
            recompute.new_gather = true;
            recompute.gather_category =
                fused ? CommCategory::ag_backward : CommCategory::ag_recompute;
            recompute.frees_gather = !fused;
          }
          steps.push_back(recompute);
        }
      }
      for (int s = c.slices - 1; s >= 0; --s) {
        BackwardStep back{op, s, Phase::backward};
        back.post_collectives = true;
        if (sharded(op, s) && gathers_each_use(c.mode)) {
          back.new_gather = !(checkpointed(op) && fused);
          back.frees_gather = true;
        }
        steps.push_back(back);
      }
    }
    return steps;
  }

  void backward() {
    const std::vector<BackwardStep> steps = backward_steps();
    const BackwardPrefetch policy = options_.backward_prefetch;
    std::vector<int> gather_of(steps.size(), -1);
    // Gathers of fused recomputes, kept for their slices' backwards.
    std::map<std::pair<int, int>, int> kept_for_backward;
    auto window_after = [&](int compute, DepOn on) -> std::optional<Dep> {
      if (compute < 0) return std::nullopt;
      return Dep{compute, on};
    };
    auto next_gathering = [&](std::size_t from) -> int {
      for (std::size_t j = from; j < steps.size(); ++j) {
        if (steps[j].new_gather) return static_cast<int>(j);
      }
      return -1;
    };
    auto emit_gather = [&](std::size_t j, std::optional<Dep> window) {
      const BackwardStep& step = steps[j];
      // A fused recompute gathers every slice of its operator for the backwards that follow:
      // the operator is one unit for the rate limiter, which its first slice stands for.
      const bool later_fused_slice =
          step.phase == Phase::recompute && !step.frees_gather && step.slice > 0;
      gather_of[j] =
          add_gather(step.op, step.slice, step.gather_category, window, !later_fused_slice);
    };
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const BackwardStep& step = steps[i];
      const OperatorChoice& c = choice(step.op);
      if (step.new_gather && gather_of[i] < 0) {
        emit_gather(i, window_after(last_compute_, DepOn::end));
      }
      int gather = gather_of[i];
      if (!step.new_gather) {
        const auto kept = kept_for_backward.find({step.op, step.slice});
        gather = kept == kept_for_backward.end() ? -1 : kept->second;
      }
      const Linear law = step.phase == Phase::recompute ? model_.forward_compute_s(step.op)
                                                        : model_.backward_compute_s(step.op);
      const double work = law.at(plan_.batch_size) / c.slices +
                          slice_add_s(step.op, step.slice, step.phase == Phase::backward);
      const int compute =
          add_compute(step.phase, step.op, step.slice, work, step.phase == Phase::backward ? 2 : 1);
      ProgramItem& item = program_.items[compute];
      const bool gathers = sharded(step.op, step.slice) && gathers_each_use(c.mode);
      if (gathers) item.deps.push_back({gather, DepOn::end});
      // Z2: the slice's parameters were gathered in forward and are held until its backward.
      const auto held = held_gathers_.find({step.op, step.slice});
      if (held != held_gathers_.end() && step.phase == Phase::backward) {
        item.at_end.push_back(
            {-slice_bytes(step.op), MemoryCategory::gathered_parameters, step.op});
      }
      if (step.phase == Phase::recompute && step.slice == 0) {
        item.at_start.push_back({recomputed_activation_bytes(step.op),
                                 MemoryCategory::recomputed_activations, step.op});
      }
      const bool sharded_slice = sharded(step.op, step.slice);
      const double gradient_bytes = model_.workload().op(step.op).gradient_bytes / c.slices;
      if (step.phase == Phase::backward && sharded_slice &&
          describe_mode(c.mode).shards_gradients) {
        item.at_start.push_back({gradient_bytes, MemoryCategory::unsharded_gradients, step.op});
      }
      if (step.phase == Phase::backward && step.slice == 0) {
        item.at_end.push_back(
            {-saved_activation_bytes(step.op), MemoryCategory::activations, step.op});
        if (checkpointed(step.op)) {
          item.at_end.push_back({-recomputed_activation_bytes(step.op),
                                 MemoryCategory::recomputed_activations, step.op});
        }
      }
      if (gathers) {
        if (step.frees_gather) {
          free_after(gather, compute);
          kept_for_backward.erase({step.op, step.slice});
        } else {
          kept_for_backward[{step.op, step.slice}] = gather;
        }
      }
      // Prefetch of the next gather, before this step's reduce-scatter in the lane (not from a
      // fused recompute, which keeps its gather for the backward: two units in flight at most).
      const int next = next_gathering(i + 1);
      const bool keeps_gather = gathers && !step.frees_gather;
      if (next >= 0 && gather_of[next] < 0 && policy != BackwardPrefetch::none && !keeps_gather &&
          limiter_can_admit()) {
        // A slice gathered again right after this step (an unfused recompute, then its
        // backward) refills the buffer this step uses: not before the step has freed it.
        const bool same_buffer =
            steps[next].op == step.op && steps[next].slice == step.slice && gathers;
        const DepOn on =
            policy == BackwardPrefetch::pre && !same_buffer ? DepOn::start : DepOn::end;
        emit_gather(static_cast<std::size_t>(next), window_after(compute, on));
      }
      if (step.phase == Phase::backward) post_collectives(step, compute, gradient_bytes);
    }
  }

  // The collectives a mode's description runs at `stage` for one slice (DP: for all the DP
  // slices of the operator at once), each after `after` and, when chained, after the previous;
  // in an earlier micro-batch only those the mode runs in every one. Returns the last, -1 if
  // none.
  int add_stage_collectives(Mode mode, Stage stage, int op, int slice, double bytes, Dep after,
                            bool reduction) {
    int previous = -1;
    const ModeDescription& description = describe_mode(mode);
    for (const ModeCollective& collective : description.collectives) {
      if (collective.stage != stage) continue;
      // A mode that keeps the whole gradient accumulates it: reduced after the last micro-batch.
      if (!runs_every_micro_batch(description, collective) && !last_micro_batch_) continue;
      const Dep dep =
          collective.after_previous && previous >= 0 ? Dep{previous, DepOn::end} : after;
      const double full_bytes =
          collective.node_shard_bytes ? bytes / cluster_.gpus_per_node : bytes;
      previous = add_collective(collective.kind, group_kind(collective.group), reduction,
                                full_bytes, category_of(collective), op, slice, {dep});
    }
    return previous;
  }

  static CommCategory category_of(const ModeCollective& collective) {
    switch (collective.stage) {
      case Stage::forward:
        return CommCategory::ag_forward;
      case Stage::recompute:
        return CommCategory::ag_recompute;
      case Stage::backward:
        return CommCategory::ag_backward;
      case Stage::after_backward:
        return collective.kind == CollectiveKind::all_reduce ? CommCategory::all_reduce
                                                             : CommCategory::reduce_scatter;
      case Stage::after_step:
        return CommCategory::ag_after_step;
    }
    return CommCategory::all_reduce;
  }

  void post_collectives(const BackwardStep& step, int compute, double gradient_bytes) {
    const OperatorChoice& c = choice(step.op);
    if (sharded(step.op, step.slice)) {
      const int first = static_cast<int>(program_.items.size());
      const int last = add_stage_collectives(c.mode, Stage::after_backward, step.op, step.slice,
                                             slice_bytes(step.op) * model_.gradient_reduce_ratio(),
                                             {compute, DepOn::end}, true);
      // The slice's full gradient lives until its first reduction (a reduce-scatter) is done.
      if (last >= 0 && describe_mode(c.mode).shards_gradients) {
        program_.items[first].at_end.push_back(
            {-gradient_bytes, MemoryCategory::unsharded_gradients, step.op});
      }
      // CPU offload: the reduced gradient shard goes to the host, in the micro-batches where
      // the mode's copy runs; the optimizer step waits for it.
      const HostCopy* copy = host_copy_of(step.op, Stage::after_backward, CopyDirection::to_host);
      if (copy && last >= 0 &&
          (copy_runs_every_micro_batch(describe_mode(c.mode), *copy) || last_micro_batch_)) {
        reductions_.push_back(add_host_copy(*copy, step.op, step.slice,
                                            program_.items[last].category, {{last, DepOn::end}}));
      }
    }
    const int dp_slices = c.slices - c.sharded_slices;
    if (step.slice == 0 && dp_slices > 0 && last_micro_batch_) {
      const double bytes = model_.workload().op(step.op).parameter_bytes * dp_slices / c.slices *
                           model_.gradient_reduce_ratio();
      if (options_.gradient_all_reduce == GradientAllReduce::after_backward) {
        bucket_bytes_ += bytes;
      } else {
        add_stage_collectives(Mode::dp, Stage::after_backward, step.op, -1, bytes,
                              {compute, DepOn::end}, true);
      }
    }
  }

  // Megatron / DeepSpeed without overlap: every DP gradient in one all-reduce once the last
  // backward has ended.
  void bucket_all_reduce() {
    if (bucket_bytes_ <= 0) return;
    add_collective(CollectiveKind::all_reduce, GroupKind::world, true, bucket_bytes_,
                   CommCategory::all_reduce, -1, -1, {{last_compute_, DepOn::end}});
  }

  void optimizer() {
    // The optimizer step runs whatever the cost model: the extended model's memory-bound update
    // (zero when the GPU's memory bandwidth is unknown).
    CostSettings settings = model_.settings();
    settings.kind = CostModelKind::extended;
    const CostModel extended(model_.workload(), cluster_, model_.training(), settings);
    double work = 0;
    for (int i = 0; i < model_.workload().size(); ++i)
      work += extended.optimizer_step_s(i, choice(i));
    const int step = add_compute(Phase::optimizer, -1, 0, work, 0);
    for (int reduction : reductions_) program_.items[step].deps.push_back({reduction, DepOn::end});
    // Modes that share updated parameter shards after the step (ZeRO-1): the iteration ends
    // when the last of those gathers has arrived.
    std::vector<int> after_step;
    for (int op : model_.workload().execution_order()) {
      const OperatorChoice& c = choice(op);
      for (int s = 0; s < c.sharded_slices; ++s) {
        // CPU offload: the updated parameter shard comes back from the host first.
        Dep after{step, DepOn::end};
        if (const HostCopy* copy = host_copy_of(op, Stage::after_step, CopyDirection::to_device)) {
          const int copied =
              add_host_copy(*copy, op, s, CommCategory::ag_after_step, {{step, DepOn::end}});
          after_step.push_back(copied);
          after = {copied, DepOn::end};
        }
        const int last =
            add_stage_collectives(c.mode, Stage::after_step, op, s, slice_bytes(op), after, false);
        if (last >= 0) after_step.push_back(last);
      }
    }
    if (after_step.empty()) return;
    const int end = add_compute(Phase::optimizer, -1, 0, 0.0, 0);
    for (int gather : after_step) program_.items[end].deps.push_back({gather, DepOn::end});
  }

  const CostModel& model_;
  const Plan& plan_;
  const SimOptions& options_;
  const Cluster& cluster_;
  double launch_s_ = 0;
  bool last_micro_batch_ = true;
  double bucket_bytes_ = 0;  // DP gradients of the after-backward all-reduce
  Program program_;
  int last_compute_ = -1;
  std::vector<int> stream_;
  int lane_tail_[6] = {-1, -1, -1, -1, -1, -1};
  std::vector<int> reductions_;
  std::vector<int> gather_free_item_;  // rate-limited gathers in issue order -> free item
  std::map<int, int> pending_free_;    // gather item -> its index in gather_free_item_
  std::map<std::pair<int, int>, int> held_gathers_;  // Z2 (op, slice) -> forward gather
};

}  // namespace

Program build_program(const CostModel& model, const Plan& plan, const SimOptions& options) {
  return Builder(model, plan, options).build();
}

}  // namespace osdp::sim
