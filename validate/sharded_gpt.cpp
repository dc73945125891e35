#include "validate/sharded_gpt.hpp"

#include <ATen/core/LegacyTypeDispatch.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "model/input_error.hpp"
#include "model/mode.hpp"
#include "validate/attention_kernels.hpp"
#include "validate/counting_allocator.hpp"
#include "validate/rank_device.hpp"

namespace osdp::validate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A block of a canonical tensor stored in a slice's flat buffer: rows (dim 0) or columns
// (dim 1) [start, start + length), kept contiguous under `role`.
struct Piece {
  int member = 0;  // the unit's member (operator) it belongs to
  std::string role;
  std::string tensor;  // canonical name
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
  std::vector<int64_t> shape;  // of the block
  int64_t offset = 0;          // in the flat buffer
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

enum class Phase { forward, recompute, backward };

struct Slice {
  std::vector<Piece> pieces;
  int64_t numel = 0;  // padded to a multiple of the world size
  bool sharded = false;
  Mode mode = Mode::dp;
  std::vector<int> shard_group;    // ranks sharing the slice (ring order)
  std::vector<int> replica_group;  // hsdp: ranks holding the same shard
  int shard_index = 0;             // this rank's chunk in shard_group
  // Flat parameters as the operator computes with them: a leaf that requires grad; for a
  // sharded slice its storage is allocated only while gathered.
  at::Tensor full;
  bool present = false;
  CommHandle gathered;
  at::Tensor shard;       // sharded: this rank's chunk of the parameters (z1: a view of full)
  at::Tensor shard_grad;  // sharded: reduced gradient chunk (z1: a view of full_grad)
  at::Tensor full_grad;   // z1: the whole gradient, kept like DP's (ZeRO-1 shards no gradient)
  CommHandle reduced;     // sharded: gradient reduction in flight
  int64_t dp_offset = 0;  // dp: offset in the operator's gradient bucket
  at::Tensor exp_avg, exp_avg_sq;
  // From the mode's table: its gradient reduction runs in every micro-batch (it keeps only a
  // shard), not only after the last one (it keeps the whole gradient and accumulates it).
  bool reduces_every_micro_batch = true;
  // CPU offload (the mode's offload description): the optimizer states live in host memory
  // (the host arena on the CPU testbed) and the step runs there; the parameter shard and the
  // reduced gradient shard too when the description says so. The copies between device and
  // host are the gather's copy of the shard in, the reduction's copy of its chunk out, and (for
  // parameters kept on the device) the updated shard back after the step.
  bool offloaded = false;
  bool parameters_on_host = false;
  bool gradients_on_host = false;

  int64_t shard_numel() const { return numel / static_cast<int64_t>(shard_group.size()); }
  // Whether the slice's parameters are gathered before use (not when its mode replicates them).
  bool gathers() const {
    return sharded && describe_mode(mode).parameters != ParameterUse::replicated;
  }
  at::Tensor& local_parameters() { return sharded ? shard : full; }
};

// One GPT operator of a unit.
struct Member {
  OperatorKind kind = OperatorKind::generic;
  std::string prefix;  // canonical name prefix, e.g. "layer0.attention."
};

// What the plan chooses for: one operator, or an FSDP unit of consecutive operators that share
// one flat buffer (one gather, one gradient reduction). A unit of several is never split, so its
// one slice holds every member's pieces and its forward runs the members in turn.
struct OperatorRuntime {
  std::vector<Member> members;
  OperatorChoice choice;
  std::vector<Slice> slices;
  at::Tensor dp_grad;  // gradients of the DP slices, all-reduced together
  CommHandle dp_reduced;
  // Saved between forward and backward.
  at::Tensor input;   // operator input (a leaf), or token ids for the embedding
  at::Tensor y0;      // slice-0 output: residual + bias + first partial sum
  at::Tensor u;       // prologue output (LayerNorm), k > 1
  at::Tensor u_leaf;  // what slices 1.. compute from, k > 1
  std::vector<at::Tensor> partials;
  at::Tensor output;             // sum of partials (detached)
  at::Tensor logits_leaf, loss;  // the unit ending in the head only

  OperatorKind first_kind() const { return members.front().kind; }
  OperatorKind last_kind() const { return members.back().kind; }
};

bool is_checkpointed(const OperatorChoice& choice) { return choice.checkpoint != Checkpoint::none; }

// Whether a sharded slice is freed after use in `phase`.
bool frees_after(const Slice& slice, const OperatorChoice& choice, Phase phase) {
  if (!slice.gathers()) return false;
  const bool each_use = describe_mode(slice.mode).parameters == ParameterUse::gathered_each_use;
  switch (phase) {
    case Phase::forward:
      return each_use;
    case Phase::recompute:
      return each_use && choice.checkpoint == Checkpoint::unfused;
    case Phase::backward:
      return true;
  }
  return true;
}

// Gives `tensor` fresh storage from its device's allocator (the counting allocator on the CPU,
// the caching allocator on CUDA), keeping the tensor object that autograd's saved views share.
void allocate_storage(at::Tensor& tensor) {
  at::Tensor fresh = at::empty({tensor.numel()}, tensor.options().requires_grad(false));
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(
      fresh.storage().unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(nullptr, tensor.device())));
  storage->set_nbytes(fresh.nbytes());
}

void free_storage(at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

// Copies without bumping the destination's version counter, which autograd checks on the views
// saved from an earlier phase (the gathered buffer is refilled with the same values).
void copy_unversioned(at::Tensor destination, const at::Tensor& source) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  destination.copy_(source);
}

// A fused recompute keeps its gather for the backward that follows: no backward prefetch then
// (the simulator's rule; it bounds the gathered units in flight to two).
bool keeps_gather_for_backward(const Slice& slice, const OperatorChoice& choice, Phase phase) {
  return phase == Phase::recompute && slice.gathers() &&
         describe_mode(slice.mode).parameters == ParameterUse::gathered_each_use &&
         !frees_after(slice, choice, phase);
}

