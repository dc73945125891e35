// The parallel layout (model/parallel_layout): every group kind partitions the ranks into groups
// of its degree, a rank's coordinates round-trip, and the groups are Megatron's for its order
// string (tensor-parallel ranks adjacent, pipeline stages farthest apart).
#include <catch2/catch.hpp>
#include <set>
#include <stdexcept>

#include "model/parallel_layout.hpp"

namespace osdp {
namespace {

std::vector<std::vector<int>> ranks_of(const std::vector<RankGroup>& groups) {
  std::vector<std::vector<int>> result;
  for (const RankGroup& group : groups) result.push_back(group.ranks);
  return result;
}

TEST_CASE("Megatron's example: 16 GPUs, tensor 2, pipeline 4 give its groups", "[layout]") {
  // Megatron's parallel_state docstring: 16 GPUs, tp 2, pp 4 -> dp 2.
  const ParallelLayout layout({2, 4, 2, 0}, "tp-dp-pp");
  CHECK(layout.world() == 16);
  CHECK(ranks_of(layout.groups(GroupAxis::tensor)) ==
        std::vector<std::vector<int>>{
            {0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(ranks_of(layout.groups(GroupAxis::data)) ==
        std::vector<std::vector<int>>{
            {0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(
      ranks_of(layout.groups(GroupAxis::pipeline)) ==
      std::vector<std::vector<int>>{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(layout.stage_ranks(1) == std::vector<int>{4, 5, 6, 7});
  CHECK(layout.group_of(GroupAxis::pipeline, 9).stride() == 4);
}

TEST_CASE("every group kind partitions the ranks, in any order of the axes", "[layout]") {
  const std::vector<std::string> orders = {"tp-dp-pp",
                                           "dp-tp-pp",
                                           "pp-tp-dp",
                                           "tp-pp-dp",
                                           "tp-shard-replicate-pp",
                                           "replicate-tp-shard-pp"};
  for (const std::string& order : orders) {
    const ParallelLayout layout({2, 3, 4, 2}, order);
    for (GroupAxis kind : {GroupAxis::tensor, GroupAxis::data, GroupAxis::data_shard,
                           GroupAxis::data_replicate, GroupAxis::pipeline}) {
      const int expected = kind == GroupAxis::tensor       ? 2
                           : kind == GroupAxis::pipeline   ? 3
                           : kind == GroupAxis::data       ? 4
                           : kind == GroupAxis::data_shard ? 2
                                                           : 2;
      std::multiset<int> seen;
      for (const RankGroup& group : layout.groups(kind)) {
        CHECK(group.size() == expected);
        for (int rank : group.ranks) {
          seen.insert(rank);
          CHECK(layout.group_of(kind, rank).ranks == group.ranks);
        }
      }
      CHECK(static_cast<int>(seen.size()) == layout.world());
      CHECK(std::set<int>(seen.begin(), seen.end()).size() == seen.size());
    }
    for (int rank = 0; rank < layout.world(); ++rank) {
      CHECK(layout.rank_of(layout.coordinates_of(rank)) == rank);
    }
    // The groups with a rank in a range: those of all the groups, in the same order.
    for (GroupAxis kind : {GroupAxis::tensor, GroupAxis::data, GroupAxis::pipeline}) {
      for (const auto& [first, end] : {std::pair{0, 4}, std::pair{5, 11}, std::pair{20, 30}}) {
        std::vector<RankGroup> expected;
        for (const RankGroup& group : layout.groups(kind)) {
          if (std::any_of(group.ranks.begin(), group.ranks.end(),
                          [&](int rank) { return rank >= first && rank < end; })) {
            expected.push_back(group);
          }
        }
        const std::vector<RankGroup> found = layout.groups(kind, first, end);
        REQUIRE(found.size() == expected.size());
        for (std::size_t g = 0; g < found.size(); ++g) CHECK(found[g].ranks == expected[g].ranks);
      }
    }
    // A stage's ranks: exactly those whose pipeline coordinate it is, ascending.
    for (int stage = 0; stage < 3; ++stage) {
      std::vector<int> expected;
      for (int rank = 0; rank < layout.world(); ++rank) {
        if (layout.coordinates_of(rank).pipeline == stage) expected.push_back(rank);
      }
      CHECK(layout.stage_ranks(stage) == expected);
    }
  }
}

TEST_CASE("members of a group differ only along its axes", "[layout]") {
  const ParallelLayout layout({4, 2, 8, 4}, "tp-dp-pp");
  for (const RankGroup& group : layout.groups(GroupAxis::data_replicate)) {
    const RankCoordinates first = layout.coordinates_of(group.ranks.front());
    for (int rank : group.ranks) {
      const RankCoordinates c = layout.coordinates_of(rank);
      CHECK(c.tensor == first.tensor);
      CHECK(c.pipeline == first.pipeline);
      CHECK(c.data_shard == first.data_shard);
    }
  }
}

TEST_CASE("placement on nodes: tensor groups inside a server, pipeline groups across", "[layout]") {
  // 64 GPUs of 8 a server, tp 8, dp 4, pp 2 (a vTrain multi-node row).
  const ParallelLayout layout({8, 2, 4, 0});
  for (const RankGroup& group : layout.groups(GroupAxis::tensor)) {
    CHECK(group.nodes_spanned(8) == 1);
  }
  for (const RankGroup& group : layout.groups(GroupAxis::data)) {
    CHECK(group.nodes_spanned(8) == 4);
    CHECK(group.most_ranks_on_one_node(8) == 1);
    CHECK(group.stride() == 8);
  }
  for (const RankGroup& group : layout.groups(GroupAxis::pipeline)) {
    CHECK(group.stride() == 32);
  }
}

TEST_CASE("bad degrees and orders are refused with a reason", "[layout]") {
  CHECK_THROWS_AS(ParallelLayout({0, 1, 1, 0}), std::invalid_argument);
  CHECK_THROWS_AS(ParallelLayout({1, 1, 6, 4}), std::invalid_argument);  // shard 4 of 6
  CHECK_THROWS_AS(ParallelLayout({2, 2, 2, 0}, "tp-dp"), std::invalid_argument);
  CHECK_THROWS_AS(ParallelLayout({2, 2, 2, 0}, "tp-dp-pp-tp"), std::invalid_argument);
  CHECK_THROWS_AS(ParallelLayout({2, 2, 2, 0}, "tp-xp-pp"), std::invalid_argument);
  CHECK_THROWS_AS(ParallelLayout({2, 2, 2, 0}).coordinates_of(8), std::out_of_range);
}

}  // namespace
}  // namespace osdp
