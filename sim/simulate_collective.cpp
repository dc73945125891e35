// simulate_collectives: the requested collectives start together on one simulated network.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "sim/child_process.hpp"
#include "sim/kernel.hpp"
#include "sim/ring_collective.hpp"
#include "sim/simulate.hpp"

namespace osdp::sim {
namespace {

std::vector<double> run_collectives(const Cluster& cluster, const NetworkPlan& plan,
                                    const std::vector<CollectiveRequest>& requests,
                                    const SimOptions& options) {
  Kernel kernel(plan, options.network);
  std::vector<double> times(requests.size(), 0.0);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    start_ring_collective(kernel, plan.rings[i], requests[i].kind, requests[i].bytes,
                          options.granularity, [&times, &kernel, i]() { times[i] = kernel.now(); });
  }
  kernel.run();
  (void)cluster;
  return times;
}

}  // namespace

std::vector<CollectiveResult> simulate_collectives(const Cluster& cluster,
                                                   const std::vector<CollectiveRequest>& requests,
                                                   const SimOptions& requested) {
  SimOptions options = requested;
  options.granularity = resolve_granularity(options.granularity, cluster.ranks);
  std::vector<Group> groups;
  for (const auto& request : requests) {
    Group group{GroupKind::world, request.ranks.empty() ? world_members(cluster) : request.ranks};
    std::sort(group.members.begin(), group.members.end());
    for (int rank : group.members) {
      if (rank < 0 || rank >= cluster.ranks) {
        throw InputError("", "ranks", std::to_string(rank),
                         fmt::format("ranks from 0 to {}", cluster.ranks - 1));
      }
    }
    groups.push_back(std::move(group));
  }
  const NetworkPlan plan = plan_network(cluster, groups);
  const std::string reply = run_in_child(
      [&]() { return Json(run_collectives(cluster, plan, requests, options)).dump(); });
  const std::vector<double> times = Json::parse(reply).get<std::vector<double>>();
  std::vector<CollectiveResult> results;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    CollectiveResult result;
    result.kind = requests[i].kind;
    result.ranks = static_cast<int>(groups[i].members.size());
    result.bytes = requests[i].bytes;
    result.time_s = times[i];
    result.ring_order = plan.rings[i].order;
    if (result.time_s > 0) {
      result.algorithm_bandwidth_Bps = result.bytes / result.time_s;
      result.bus_bandwidth_Bps =
          result.algorithm_bandwidth_Bps * bus_bandwidth_factor(result.kind, result.ranks);
    }
    result.alpha_beta_time_s = cluster.world.time_s(result.kind, result.bytes, result.ranks);
    const CollectiveChoice choice = cluster.world.choice(result.kind, result.bytes, result.ranks);
    result.algorithm = choice.algorithm;
    result.protocol = choice.protocol;
    results.push_back(std::move(result));
  }
  return results;
}

CollectiveResult simulate_collective(const Cluster& cluster, CollectiveKind kind, double bytes,
                                     const SimOptions& options) {
  return simulate_collectives(cluster, {{kind, bytes, {}}}, options).front();
}

Json to_json(const CollectiveResult& result) {
  return {{"collective", std::string(collective_name(result.kind))},
          {"ranks", result.ranks},
          {"bytes", result.bytes},
          {"time_s", result.time_s},
          {"algorithm_bandwidth_Bps", result.algorithm_bandwidth_Bps},
          {"bus_bandwidth_Bps", result.bus_bandwidth_Bps},
          {"alpha_beta_time_s", result.alpha_beta_time_s},
          {"algorithm", std::string(algorithm_name(result.algorithm))},
          {"protocol", std::string(protocol_name(result.protocol))},
          {"ring_order", result.ring_order}};
}

}  // namespace osdp::sim