// Whether `mode`'s gradient reduction runs in every micro-batch (model/mode's table). The
// runtime chains a mode's reductions after backward as one unit, so they must agree.
bool reduces_every_micro_batch(Mode mode) {
  const ModeDescription& description = describe_mode(mode);
  std::optional<bool> every;
  for (const ModeCollective& collective : description.collectives) {
    if (collective.stage != Stage::after_backward) continue;
    const bool runs = runs_every_micro_batch(description, collective);
    TORCH_CHECK(!every || *every == runs, "mode ", std::string(description.name),
                ": its gradient reductions disagree on running every micro-batch");
    every = runs;
  }
  return every.value_or(false);
}

}  // namespace

struct ShardedGpt::Impl {
  GptShape shape;
  Communicator& comm;
  std::unique_ptr<RankDevice> owned_device;  // the CPU when the caller gave no device
  RankDevice& device;
  at::TensorOptions float_options;
  RuntimeOptions options;
  std::vector<OperatorRuntime> ops;
  int world = 1;
  int rank = 0;
  int adam_step = 0;
  int micro_batches = 1;  // per optimizer step
  int micro = 0;          // the micro-batch running
  // The DP slices' all-reduce (their bucket), as the table has DP's reduction.
  bool dp_reduces_every_micro_batch = false;
  // With options.dp_all_reduce_after_backward: every operator's dp_grad is a view of this one
  // buffer, all-reduced in one collective after the backward.
  at::Tensor dp_bucket;

  // Gathers of one iteration in the order they are consumed, with the phase consuming each.
  struct GatherEvent {
    int op;
    int slice;
    Phase phase;
  };
  // One micro-batch's; a step runs it micro_batches times, and the indices below count over
  // the whole step (event e is gather_order[e % gather_order.size()]).
  std::vector<GatherEvent> gather_order;
  std::size_t forward_gathers = 0;  // the first ones in gather_order
  std::size_t next_gather = 0;      // next event to consume
  std::size_t issued_gather = 0;    // next event to issue
  std::size_t issue_limit = 0;      // events before it may be issued now (the prefetch window)
  std::vector<ScheduleEntry> schedule;
  double exposed_s = 0;

  Impl(const GptShape& s, const Plan& plan, Communicator& c, const NamedTensors& initial,
       RuntimeOptions o, RankDevice* given_device)
      : shape(s),
        comm(c),
        owned_device(given_device ? nullptr : make_rank_device(DeviceKind::cpu, 0)),
        device(given_device ? *given_device : *owned_device),
        float_options(at::TensorOptions().dtype(at::kFloat).device(device.device())),
        options(o),
        world(c.size()),
        rank(c.rank()),
        micro_batches(o.accumulation_steps),
        dp_reduces_every_micro_batch(reduces_every_micro_batch(Mode::dp)) {
    if (micro_batches < 1) {
      throw InputError("options", "accumulation_steps", std::to_string(micro_batches),
                       "at least 1 micro-batch per optimizer step");
    }
    check_runnable(shape, plan, world, options.gpus_per_node);
    const std::vector<OperatorRange> units = plan_units(shape, plan);
    ops.resize(units.size());
    for (std::size_t u = 0; u < units.size(); ++u) {
      build_operator(static_cast<int>(u), units[u], plan.choices[u], initial);
    }
    if (options.dp_all_reduce_after_backward) gather_dp_gradients_into_one_bucket();
    build_gather_order();
    check_accumulation();
  }

  // ---- layout --------------------------------------------------------------------------------

  // The operators' DP gradients become views of one buffer (each part a multiple of the world
  // size, so the whole one is too), in operator order.
  void gather_dp_gradients_into_one_bucket() {
    int64_t total = 0;
    for (const OperatorRuntime& op : ops) total += op.dp_grad.defined() ? op.dp_grad.numel() : 0;
    if (total == 0) return;
    dp_bucket = at::zeros({total}, float_options);
    int64_t offset = 0;
    for (OperatorRuntime& op : ops) {
      if (!op.dp_grad.defined()) continue;
      const int64_t numel = op.dp_grad.numel();
      op.dp_grad = dp_bucket.narrow(0, offset, numel);
      offset += numel;
    }
  }

