#include "sim/fabric.hpp"

#include <fmt/format.h>

#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <limits>
#include <stdexcept>

namespace osdp::sim {
namespace {

// Ties between equal-latency routes go to the one with fewer hops.
constexpr double hop_penalty_s = 1e-15;

struct GpuCollector : boost::default_dfs_visitor {
  std::vector<int>* order;
  void discover_vertex(FabricGraph::vertex_descriptor v, const FabricGraph& graph) const {
    if (graph[v].kind == VertexKind::gpu) order->push_back(graph[v].index);
  }
};

// Dijkstra's search stops once the target's distance is final (Boost's way to stop a search
// is to throw from its visitor): a route inside one node then never walks the other nodes of a
// 1,000-node fabric, whose every ring edge asks for a route.
struct TargetReached {};
struct StopAtTarget : boost::default_dijkstra_visitor {
  FabricGraph::vertex_descriptor target;
  void examine_vertex(FabricGraph::vertex_descriptor v, const FabricGraph&) const {
    if (v == target) throw TargetReached{};
  }
};

}  // namespace

int Fabric::add_vertex(VertexKind kind, int node, int index) {
  return static_cast<int>(boost::add_vertex(FabricVertex{kind, node, index}, graph_));
}

void Fabric::add_link(std::string name, int from, int to, Link link, bool ideal) {
  const int id = static_cast<int>(links_.size());
  links_.push_back({std::move(name), from, to, link, ideal});
  boost::add_edge(from, to, FabricEdge{id}, graph_);
}

Fabric::Fabric(const Topology& topology) : topology_(topology) {
  const NodeTopology& node = topology.node;
  const int gpus = node.gpus;
  const bool multi_node = topology.nodes > 1;
  gpu_vertex_.assign(topology.ranks(), -1);
  nic_vertex_.assign(topology.nodes, {});
  cpu_vertex_.assign(topology.nodes, {});
  // The switches between nodes first, so that the depth-first ring starts at the first of them
  // and visits nodes in order: one network switch, or leaves (then spines).
  const std::optional<LeafSpine>& leaf_spine = topology.leaf_spine;
  std::vector<int> node_switches;  // [leaf], or the one network switch
  std::vector<int> spines;
  if (multi_node && leaf_spine) {
    for (int leaf = 0; leaf < leaf_spine->leaves(topology.nodes); ++leaf) {
      node_switches.push_back(add_vertex(VertexKind::leaf_switch, -1, leaf));
    }
    for (int spine = 0; spine < leaf_spine->spines; ++spine) {
      spines.push_back(add_vertex(VertexKind::spine_switch, -1, spine));
    }
  } else if (multi_node) {
    node_switches.push_back(add_vertex(VertexKind::network_switch, -1, 0));
  }
  int node_root = -1;  // where a single node's ring search starts: its top-most vertex
  for (int n = 0; n < topology.nodes; ++n) {
    const int first = n * gpus;
    for (int g = 0; g < gpus; ++g)
      gpu_vertex_[first + g] = add_vertex(VertexKind::gpu, n, first + g);
    std::vector<int> nic_attach;  // where each NIC plugs into the node
    switch (node.kind) {
      case NodeKind::nvswitch: {
        const int hub = add_vertex(VertexKind::nvswitch, n, 0);
        if (node_root < 0) node_root = hub;
        for (int g = 0; g < gpus; ++g) {
          add_link(fmt::format("n{}.gpu{}-nvswitch", n, g), gpu_vertex_[first + g], hub,
                   node.gpu_link);
        }
        nic_attach.assign(topology.nics_per_node, hub);
        break;
      }
      case NodeKind::nvlink_mesh: {
        for (int a = 0; a < gpus; ++a) {
          for (int b = a + 1; b < gpus; ++b) {
            add_link(fmt::format("n{}.gpu{}-gpu{}", n, a, b), gpu_vertex_[first + a],
                     gpu_vertex_[first + b], node.gpu_link);
          }
        }
        if (multi_node) {
          // GPUs reach the NICs through a host bridge, one GPU-link hop away.
          const int bridge = add_vertex(VertexKind::bridge, n, 0);
          for (int g = 0; g < gpus; ++g) {
            add_link(fmt::format("n{}.gpu{}-bridge", n, g), gpu_vertex_[first + g], bridge,
                     node.gpu_link);
          }
          nic_attach.assign(topology.nics_per_node, bridge);
        }
        break;
      }
      case NodeKind::pcie: {
        const PcieTree& tree = node.pcie;
        std::vector<int>& cpus = cpu_vertex_[n];
        int g = 0;
        for (int s = 0; s < tree.sockets; ++s) {
          cpus.push_back(add_vertex(VertexKind::cpu, n, s));
          if (node_root < 0) node_root = cpus.front();
          for (int w = 0; w < tree.switches_per_socket; ++w) {
            const int sw = add_vertex(VertexKind::pcie_switch, n, s * tree.switches_per_socket + w);
            add_link(fmt::format("n{}.sw{}-cpu{}", n, s * tree.switches_per_socket + w, s), sw,
                     cpus.back(), tree.switch_uplink);
            for (int i = 0; i < tree.gpus_per_switch; ++i, ++g) {
              add_link(fmt::format("n{}.gpu{}-sw{}", n, g, s * tree.switches_per_socket + w),
                       gpu_vertex_[first + g], sw, tree.gpu_link);
            }
          }
        }
        // Sockets in a chain, added after the switches so the ring visits socket by socket.
        for (int s = 0; s + 1 < tree.sockets; ++s) {
          add_link(fmt::format("n{}.cpu{}-cpu{}", n, s, s + 1), cpus[s], cpus[s + 1],
                   tree.inter_socket);
        }
        // NICs on the first socket's root complex.
        nic_attach.assign(topology.nics_per_node, cpus.front());
        break;
      }
    }
    if (multi_node) {
      const int leaf = leaf_spine ? leaf_spine->leaf_of(n) : 0;
      for (int c = 0; c < topology.nics_per_node; ++c) {
        const int nic = add_vertex(VertexKind::nic, n, c);
        nic_vertex_[n].push_back(nic);
        add_link(fmt::format("n{}.nic{}-attach", n, c), nic_attach[c], nic, {}, true);
        nic_link_.push_back(static_cast<int>(links_.size()));
        add_link(leaf_spine ? fmt::format("n{}.nic{}-leaf{}", n, c, leaf)
                            : fmt::format("n{}.nic{}-switch", n, c),
                 nic, node_switches[leaf], topology.nic);
      }
    }
  }
  // Uplinks after the nodes, so that the ring finishes a leaf's nodes before the next leaf.
  for (int leaf = 0; leaf < static_cast<int>(spines.empty() ? 0 : node_switches.size()); ++leaf) {
    uplink_.emplace_back();
    for (int spine = 0; spine < static_cast<int>(spines.size()); ++spine) {
      uplink_.back().push_back(static_cast<int>(links_.size()));
      add_link(fmt::format("leaf{}-spine{}", leaf, spine), node_switches[leaf], spines[spine],
               leaf_spine->uplink);
    }
  }
  const int root = multi_node ? node_switches.front() : node_root >= 0 ? node_root : gpu_vertex_[0];
  GpuCollector collector;
  collector.order = &ring_order_;
  std::vector<boost::default_color_type> colors(boost::num_vertices(graph_));
  boost::depth_first_visit(
      graph_, root, collector,
      boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, graph_)));
  if (static_cast<int>(ring_order_.size()) != topology.ranks()) {
    throw std::logic_error("fabric: the ring does not reach every GPU");
  }
}

