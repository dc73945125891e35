#include "model/parallel_layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace osdp {

std::string_view parallel_axis_name(ParallelAxis axis) {
  switch (axis) {
    case ParallelAxis::tensor:
      return "tp";
    case ParallelAxis::data_shard:
      return "shard";
    case ParallelAxis::data_replicate:
      return "replicate";
    case ParallelAxis::pipeline:
      return "pp";
  }
  return "?";
}

std::string_view group_axis_name(GroupAxis kind) {
  switch (kind) {
    case GroupAxis::tensor:
      return "tensor";
    case GroupAxis::data:
      return "data";
    case GroupAxis::data_shard:
      return "data shard";
    case GroupAxis::data_replicate:
      return "data replicate";
    case GroupAxis::pipeline:
      return "pipeline";
  }
  return "?";
}

int RankGroup::stride() const {
  if (ranks.size() < 2) return 0;
  const int step = ranks[1] - ranks[0];
  for (std::size_t i = 2; i < ranks.size(); ++i) {
    if (ranks[i] - ranks[i - 1] != step) return 0;
  }
  return step;
}

int RankGroup::nodes_spanned(int gpus_per_node) const {
  std::vector<int> nodes;
  for (int rank : ranks) nodes.push_back(rank / gpus_per_node);
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

int RankGroup::most_ranks_on_one_node(int gpus_per_node) const {
  std::map<int, int> on_node;
  int most = 0;
  for (int rank : ranks) most = std::max(most, ++on_node[rank / gpus_per_node]);
  return most;
}

namespace {

std::vector<std::string> split_order(std::string_view order) {
  std::vector<std::string> tokens;
  std::string token;
  for (char c : order) {
    if (c == '-') {
      tokens.push_back(token);
      token.clear();
    } else {
      token.push_back(c);
    }
  }
  tokens.push_back(token);
  return tokens;
}

}  // namespace

ParallelLayout::ParallelLayout(ParallelDegrees degrees, std::string_view order)
    : degrees_(degrees), order_(order) {
  if (degrees.tensor < 1 || degrees.pipeline < 1 || degrees.data < 1 || degrees.data_shard < 0) {
    throw std::invalid_argument(fmt::format(
        "parallel degrees must be at least 1 (tensor {}, pipeline {}, data {}, shard {})",
        degrees.tensor, degrees.pipeline, degrees.data, degrees.data_shard));
  }
  if (degrees.data % degrees.shard() != 0) {
    throw std::invalid_argument(
        fmt::format("the data-parallel shard ({}) must divide the data-parallel degree ({})",
                    degrees.data_shard, degrees.data));
  }
  std::vector<ParallelAxis> axes;
  for (const std::string& token : split_order(order)) {
    if (token == "tp") {
      axes.push_back(ParallelAxis::tensor);
    } else if (token == "dp") {
      axes.push_back(ParallelAxis::data_shard);
      axes.push_back(ParallelAxis::data_replicate);
    } else if (token == "shard") {
      axes.push_back(ParallelAxis::data_shard);
    } else if (token == "replicate") {
      axes.push_back(ParallelAxis::data_replicate);
    } else if (token == "pp") {
      axes.push_back(ParallelAxis::pipeline);
    } else {
      throw std::invalid_argument(fmt::format(
          "parallel order \"{}\": unknown axis \"{}\" (expected tp, dp, shard, replicate, pp)",
          order, token));
    }
  }
  std::vector<ParallelAxis> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  const std::vector<ParallelAxis> all = {ParallelAxis::tensor, ParallelAxis::data_shard,
                                         ParallelAxis::data_replicate, ParallelAxis::pipeline};
  if (sorted != all) {
    throw std::invalid_argument(fmt::format(
        "parallel order \"{}\" must name tp, dp (or shard and replicate) and pp once each", order));
  }
  int stride = 1;
  for (int i = 0; i < parallel_axes; ++i) {
    fastest_first_[i] = axes[i];
    stride_of_[static_cast<int>(axes[i])] = stride;
    stride *= degree(axes[i]);
  }
}

int ParallelLayout::degree(ParallelAxis axis) const {
  switch (axis) {
    case ParallelAxis::tensor:
      return degrees_.tensor;
    case ParallelAxis::data_shard:
      return degrees_.shard();
    case ParallelAxis::data_replicate:
      return degrees_.replicate();
    case ParallelAxis::pipeline:
      return degrees_.pipeline;
  }
  return 1;
}

RankCoordinates ParallelLayout::coordinates_of(int rank) const {
  if (rank < 0 || rank >= world()) {
    throw std::out_of_range(fmt::format("rank {} outside 0..{}", rank, world() - 1));
  }
  auto along = [&](ParallelAxis axis) {
    return rank / stride_of_[static_cast<int>(axis)] % degree(axis);
  };
  return {along(ParallelAxis::tensor), along(ParallelAxis::data_shard),
          along(ParallelAxis::data_replicate), along(ParallelAxis::pipeline)};
}

int ParallelLayout::rank_of(const RankCoordinates& c) const {
  auto term = [&](ParallelAxis axis, int coordinate) {
    if (coordinate < 0 || coordinate >= degree(axis)) {
      throw std::out_of_range(fmt::format("{} coordinate {} outside 0..{}",
                                          parallel_axis_name(axis), coordinate, degree(axis) - 1));
    }
    return coordinate * stride_of_[static_cast<int>(axis)];
  };
  return term(ParallelAxis::tensor, c.tensor) + term(ParallelAxis::data_shard, c.data_shard) +
         term(ParallelAxis::data_replicate, c.data_replicate) +
         term(ParallelAxis::pipeline, c.pipeline);
}

std::vector<ParallelAxis> ParallelLayout::axes_of(GroupAxis kind) {
  switch (kind) {
    case GroupAxis::tensor:
      return {ParallelAxis::tensor};
    case GroupAxis::data:
      return {ParallelAxis::data_shard, ParallelAxis::data_replicate};
    case GroupAxis::data_shard:
      return {ParallelAxis::data_shard};
    case GroupAxis::data_replicate:
      return {ParallelAxis::data_replicate};
    case GroupAxis::pipeline:
      return {ParallelAxis::pipeline};
  }
  return {};
}

RankGroup ParallelLayout::group_of(GroupAxis kind, int rank) const {
  const std::vector<ParallelAxis> varying = axes_of(kind);
  // The group's ranks: this rank with the varying axes' coordinates replaced by every value.
  int base = rank;
  for (ParallelAxis axis : varying) {
    const int stride = stride_of_[static_cast<int>(axis)];
    base -= (rank / stride % degree(axis)) * stride;
  }
  std::vector<int> ranks = {base};
  for (ParallelAxis axis : varying) {
    const int stride = stride_of_[static_cast<int>(axis)];
    std::vector<int> grown;
    for (int value = 0; value < degree(axis); ++value) {
      for (int r : ranks) grown.push_back(r + value * stride);
    }
    ranks = std::move(grown);
  }
  std::sort(ranks.begin(), ranks.end());
  return {kind, std::move(ranks)};
}

std::vector<RankGroup> ParallelLayout::groups(GroupAxis kind) const {
  return groups(kind, 0, world());
}

std::vector<RankGroup> ParallelLayout::groups(GroupAxis kind, int first_rank, int end_rank) const {
  first_rank = std::max(first_rank, 0);
  end_rank = std::min(end_rank, world());
  std::vector<RankGroup> result;
  std::vector<bool> placed(std::max(0, end_rank - first_rank), false);
  for (int rank = first_rank; rank < end_rank; ++rank) {
    if (placed[rank - first_rank]) continue;
    RankGroup group = group_of(kind, rank);
    for (int member : group.ranks) {
      if (member >= first_rank && member < end_rank) placed[member - first_rank] = true;
    }
    result.push_back(std::move(group));
  }
  // A group's lowest rank may lie before the range.
  std::sort(result.begin(), result.end(), [](const RankGroup& a, const RankGroup& b) {
    return a.ranks.front() < b.ranks.front();
  });
  return result;
}

std::vector<int> ParallelLayout::stage_ranks(int stage) const {
  // The ranks whose pipeline coordinate is `stage`: runs of `stride` consecutive ranks, one in
  // every block of stride x p (ascending; the layout search asks this often).
  const int p = degree(ParallelAxis::pipeline);
  if (stage < 0 || stage >= p) return {};
  const int stride = stride_of_[static_cast<int>(ParallelAxis::pipeline)];
  const int block = stride * p;
  std::vector<int> ranks;
  ranks.reserve(world() / p);
  for (int start = stage * stride; start < world(); start += block) {
    for (int rank = start; rank < start + stride; ++rank) ranks.push_back(rank);
  }
  return ranks;
}

}  // namespace osdp