  // The DP bucket's all-reduce, once the backward of the micro-batches it reduces has ended.
  void all_reduce_dp_bucket() {
    if (!dp_bucket.defined() || !(dp_reduces_every_micro_batch || last_micro_batch())) return;
    dp_bucket.div_(world);
    const CommHandle reduced = comm.start(CollectiveKind::all_reduce, dp_bucket);
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      if (!ops[i].dp_grad.defined()) continue;
      ops[i].dp_reduced = reduced;
      schedule.push_back({ScheduleEntry::Action::reduce, i, -1});
    }
  }

  std::string operator_name(int i) const { return validate::operator_name(shape, i); }

  // Member m's pieces per slice, for k slices.
  std::vector<std::vector<Piece>> slice_pieces(const Member& member, int m, int k) const {
    const int64_t h = shape.hidden;
    const int64_t v = shape.vocabulary;
    std::vector<std::vector<Piece>> slices(k);
    auto add = [&](int s, std::string role, std::string tensor, int dim, int64_t start,
                   int64_t length, std::vector<int64_t> block) {
      slices[s].push_back(
          {m, std::move(role), member.prefix + tensor, dim, start, length, std::move(block)});
    };
    switch (member.kind) {
      case OperatorKind::embedding:
        add(0, "token", "token", 0, 0, v, {v, h});
        add(0, "position", "position", 0, 0, shape.sequence_length, {shape.sequence_length, h});
        break;
      case OperatorKind::attention: {
        const int64_t hs = h / k;
        add(0, "ln.weight", "ln.weight", 0, 0, h, {h});
        add(0, "ln.bias", "ln.bias", 0, 0, h, {h});
        add(0, "proj.bias", "proj.bias", 0, 0, h, {h});
        for (int s = 0; s < k; ++s) {
          const char* names[3] = {"q", "k", "v"};
          for (int part = 0; part < 3; ++part) {
            add(s, std::string(names[part]) + ".weight", "qkv.weight", 0, part * h + s * hs, hs,
                {hs, h});
            add(s, std::string(names[part]) + ".bias", "qkv.bias", 0, part * h + s * hs, hs, {hs});
          }
          add(s, "proj.weight", "proj.weight", 1, s * hs, hs, {h, hs});
        }
        break;
      }
      case OperatorKind::mlp: {
        const int64_t q = 4 * h / k;
        add(0, "ln.weight", "ln.weight", 0, 0, h, {h});
        add(0, "ln.bias", "ln.bias", 0, 0, h, {h});
        add(0, "proj.bias", "proj.bias", 0, 0, h, {h});
        for (int s = 0; s < k; ++s) {
          add(s, "fc.weight", "fc.weight", 0, s * q, q, {q, h});
          add(s, "fc.bias", "fc.bias", 0, s * q, q, {q});
          add(s, "proj.weight", "proj.weight", 1, s * q, q, {h, q});
        }
        break;
      }
      case OperatorKind::head: {
        const int64_t c = h / k;
        add(0, "ln.weight", "ln.weight", 0, 0, h, {h});
        add(0, "ln.bias", "ln.bias", 0, 0, h, {h});
        for (int s = 0; s < k; ++s) add(s, "weight", "weight", 1, s * c, c, {v, c});
        break;
      }
      case OperatorKind::generic:
        break;
    }
    return slices;
  }

  // Host memory for offloaded states: CPU tensors, counted in the host arena.
  static at::Tensor host_zeros(int64_t numel) {
    HostArenaScope arena;
    return at::zeros({numel}, at::TensorOptions().dtype(at::kFloat));
  }
  static at::Tensor on_host(const at::Tensor& values) {
    HostArenaScope arena;
    return values.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }

  Member member_of(int i) const {
    if (i == 0) return {OperatorKind::embedding, "embedding."};
    if (i == shape.operators() - 1) return {OperatorKind::head, "head."};
    return {(i - 1) % 2 == 0 ? OperatorKind::attention : OperatorKind::mlp, operator_name(i) + "."};
  }

  void build_operator(int u, const OperatorRange& range, const OperatorChoice& choice,
                      const NamedTensors& initial) {
    OperatorRuntime& op = ops[u];
    op.choice = choice;
    const int k = choice.slices;
    std::vector<std::vector<Piece>> pieces(k);
    for (int m = 0; m < range.count; ++m) {
      op.members.push_back(member_of(range.first + m));
      std::vector<std::vector<Piece>> own = slice_pieces(op.members.back(), m, k);
      for (int s = 0; s < k; ++s) {
        pieces[s].insert(pieces[s].end(), own[s].begin(), own[s].end());
      }
    }
    op.slices.resize(k);
    int64_t dp_numel = 0;
    for (int s = 0; s < k; ++s) {
      Slice& slice = op.slices[s];
      slice.pieces = std::move(pieces[s]);
      int64_t offset = 0;
      for (Piece& piece : slice.pieces) {
        piece.offset = offset;
        offset += piece.numel();
      }
      slice.numel = (offset + world - 1) / world * world;
      // The first j slices run in the mode, the others in DP.
      slice.sharded = s < choice.sharded_slices;
      slice.mode = slice.sharded ? choice.mode : Mode::dp;
      slice.reduces_every_micro_batch = reduces_every_micro_batch(slice.mode);
      at::Tensor flat = at::zeros({slice.numel}, float_options);
      for (const Piece& piece : slice.pieces) {
        flat.narrow(0, piece.offset, piece.numel())
            .copy_(find_tensor(initial, piece.tensor)
                       .narrow(piece.dim, piece.start, piece.length)
                       .contiguous()
                       .view({-1}));
      }
      if (slice.sharded) {
        if (describe_mode(slice.mode).shard_group == GroupAxis::data_shard) {
          const int local = options.gpus_per_node;
          const int node = rank / local;
          for (int r = 0; r < local; ++r) slice.shard_group.push_back(node * local + r);
          for (int n = 0; n < world / local; ++n)
            slice.replica_group.push_back(n * local + rank % local);
        } else {
          for (int r = 0; r < world; ++r) slice.shard_group.push_back(r);
        }
        slice.shard_index = group_index(slice.shard_group, rank);
        const int64_t chunk = slice.shard_index * slice.shard_numel();
        const ModeDescription& description = describe_mode(slice.mode);
        slice.offloaded = choice.offload && description.offload.has_value();
        slice.parameters_on_host =
            slice.offloaded && description.offload->parameters && slice.gathers();
        slice.gradients_on_host = slice.offloaded && description.offload->gradients;
        if (slice.gathers()) {
          slice.shard = slice.parameters_on_host
                            ? on_host(flat.narrow(0, chunk, slice.shard_numel()))
                            : flat.narrow(0, chunk, slice.shard_numel()).clone();
          slice.shard_grad = slice.gradients_on_host ? host_zeros(slice.shard_numel())
                                                     : at::zeros_like(slice.shard);
          slice.full = at::empty({slice.numel}, float_options);
          free_storage(slice.full);
          slice.present = false;
        } else {
          // ZeRO-1: whole parameters and gradients; the optimizer updates this rank's chunk of
          // the parameters in place, and the chunks are all-gathered after the step.
          slice.full = flat;
          slice.present = true;
          slice.shard = flat.detach().narrow(0, chunk, slice.shard_numel());
          slice.full_grad = at::zeros({slice.numel}, float_options);
          slice.shard_grad = slice.gradients_on_host
                                 ? host_zeros(slice.shard_numel())
                                 : slice.full_grad.narrow(0, chunk, slice.shard_numel());
        }
      } else {
        slice.shard_group = {rank};
        slice.full = flat;
        slice.present = true;
        slice.dp_offset = dp_numel;
        dp_numel += slice.numel;
      }
      slice.full.set_requires_grad(true);
      const int64_t local_numel = slice.local_parameters().numel();
      slice.exp_avg =
          slice.offloaded ? host_zeros(local_numel) : at::zeros_like(slice.local_parameters());
      if (options.adam.kind == AdamSettings::Kind::adam) {
        slice.exp_avg_sq =
            slice.offloaded ? host_zeros(local_numel) : at::zeros_like(slice.local_parameters());
      }
    }
    if (dp_numel > 0) op.dp_grad = at::zeros({dp_numel}, float_options);
  }

  // The runtime accumulates a gradient either in the whole gradient it keeps, reducing it after
  // the last micro-batch (dp's bucket, z1), or in the shard it keeps, reducing every
  // micro-batch (the modes that gather): the mode table must say the same.
  void check_accumulation() const {
    if (micro_batches == 1) return;
    TORCH_CHECK(
        !dp_reduces_every_micro_batch,
        "mode dp reduces every micro-batch, but the runtime accumulates its whole gradient");
    for (const OperatorRuntime& op : ops) {
      for (const Slice& slice : op.slices) {
        if (!slice.sharded) continue;
        const bool keeps_whole = slice.full_grad.defined();
        TORCH_CHECK(keeps_whole != slice.reduces_every_micro_batch, "mode ",
                    std::string(mode_name(slice.mode)), ": the table's gradient reduction ",
                    slice.reduces_every_micro_batch ? "every micro-batch" : "after the last",
                    " does not fit the gradient the runtime keeps");
      }
    }
  }

  // The order in which operators acquire their slices, per phase; the engine follows it.
  template <typename Visit>
  void walk(Visit visit) const {
    const int n = static_cast<int>(ops.size());
    for (int i = 0; i < n; ++i) {
      for (int s = 0; s < ops[i].choice.slices; ++s) visit(i, s, Phase::forward);
    }
    for (int i = n - 1; i >= 0; --i) {
      const int k = ops[i].choice.slices;
      if (is_checkpointed(ops[i].choice)) {
        for (int s = 0; s < k; ++s) visit(i, s, Phase::recompute);
      }
      for (int s = k - 1; s >= 1; --s) visit(i, s, Phase::backward);
      visit(i, 0, Phase::backward);
    }
  }

  void build_gather_order() {
    std::map<std::pair<int, int>, bool> present;
    walk([&](int i, int s, Phase phase) {
      const Slice& slice = ops[i].slices[s];
      if (!slice.gathers()) return;
      bool& is_present = present[{i, s}];
      if (!is_present) gather_order.push_back({i, s, phase});
      is_present = !frees_after(slice, ops[i].choice, phase);
    });
    forward_gathers = static_cast<std::size_t>(
        std::count_if(gather_order.begin(), gather_order.end(),
                      [](const GatherEvent& event) { return event.phase == Phase::forward; }));
  }

  // ---- gathers -------------------------------------------------------------------------------

  void wait(const CommHandle& handle) {
    if (!handle.valid() || handle.ready()) {
      handle.wait();
      return;
    }
    device.synchronize();  // the compute queued so far is not a wait
    const auto start = Clock::now();
    handle.wait();
    device.synchronize();  // on CUDA the wait is a stream dependency: block until it is met
    exposed_s += seconds_since(start);
  }

  void issue_gather(Slice& slice) {
    allocate_storage(slice.full);
    at::Tensor data = slice.full.detach();
    copy_unversioned(data.narrow(0, slice.shard_index * slice.shard_numel(), slice.shard_numel()),
                     slice.shard);
    slice.gathered = comm.start(CollectiveKind::all_gather, data, slice.shard_group);
    slice.present = true;
  }

  // Issues the gathers the prefetch window admits, in order, never into a buffer still
  // allocated (that one is issued when the buffer is released).
  void issue_admitted_gathers() {
    const std::size_t limit = std::min(issue_limit, step_gathers());
    while (issued_gather < limit) {
      const GatherEvent& event = gather_event(issued_gather);
      Slice& slice = ops[event.op].slices[event.slice];
      if (slice.present) return;
      issue_gather(slice);
      schedule.push_back({ScheduleEntry::Action::gather, event.op, event.slice});
      ++issued_gather;
    }
  }

  void admit_gathers_up_to(std::size_t limit) { issue_limit = std::max(issue_limit, limit); }

  std::size_t step_gathers() const { return micro_batches * gather_order.size(); }
  const GatherEvent& gather_event(std::size_t e) const {
    return gather_order[e % gather_order.size()];
  }
  // The first event of micro-batch u.
  std::size_t micro_batch_start(int u) const { return u * gather_order.size(); }

  // Forward: `prefetch_depth` gathers ahead of the one in use, within the forward pass (the
  // backward policy decides when the first backward gather goes).
  void admit_forward_prefetch() {
    admit_gathers_up_to(std::min(next_gather + static_cast<std::size_t>(options.prefetch_depth),
                                 micro_batch_start(micro) + forward_gathers));
  }

  // Backward: the next gather, within this micro-batch (the next one's forward gathers are the
  // forward prefetch's).
  void admit_backward_prefetch() {
    admit_gathers_up_to(std::min(next_gather + 1, micro_batch_start(micro + 1)));
  }

  // The last backward compute of a micro-batch before another: the next forward's prefetch
  // window opens as it starts (the simulator's forward window runs on across micro-batches).
  void admit_next_micro_batch_prefetch() {
    if (micro + 1 >= micro_batches) return;
    admit_gathers_up_to(
        micro_batch_start(micro + 1) +
        std::min(static_cast<std::size_t>(options.prefetch_depth), forward_gathers));
  }

  bool is_next_gather(int i, int s) const {
    return next_gather < step_gathers() && gather_event(next_gather).op == i &&
           gather_event(next_gather).slice == s;
  }

  // Waits for slice s of operator i to be gathered (issuing the gather if the window has not).
  void consume_gather(int i, int s) {
    Slice& slice = ops[i].slices[s];
    if (!slice.gathers()) return;
    if (slice.present && !(next_gather < issued_gather && is_next_gather(i, s))) {
      return;  // kept from an earlier phase (z2, fused recompute)
    }
    TORCH_CHECK(is_next_gather(i, s), "gather order broken at operator ", i, " slice ", s);
    if (next_gather == issued_gather) {
      issue_gather(slice);
      schedule.push_back({ScheduleEntry::Action::gather, i, s});
      ++issued_gather;
    }
    ++next_gather;
    wait(slice.gathered);
  }

  // Before slice s of operator i computes in `phase`.
  void acquire(int i, int s, Phase phase) {
    consume_gather(i, s);
    if (phase == Phase::forward) {
      admit_forward_prefetch();
    } else if (options.backward_prefetch == BackwardPrefetch::pre &&
               !keeps_gather_for_backward(ops[i].slices[s], ops[i].choice, phase)) {
      admit_backward_prefetch();
    }
    if (phase == Phase::backward && i == 0 && s == 0) admit_next_micro_batch_prefetch();
    issue_admitted_gathers();
  }

  // After slice s of operator i computed in `phase`, before its gradient reduction.
  void release(int i, int s, Phase phase) {
    Slice& slice = ops[i].slices[s];
    schedule.push_back({ScheduleEntry::Action::computed, i, s});
    if (frees_after(slice, ops[i].choice, phase)) {
      free_storage(slice.full);
      slice.present = false;
    }
    if (phase != Phase::forward && options.backward_prefetch == BackwardPrefetch::post &&
        !keeps_gather_for_backward(slice, ops[i].choice, phase)) {
      admit_backward_prefetch();
    }
    issue_admitted_gathers();
  }

  // The parameters of each of the slice's members, by role: one split of the flat buffer, so
  // that backward assembles the buffer's gradient in one concatenation (as FSDP's flat
  // parameter does), not one buffer-sized add per piece as separate narrows would.
  std::vector<std::map<std::string, at::Tensor>> member_views(const Slice& slice,
                                                              int members) const {
    std::vector<int64_t> sizes;
    for (const Piece& piece : slice.pieces) sizes.push_back(piece.numel());
    const int64_t used = slice.pieces.empty() ? 0 : slice.pieces.back().offset + sizes.back();
    if (used < slice.numel) sizes.push_back(slice.numel - used);  // padding
    const std::vector<at::Tensor> parts = at::split_with_sizes(slice.full, sizes);
    std::vector<std::map<std::string, at::Tensor>> result(members);
    for (std::size_t p = 0; p < slice.pieces.size(); ++p) {
      const Piece& piece = slice.pieces[p];
      result[piece.member].emplace(piece.role, parts[p].view(piece.shape));
    }
    return result;
  }

  // ---- operator math -------------------------------------------------------------------------

  at::Tensor prologue(OperatorKind kind, const at::Tensor& x,
                      const std::map<std::string, at::Tensor>& p) const {
    if (kind == OperatorKind::embedding) return {};
    return at::layer_norm(x, {shape.hidden}, p.at("ln.weight"), p.at("ln.bias"), 1e-5);
  }

  // Slice s of k of an operator of `kind`.
  at::Tensor branch(OperatorKind kind, int s, int k, const at::Tensor& u, const at::Tensor& x,
                    const std::map<std::string, at::Tensor>& p) const {
    switch (kind) {
      case OperatorKind::embedding:
        return at::embedding(p.at("token"), x) + p.at("position").unsqueeze(0);
      case OperatorKind::attention: {
        const int64_t b = u.size(0);
        const int64_t t = shape.sequence_length;
        const int64_t heads = shape.heads / k;
        const int64_t d = shape.hidden / shape.heads;
        auto project = [&](const char* name) {
          return at::linear(u, p.at(std::string(name) + ".weight"),
                            p.at(std::string(name) + ".bias"))
              .view({b, t, heads, d})
              .transpose(1, 2);
        };
        // In this order (as the reference computes them): the order in which backward sums
        // their gradients into u is then the same, bit for bit.
        const at::Tensor q = project("q");
        const at::Tensor k_heads = project("k");
        const at::Tensor v = project("v");
        const at::Tensor y = causal_attention(q, k_heads, v, shape.attention);
        return at::linear(y, p.at("proj.weight"));
      }
      case OperatorKind::mlp:
        return at::linear(at::gelu(at::linear(u, p.at("fc.weight"), p.at("fc.bias")), "tanh"),
                          p.at("proj.weight"));
      case OperatorKind::head: {
        const int64_t c = shape.hidden / k;
        return at::linear(u.narrow(-1, s * c, c), p.at("weight"));
      }
      case OperatorKind::generic:
        break;
    }
    return {};
  }

  at::Tensor epilogue(OperatorKind kind, const at::Tensor& x,
                      const std::map<std::string, at::Tensor>& p) const {
    if (kind == OperatorKind::attention || kind == OperatorKind::mlp) {
      return x + p.at("proj.bias");
    }
    return {};
  }

  // Runs operator i's forward (phase forward or recompute) from op.input; with grad, keeps what
  // backward needs. Returns the output (detached).
  at::Tensor run_forward(int i, Phase phase, bool with_grad, const at::Tensor& targets) {
    OperatorRuntime& op = ops[i];
    const int k = op.choice.slices;
    torch::autograd::AutoGradMode grad_mode(with_grad);
    const at::Tensor& x = op.input;
    acquire(i, 0, phase);
    at::Tensor y0;
    at::Tensor u;
    at::Tensor u_leaf;
    {
      // A unit's members in turn (an operator split into slices is a unit of one).
      at::Tensor h = x;
      const int members = static_cast<int>(op.members.size());
      const auto views = member_views(op.slices[0], members);
      for (int m = 0; m < members; ++m) {
        const OperatorKind kind = op.members[m].kind;
        const auto& p = views[m];
        u = prologue(kind, h, p);
        u_leaf = (k > 1 && with_grad) ? u.detach().requires_grad_() : u;
        at::Tensor y = branch(kind, 0, k, u, h, p);
        if (at::Tensor e = epilogue(kind, h, p); e.defined()) y = y + e;
        h = y;
      }
      y0 = h;
    }
    release(i, 0, phase);
    at::Tensor output = y0.detach();
    std::vector<at::Tensor> partials;
    for (int s = 1; s < k; ++s) {
      acquire(i, s, phase);
      at::Tensor partial =
          branch(op.first_kind(), s, k, u_leaf, x, member_views(op.slices[s], 1)[0]);
      release(i, s, phase);
      // Partial sums are added into one output; autograd keeps each partial only as the root of
      // its slice's backward, which reads its shape, not its data (a slice ends in a Linear,
      // whose backward saves inputs only), so the partial's memory is freed here.
      if (s == 1) {
        output = output + partial.detach();
      } else {
        output.add_(partial.detach());
      }
      if (with_grad) {
        at::Tensor root = partial;
        free_storage(root);
        partials.push_back(std::move(partial));
      }
    }
    if (with_grad && k > 1) {
      at::Tensor root = y0;
      free_storage(root);  // its sum is in `output`; an Add's backward saves nothing
    }
    if (with_grad) {
      op.y0 = y0;
      op.u = k > 1 ? u : at::Tensor();
      op.u_leaf = k > 1 ? u_leaf : at::Tensor();
      op.partials = std::move(partials);
    }
    if (op.last_kind() == OperatorKind::head) {
      op.logits_leaf = with_grad ? output.detach().requires_grad_() : output;
      op.loss = at::cross_entropy_loss(op.logits_leaf.reshape({-1, shape.vocabulary}),
                                       targets.reshape({-1}));
    }
    return output;
  }

  // Backward of operator i given the gradient of its output; returns the input's gradient.
  at::Tensor run_backward(int i, at::Tensor grad_output, const at::Tensor& targets) {
    OperatorRuntime& op = ops[i];
    const int k = op.choice.slices;
    if (is_checkpointed(op.choice)) run_forward(i, Phase::recompute, true, targets);
    if (op.last_kind() == OperatorKind::head) {
      // m micro-batches of b are one batch of m x b: each micro-batch's mean loss counts 1/m.
      const at::Tensor loss = micro_batches > 1 ? op.loss / micro_batches : op.loss;
      grad_output = torch::autograd::grad({loss}, {op.logits_leaf})[0];
      op.loss = op.loss.detach();
      op.logits_leaf = at::Tensor();
    }
    at::Tensor grad_u;
    for (int s = k - 1; s >= 1; --s) {
      acquire(i, s, Phase::backward);
      auto grads = torch::autograd::grad({op.partials[s - 1]}, {op.u_leaf, op.slices[s].full},
                                         {grad_output}, false, false, true);
      op.partials[s - 1] = at::Tensor();
      release(i, s, Phase::backward);
      grad_u = grad_u.defined() ? grad_u + grads[0] : grads[0];
      reduce_gradient(i, s, grads[1]);
    }
    acquire(i, 0, Phase::backward);
    torch::autograd::variable_list outputs{op.y0};
    torch::autograd::variable_list grad_outputs{grad_output};
    if (k > 1) {
      outputs.push_back(op.u);
      grad_outputs.push_back(grad_u);
    }
    torch::autograd::variable_list inputs{op.slices[0].full};
    const bool input_grad = op.first_kind() != OperatorKind::embedding;
    if (input_grad) inputs.push_back(op.input);
    auto grads = torch::autograd::grad(outputs, inputs, grad_outputs, false, false, true);
    op.y0 = op.u = op.u_leaf = op.input = at::Tensor();
    op.partials.clear();
    release(i, 0, Phase::backward);
    reduce_gradient(i, 0, grads[0]);
    if (op.dp_grad.defined() && !dp_bucket.defined() &&
        (dp_reduces_every_micro_batch || last_micro_batch())) {
      op.dp_grad.div_(world);
      op.dp_reduced = comm.start(CollectiveKind::all_reduce, op.dp_grad);
      schedule.push_back({ScheduleEntry::Action::reduce, i, -1});
    }
    return input_grad ? grads[1] : at::Tensor();
  }

  bool last_micro_batch() const { return micro + 1 == micro_batches; }

  // Adds (after the first micro-batch: copies) a micro-batch's gradient into what accumulates it.
  void accumulate(at::Tensor destination, const at::Tensor& gradient) const {
    if (micro == 0) {
      destination.copy_(gradient);
    } else {
      destination.add_(gradient);
    }
  }

  void reduce_gradient(int op_index, int s, at::Tensor grad) {
    OperatorRuntime& op = ops[op_index];
    Slice& slice = op.slices[s];
    if (!grad.defined()) grad = at::zeros({slice.numel}, float_options);
    if (!slice.sharded) {
      if (micro == 0 && op.dp_reduced.valid()) wait(op.dp_reduced);  // previous step's
      accumulate(op.dp_grad.narrow(0, slice.dp_offset, slice.numel), grad);
      return;  // the operator's bucket is all-reduced after its backward (run_backward)
    }
    if (slice.full_grad.defined()) {
      // ZeRO-1 keeps the whole gradient; it is reduce-scattered in place.
      if (micro == 0 && slice.reduced.valid()) wait(slice.reduced);
      accumulate(slice.full_grad, grad);
      grad = slice.full_grad;
    }
    if (!slice.reduces_every_micro_batch && !last_micro_batch()) return;
    grad.div_(world);
    schedule.push_back({ScheduleEntry::Action::reduce, op_index, s});
    at::Tensor chunk = grad.narrow(0, slice.shard_index * slice.shard_numel(), slice.shard_numel());
    at::Tensor destination = slice.shard_grad;
    // The reduced chunk goes into the shard the rank keeps, added to the earlier micro-batches'
    // (the callbacks run in issue order, so one micro-batch's add follows the previous one's).
    std::function<void()> keep = [chunk, destination, first = micro == 0]() mutable {
      if (first) {
        destination.copy_(chunk);
      } else {
        destination.add_(chunk);
      }
    };
    if (slice.full_grad.defined() && slice.gradients_on_host) {
      // ZeRO-Offload on Z1: the reduced chunk of the whole gradient is copied to the host.
      std::function<void()> copy_out = [chunk, destination]() mutable { destination.copy_(chunk); };
      slice.reduced =
          comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group, std::move(copy_out));
    } else if (slice.full_grad.defined()) {
      slice.reduced = comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group);
    } else if (slice.replica_group.empty()) {
      slice.reduced =
          comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group, std::move(keep));
    } else {
      comm.start(CollectiveKind::reduce_scatter, grad, slice.shard_group);
      slice.reduced =
          comm.start(CollectiveKind::all_reduce, chunk, slice.replica_group, std::move(keep));
    }
  }

  // The update of a slice's parameters this rank owns; an offloaded slice's runs on the host,
  // on a host copy of its shard when the parameters stay on the device (ZeRO-Offload), which
  // is copied back after the step.
  void update(Slice& slice, const at::Tensor& grad) {
    if (!slice.offloaded) {
      adam(slice, slice.local_parameters(), grad);
      return;
    }
    HostArenaScope arena;
    if (slice.parameters_on_host) {
      adam(slice, slice.shard, grad);
      return;
    }
    at::Tensor master = on_host(slice.shard);
    adam(slice, master, grad.device().is_cpu() ? grad : on_host(grad));
    slice.shard.copy_(master);
  }

  void adam(Slice& slice, at::Tensor parameters, const at::Tensor& grad) {
    const AdamSettings& a = options.adam;
    if (a.kind == AdamSettings::Kind::sgd) {
      // torch::optim::SGD: the first step copies the gradient into the momentum buffer.
      if (adam_step == 1) {
        slice.exp_avg.copy_(grad);
      } else {
        slice.exp_avg.mul_(a.beta1).add_(grad);
      }
      parameters.add_(slice.exp_avg, -a.learning_rate);
      return;
    }
    const double correction1 = 1.0 - std::pow(a.beta1, adam_step);
    const double correction2 = 1.0 - std::pow(a.beta2, adam_step);
    slice.exp_avg.mul_(a.beta1).add_(grad, 1.0 - a.beta1);
    slice.exp_avg_sq.mul_(a.beta2).addcmul_(grad, grad, 1.0 - a.beta2);
    const at::Tensor denominator =
        (slice.exp_avg_sq.sqrt() / std::sqrt(correction2)).add_(a.epsilon);
    parameters.addcdiv_(slice.exp_avg, denominator, -a.learning_rate / correction1);
  }

  // Clocks are read with the device synchronised, so that a phase's time is its work's.
  Clock::time_point synchronized_now() const {
    device.synchronize();
    return Clock::now();
  }

  StepMetrics train_step(const TokenBatch& host_batch) {
    const int64_t rows = host_batch.inputs.size(0);
    if (rows % micro_batches != 0) {
      throw InputError("batch", "rows", std::to_string(rows),
                       fmt::format("a multiple of the {} micro-batches per step", micro_batches));
    }
    const int64_t micro_rows = rows / micro_batches;
    const TokenBatch batch{host_batch.inputs.to(device.device()),
                           host_batch.targets.to(device.device())};
    const auto start = synchronized_now();
    device.reset_peak_memory();
    exposed_s = 0;
    next_gather = issued_gather = issue_limit = 0;
    micro = 0;
    schedule.clear();
    admit_forward_prefetch();
    issue_admitted_gathers();
    const int n = static_cast<int>(ops.size());
    StepMetrics metrics;
    metrics.start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
    metrics.operators.resize(static_cast<std::size_t>(n) * micro_batches);
    // The step's high-water mark is the highest of its phases' (each phase restarts the mark
    // at the bytes live then, so nothing allocated in the step escapes).
    std::int64_t step_peak_bytes = device.memory_counts().peak_bytes;
    // Compute time of a phase: its wall time less the waits for collectives inside it.
    auto timed = [&](double& start_s, double& duration_s, std::int64_t& end_live_bytes,
                     std::int64_t& peak_bytes, auto&& body) {
      step_peak_bytes = std::max(step_peak_bytes, device.memory_counts().peak_bytes);
      device.reset_peak_memory();
      const auto begin = synchronized_now();
      const double exposed_before = exposed_s;
      start_s = std::chrono::duration<double>(begin - start).count();
      body();
      duration_s = std::chrono::duration<double>(synchronized_now() - begin).count() -
                   (exposed_s - exposed_before);
      const MemoryCounts counts = device.memory_counts();
      end_live_bytes = counts.live_bytes;
      peak_bytes = counts.peak_bytes;
    };
    // Each micro-batch: the whole forward and backward on its rows, its activations freed
    // before the next one starts.
    double loss_sum = 0;
    for (micro = 0; micro < micro_batches; ++micro) {
      const TokenBatch rows_of_micro =
          micro_batches == 1 ? batch : batch.rows(micro * micro_rows, micro_rows);
      StepMetrics::OperatorTiming* timing = metrics.operators.data() + micro * n;
      at::Tensor x = rows_of_micro.inputs;
      for (int i = 0; i < n; ++i) {
        OperatorRuntime& op = ops[i];
        const bool checkpointed = is_checkpointed(op.choice);
        op.input = i == 0 ? x : x.detach().requires_grad_(!checkpointed);
        timed(timing[i].forward_start_s, timing[i].forward_s, timing[i].forward_end_live_bytes,
              timing[i].forward_peak_bytes,
              [&] { x = run_forward(i, Phase::forward, !checkpointed, rows_of_micro.targets); });
      }
      loss_sum += ops.back().loss.item<double>();
      at::Tensor grad;
      for (int i = n - 1; i >= 0; --i) {
        if (is_checkpointed(ops[i].choice) && i > 0) ops[i].input.requires_grad_(true);
        timed(timing[i].backward_start_s, timing[i].backward_s, timing[i].backward_end_live_bytes,
              timing[i].backward_peak_bytes,
              [&] { grad = run_backward(i, grad, rows_of_micro.targets); });
      }
      all_reduce_dp_bucket();
    }
    micro = micro_batches - 1;
    metrics.loss = loss_sum / micro_batches;
    const auto optimizer_start = synchronized_now();
    const double exposed_before_step = exposed_s;
    TORCH_CHECK(next_gather == step_gathers(), "not every planned gather was consumed");
    {
      torch::autograd::AutoGradMode no_grad(false);
      ++adam_step;
      for (OperatorRuntime& op : ops) {
        if (op.dp_grad.defined()) wait(op.dp_reduced);
        for (Slice& slice : op.slices) {
          if (slice.sharded) {
            wait(slice.reduced);
            update(slice, slice.shard_grad);
          } else {
            update(slice, op.dp_grad.narrow(0, slice.dp_offset, slice.numel));
          }
        }
      }
      // ZeRO-1: every rank updated its chunk of the whole parameters; share them.
      std::vector<CommHandle> shared;
      for (OperatorRuntime& op : ops) {
        for (Slice& slice : op.slices) {
          if (!slice.sharded || slice.gathers()) continue;
          schedule.push_back({ScheduleEntry::Action::gather, static_cast<int>(&op - ops.data()),
                              static_cast<int>(&slice - op.slices.data())});
          shared.push_back(
              comm.start(CollectiveKind::all_gather, slice.full.detach(), slice.shard_group));
        }
      }
      for (const CommHandle& handle : shared) wait(handle);
    }
    const auto end = synchronized_now();
    metrics.optimizer_step_s = std::chrono::duration<double>(end - optimizer_start).count() -
                               (exposed_s - exposed_before_step);
    metrics.iteration_time_s = std::chrono::duration<double>(end - start).count();
    metrics.exposed_communication_s = exposed_s;
    metrics.peak_memory_bytes = std::max(step_peak_bytes, device.memory_counts().peak_bytes);
    metrics.schedule = std::move(schedule);
    schedule.clear();
    return metrics;
  }

  NamedTensors full_parameters() {
    NamedTensors result = initial_gpt_parameters(shape, 0);
    for (auto& [name, tensor] : result) tensor.zero_();
    torch::autograd::AutoGradMode no_grad(false);
    for (OperatorRuntime& op : ops) {
      for (Slice& slice : op.slices) {
        at::Tensor flat;
        if (slice.gathers()) {
          flat = at::zeros({slice.numel}, float_options);
          flat.narrow(0, slice.shard_index * slice.shard_numel(), slice.shard_numel())
              .copy_(slice.shard);
          comm.run(CollectiveKind::all_gather, flat, slice.shard_group);
        } else {
          flat = slice.full.detach();
        }
        for (const Piece& piece : slice.pieces) {
          for (auto& [name, tensor] : result) {
            if (name != piece.tensor) continue;
            tensor.narrow(piece.dim, piece.start, piece.length)
                .copy_(flat.narrow(0, piece.offset, piece.numel()).view(piece.shape));
          }
        }
      }
    }
    return result;
  }

  // The gradients counted here are also what accumulation adds micro-batches into (the whole
  // gradient of dp and z1, the kept shard of the others): it needs no buffer of its own.
  // Device memory by default; with `host`, the host memory of offloaded states.
  std::int64_t persistent_bytes(bool host = false) const {
    std::int64_t bytes = 0;
    auto count = [&](const at::Tensor& tensor, bool on_host) {
      if (tensor.defined() && on_host == host) bytes += tensor.numel() * 4;
    };
    for (const OperatorRuntime& op : ops) {
      count(op.dp_grad, false);
      for (const Slice& slice : op.slices) {
        if (!slice.sharded) {
          count(slice.full, false);  // DP: its gradient is in the operator's dp_grad
        } else if (slice.gathers()) {
          count(slice.shard, slice.parameters_on_host);
          count(slice.shard_grad, slice.gradients_on_host);
        } else {
          count(slice.full, false);  // z1: whole parameters and gradient
          count(slice.full_grad, false);
          if (slice.gradients_on_host) count(slice.shard_grad, true);
        }
        count(slice.exp_avg, slice.offloaded);
        count(slice.exp_avg_sq, slice.offloaded);
      }
    }
    return bytes;
  }
};

ShardedGpt::ShardedGpt(const GptShape& shape, const Plan& plan, Communicator& communicator,
                       const NamedTensors& initial, RuntimeOptions options)
    : impl_(std::make_unique<Impl>(shape, plan, communicator, initial, options, nullptr)) {}

ShardedGpt::ShardedGpt(const GptShape& shape, const Plan& plan, Communicator& communicator,
                       const NamedTensors& initial, RuntimeOptions options, RankDevice& device)
    : impl_(std::make_unique<Impl>(shape, plan, communicator, initial, options, &device)) {}

ShardedGpt::~ShardedGpt() = default;

StepMetrics ShardedGpt::train_step(const TokenBatch& local_batch) {
  return impl_->train_step(local_batch);
}

NamedTensors ShardedGpt::full_parameters() { return impl_->full_parameters(); }

std::int64_t ShardedGpt::persistent_bytes() const { return impl_->persistent_bytes(); }

}  // namespace osdp::validate