Path Fabric::shortest(int from_vertex, int to_vertex) const {
  const auto n = boost::num_vertices(graph_);
  std::vector<double> distance(n);
  std::vector<FabricGraph::vertex_descriptor> parent(n);
  auto weight = [this](FabricGraph::edge_descriptor e) {
    const FabricLink& link = links_[graph_[e].id];
    return (link.ideal ? 0.0 : link.link.latency_s) + hop_penalty_s;
  };
  StopAtTarget stop;
  stop.target = static_cast<FabricGraph::vertex_descriptor>(to_vertex);
  try {
    boost::dijkstra_shortest_paths(
        graph_, from_vertex,
        boost::predecessor_map(boost::make_iterator_property_map(
                                   parent.begin(), boost::get(boost::vertex_index, graph_)))
            .distance_map(boost::make_iterator_property_map(
                distance.begin(), boost::get(boost::vertex_index, graph_)))
            .weight_map(boost::make_function_property_map<FabricGraph::edge_descriptor>(weight))
            .visitor(stop));
  } catch (const TargetReached&) {
    // The target's parent chain is final: the rest of the graph is not needed.
  }
  Path path;
  std::vector<Hop> reversed;
  for (auto v = static_cast<FabricGraph::vertex_descriptor>(to_vertex);
       v != static_cast<FabricGraph::vertex_descriptor>(from_vertex);) {
    const auto u = parent[v];
    if (u == v) throw std::logic_error("fabric: no route between two vertices");
    // The lowest-latency edge between u and v (meshes have one; keep it general).
    int best = -1;
    for (auto [e, end] = boost::out_edges(u, graph_); e != end; ++e) {
      if (boost::target(*e, graph_) != v) continue;
      const int id = graph_[*e].id;
      if (best < 0 || links_[id].link.latency_s < links_[best].link.latency_s) best = id;
    }
    reversed.push_back({best, links_[best].from == static_cast<int>(u)});
    v = u;
  }
  for (auto it = reversed.rbegin(); it != reversed.rend(); ++it) {
    path.hops.push_back(*it);
    if (!links_[it->link].ideal) path.latency_s += links_[it->link].link.latency_s;
  }
  return path;
}

