// How the ranks of a job are arranged into tensor-, data- and pipeline-parallel groups: one
// object holds every degree, and every group is derived from one ordering of the axes, as
// Megatron's parallel_state derives its process groups from one order string ("tp-dp-pp": tensor
// parallel ranks are adjacent, pipeline stages the farthest apart) and torchtitan's ParallelDims
// holds the degrees. The data-parallel axis itself is shard x replicate (HSDP: shard inside,
// replicate across); a plain data-parallel group is their product.
//
// A rank's coordinate on the axis listed first varies fastest:
//   rank = sum over axes (coordinate x product of the degrees listed before it).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace osdp {

enum class ParallelAxis { tensor, data_shard, data_replicate, pipeline };
inline constexpr int parallel_axes = 4;
std::string_view parallel_axis_name(ParallelAxis axis);

// The groups a collective or transfer runs in: one axis, or the whole data-parallel axis
// (shard x replicate together).
enum class GroupAxis { tensor, data, data_shard, data_replicate, pipeline };
std::string_view group_axis_name(GroupAxis kind);

struct ParallelDegrees {
  int tensor = 1;
  int pipeline = 1;
  int data = 1;  // shard x replicate
  // Ranks a data-parallel shard spans (HSDP); 0 means the whole data-parallel group.
  int data_shard = 0;

  int world() const { return tensor * pipeline * data; }
  int shard() const { return data_shard > 0 ? data_shard : data; }
  int replicate() const { return data / shard(); }
};

// One group of ranks (a tensor-parallel group, a stage's data-parallel group, ...), its ranks in
// ascending order.
struct RankGroup {
  GroupAxis kind = GroupAxis::data;
  std::vector<int> ranks;

  int size() const { return static_cast<int>(ranks.size()); }
  // Distance between consecutive ranks when they are evenly spaced; 0 otherwise (or one rank).
  int stride() const;
  // Nodes of `gpus_per_node` consecutive ranks the group touches, and its most ranks on one.
  int nodes_spanned(int gpus_per_node) const;
  int most_ranks_on_one_node(int gpus_per_node) const;
};

struct RankCoordinates {
  int tensor = 0;
  int data_shard = 0;
  int data_replicate = 0;
  int pipeline = 0;
  int data(const ParallelDegrees& degrees) const {
    return data_replicate * degrees.shard() + data_shard;
  }
};

class ParallelLayout {
 public:
  // `order`: the axes from fastest to slowest varying, separated by '-': "tp", "dp" (shard then
  // replicate), or "shard" and "replicate" apart, and "pp"; Megatron's default is "tp-dp-pp".
  // Throws std::invalid_argument on degrees below 1, a shard that does not divide the data
  // degree, or an order that does not name every axis once.
  explicit ParallelLayout(ParallelDegrees degrees, std::string_view order = "tp-dp-pp");

  const ParallelDegrees& degrees() const { return degrees_; }
  int world() const { return degrees_.world(); }
  const std::string& order() const { return order_; }

  RankCoordinates coordinates_of(int rank) const;
  int rank_of(const RankCoordinates& coordinates) const;

  // Every group of a kind, each rank in exactly one of them, ordered by their lowest rank.
  std::vector<RankGroup> groups(GroupAxis kind) const;
  // The groups of a kind with a rank in [first_rank, end_rank) (e.g. one node's), ordered alike.
  std::vector<RankGroup> groups(GroupAxis kind, int first_rank, int end_rank) const;
  // The group of `kind` that holds `rank`.
  RankGroup group_of(GroupAxis kind, int rank) const;
  // Ranks of pipeline stage `stage` (every tensor and data coordinate).
  std::vector<int> stage_ranks(int stage) const;

 private:
  int degree(ParallelAxis axis) const;
  // Axes a group of `kind` varies along.
  static std::vector<ParallelAxis> axes_of(GroupAxis kind);

  ParallelDegrees degrees_;
  std::string order_;
  std::array<ParallelAxis, parallel_axes> fastest_first_{};
  std::array<int, parallel_axes> stride_of_{};  // by ParallelAxis
};

}  // namespace osdp
