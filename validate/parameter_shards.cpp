#include "validate/parameter_shards.hpp"

#include <torch/csrc/autograd/grad_mode.h>

#include <optional>

#include "validate/tensor_storage.hpp"

namespace osdp::validate {
namespace {

UnitMember member_of(const GptShape& shape, int i) {
  if (i == 0) return {OperatorKind::embedding, "embedding."};
  if (i == shape.operators() - 1) return {OperatorKind::head, "head."};
  return {(i - 1) % 2 == 0 ? OperatorKind::attention : OperatorKind::mlp,
          operator_name(shape, i) + "."};
}

// Member m's pieces per slice, for k slices: the partition operator_slice computes with.
std::vector<std::vector<ParameterPiece>> slice_pieces(const GptShape& shape,
                                                      const UnitMember& member, int m, int k) {
  const int64_t h = shape.hidden;
  const int64_t v = shape.vocabulary;
  std::vector<std::vector<ParameterPiece>> slices(k);
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

// Places the pieces one after another in the flat buffer, padded to a multiple of the world
// size (the ring collectives' chunks).
void lay_out_pieces(OperatorSlice& slice, int world) {
  int64_t offset = 0;
  for (ParameterPiece& piece : slice.pieces) {
    piece.offset = offset;
    offset += piece.numel();
  }
  slice.numel = (offset + world - 1) / world * world;
}

// The slice's flat parameters, copied from the canonical tensors.
at::Tensor flat_parameters(const OperatorSlice& slice, const NamedTensors& initial,
                           const at::TensorOptions& float_options) {
  at::Tensor flat = at::zeros({slice.numel}, float_options);
  for (const ParameterPiece& piece : slice.pieces) {
    flat.narrow(0, piece.offset, piece.numel())
        .copy_(find_tensor(initial, piece.tensor)
                   .narrow(piece.dim, piece.start, piece.length)
                   .contiguous()
                   .view({-1}));
  }
  return flat;
}

// The ranks sharing a sharded slice: every rank, or (hsdp) this rank's node, each shard then
// replicated across the nodes.
void place_shard(OperatorSlice& slice, const ShardPlacement& placement) {
  if (describe_mode(slice.mode).shard_group == GroupAxis::data_shard) {
    const int local = placement.gpus_per_node;
    const int node = placement.rank / local;
    for (int r = 0; r < local; ++r) slice.shard_group.push_back(node * local + r);
    for (int n = 0; n < placement.world / local; ++n) {
      slice.replica_group.push_back(n * local + placement.rank % local);
    }
  } else {
    for (int r = 0; r < placement.world; ++r) slice.shard_group.push_back(r);
  }
  slice.shard_index = group_index(slice.shard_group, placement.rank);
}

// A sharded slice's parameters and gradient, from its flat parameters: a shard and its
// gradient chunk (the modes that gather), or whole ones (z1); on the host where offloaded.
void hold_sharded(OperatorSlice& slice, bool offload, const at::Tensor& flat,
                  const at::TensorOptions& float_options) {
  const int64_t chunk = slice.shard_index * slice.shard_numel();
  const ModeDescription& description = describe_mode(slice.mode);
  slice.offloaded = offload && description.offload.has_value();
  slice.parameters_on_host = slice.offloaded && description.offload->parameters && slice.gathers();
  slice.gradients_on_host = slice.offloaded && description.offload->gradients;
  if (slice.gathers()) {
    slice.shard = slice.parameters_on_host ? host_copy(flat.narrow(0, chunk, slice.shard_numel()))
                                           : flat.narrow(0, chunk, slice.shard_numel()).clone();
    slice.shard_grad =
        slice.gradients_on_host ? host_zeros(slice.shard_numel()) : at::zeros_like(slice.shard);
    slice.full = at::empty({slice.numel}, float_options);
    free_storage(slice.full);
    slice.present = false;
    return;
  }
  // ZeRO-1: whole parameters and gradients; the optimizer updates this rank's chunk of the
  // parameters in place, and the chunks are all-gathered after the step.
  slice.full = flat;
  slice.present = true;
  slice.shard = flat.detach().narrow(0, chunk, slice.shard_numel());
  slice.full_grad = at::zeros({slice.numel}, float_options);
  slice.shard_grad = slice.gradients_on_host
                         ? host_zeros(slice.shard_numel())
                         : slice.full_grad.narrow(0, chunk, slice.shard_numel());
}

RuntimeUnit build_unit(const GptShape& shape, const OperatorRange& range,
                       const OperatorChoice& choice, const NamedTensors& initial,
                       const ShardPlacement& placement, const at::TensorOptions& float_options) {
  RuntimeUnit unit;
  unit.choice = choice;
  const int k = choice.slices;
  std::vector<std::vector<ParameterPiece>> pieces(k);
  for (int m = 0; m < range.count; ++m) {
    unit.members.push_back(member_of(shape, range.first + m));
    std::vector<std::vector<ParameterPiece>> own = slice_pieces(shape, unit.members.back(), m, k);
    for (int s = 0; s < k; ++s) {
      pieces[s].insert(pieces[s].end(), own[s].begin(), own[s].end());
    }
  }
  unit.slices.resize(k);
  int64_t dp_numel = 0;
  for (int s = 0; s < k; ++s) {
    OperatorSlice& slice = unit.slices[s];
    slice.pieces = std::move(pieces[s]);
    lay_out_pieces(slice, placement.world);
    // The first j slices run in the mode, the others in DP.
    slice.sharded = s < choice.sharded_slices;
    slice.mode = slice.sharded ? choice.mode : Mode::dp;
    slice.reduces_every_micro_batch = mode_reduces_every_micro_batch(slice.mode);
    const at::Tensor flat = flat_parameters(slice, initial, float_options);
    if (slice.sharded) {
      place_shard(slice, placement);
      hold_sharded(slice, choice.offload, flat, float_options);
    } else {
      slice.shard_group = {placement.rank};
      slice.full = flat;
      slice.present = true;
      slice.dp_offset = dp_numel;
      dp_numel += slice.numel;
    }
    slice.full.set_requires_grad(true);
  }
  if (dp_numel > 0) unit.dp_grad = at::zeros({dp_numel}, float_options);
  return unit;
}

}  // namespace

std::vector<RuntimeUnit> build_units(const GptShape& shape, const Plan& plan,
                                     const NamedTensors& initial, const ShardPlacement& placement,
                                     const at::TensorOptions& float_options) {
  const std::vector<OperatorRange> ranges = plan_units(shape, plan);
  std::vector<RuntimeUnit> units;
  units.reserve(ranges.size());
  for (std::size_t u = 0; u < ranges.size(); ++u) {
    units.push_back(
        build_unit(shape, ranges[u], plan.choices[u], initial, placement, float_options));
  }
  return units;
}

std::vector<RoleParameters> member_parameters(const OperatorSlice& slice, int members) {
  std::vector<int64_t> sizes;
  for (const ParameterPiece& piece : slice.pieces) sizes.push_back(piece.numel());
  const int64_t used = slice.pieces.empty() ? 0 : slice.pieces.back().offset + sizes.back();
  if (used < slice.numel) sizes.push_back(slice.numel - used);  // padding
  const std::vector<at::Tensor> parts = at::split_with_sizes(slice.full, sizes);
  std::vector<RoleParameters> result(members);
  for (std::size_t p = 0; p < slice.pieces.size(); ++p) {
    const ParameterPiece& piece = slice.pieces[p];
    result[piece.member].emplace(piece.role, parts[p].view(piece.shape));
  }
  return result;
}

NamedTensors gather_full_parameters(const GptShape& shape, std::vector<RuntimeUnit>& units,
                                    Communicator& communicator,
                                    const at::TensorOptions& float_options) {
  NamedTensors result = initial_gpt_parameters(shape, 0);
  for (auto& [name, tensor] : result) tensor.zero_();
  torch::autograd::AutoGradMode no_grad(false);
  for (RuntimeUnit& unit : units) {
    for (OperatorSlice& slice : unit.slices) {
      at::Tensor flat;
      if (slice.gathers()) {
        flat = at::zeros({slice.numel}, float_options);
        flat.narrow(0, slice.shard_index * slice.shard_numel(), slice.shard_numel())
            .copy_(slice.shard);
        communicator.run(CollectiveKind::all_gather, flat, slice.shard_group);
      } else {
        flat = slice.full.detach();
      }
      for (const ParameterPiece& piece : slice.pieces) {
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

std::int64_t persistent_bytes(const std::vector<RuntimeUnit>& units, bool host) {
  std::int64_t bytes = 0;
  auto count = [&](const at::Tensor& tensor, bool on_host) {
    if (tensor.defined() && on_host == host) bytes += tensor.numel() * 4;
  };
  for (const RuntimeUnit& unit : units) {
    count(unit.dp_grad, false);
    for (const OperatorSlice& slice : unit.slices) {
      if (!slice.sharded) {
        count(slice.full, false);  // DP: its gradient is in the unit's dp_grad
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

bool mode_reduces_every_micro_batch(Mode mode) {
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

std::string RuntimeUnit::name() const {
  std::string prefix = members.front().prefix;
  if (!prefix.empty() && prefix.back() == '.') prefix.pop_back();
  return prefix;
}

std::string_view reduction_name(const OperatorSlice& slice) {
  return slice.sharded ? "reduce-scatter" : "all-reduce";
}

}  // namespace osdp::validate