void Fabric::append(Path& path, const Path& more) const {
  path.hops.insert(path.hops.end(), more.hops.begin(), more.hops.end());
  path.latency_s += more.latency_s;
}

Path Fabric::path_to_cpu(int rank) const {
  const PcieTree& tree = topology_.node.pcie;
  if (topology_.node.kind != NodeKind::pcie) {
    throw std::logic_error("fabric: a route to the CPU exists on PCIe trees only");
  }
  const int local = rank % topology_.node.gpus;
  const int socket = local / (tree.switches_per_socket * tree.gpus_per_switch);
  return shortest(gpu_vertex_.at(rank), cpu_vertex_.at(node_of(rank)).at(socket));
}

Path Fabric::path(int from_rank, int to_rank) const {
  return shortest(gpu_vertex_.at(from_rank), gpu_vertex_.at(to_rank));
}

Path Fabric::path_via_nic(int from_rank, int to_rank, int nic) const {
  const int from_node = node_of(from_rank);
  const int to_node = node_of(to_rank);
  if (from_node == to_node) return path(from_rank, to_rank);
  Path result = shortest(gpu_vertex_.at(from_rank), nic_vertex_.at(from_node).at(nic));
  const int out_link = nic_link_.at(from_node * topology_.nics_per_node + nic);
  const int in_link = nic_link_.at(to_node * topology_.nics_per_node + nic);
  Path across;
  across.hops = {{out_link, true}};
  across.latency_s = 2 * topology_.nic.latency_s;
  if (const auto& leaf_spine = topology_.leaf_spine) {
    const int from_leaf = leaf_spine->leaf_of(from_node);
    const int to_leaf = leaf_spine->leaf_of(to_node);
    if (from_leaf != to_leaf) {
      const int spine = leaf_spine->spine_of(nic);
      across.hops.push_back({uplink_.at(from_leaf).at(spine), true});
      across.hops.push_back({uplink_.at(to_leaf).at(spine), false});
      across.latency_s += 2 * leaf_spine->uplink.latency_s;
    }
  }
  across.hops.push_back({in_link, false});
  append(result, across);
  append(result, shortest(nic_vertex_.at(to_node).at(nic), gpu_vertex_.at(to_rank)));
  return result;
}

}  // namespace osdp::sim
