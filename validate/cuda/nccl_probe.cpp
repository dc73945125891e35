// osdp_nccl_probe: bus bandwidth of NCCL's all-gather, reduce-scatter and all-reduce over
// message sizes on this machine's GPUs (nccl-tests conventions from model/collectives.hpp),
// checked; fits the ring alpha-beta model per collective (piecewise by size) and writes a
// cluster description that osdp loads.
//   osdp_nccl_probe [--gpus N] [--out cluster.json] [--min-bus-bandwidth GBps] [--name NAME]
// Exit 0 on success, 1 when the check or the bandwidth threshold fails, 2 on bad arguments.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/atomic_file.hpp"
#include "model/scenario.hpp"
#include "validate/alpha_beta_fit.hpp"
#include "validate/cuda/nccl_bench.hpp"

namespace {

using osdp::CollectiveKind;
using osdp::validate::cuda::NcclCollective;

struct Options {
  int gpus = 0;
  std::string out;
  std::string name = "local GPUs (NCCL probe)";
  double min_bus_bandwidth_Bps = 0;
  int repetitions = 20;
};

CollectiveKind kind_of(NcclCollective collective) {
  switch (collective) {
    case NcclCollective::all_gather:
      return CollectiveKind::all_gather;
    case NcclCollective::reduce_scatter:
      return CollectiveKind::reduce_scatter;
    case NcclCollective::all_reduce:
      return CollectiveKind::all_reduce;
  }
  return CollectiveKind::all_reduce;
}

int probe(const Options& options) {
  const std::vector<double> sizes{1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28};
  const auto result =
      osdp::validate::cuda::run_nccl_probe(options.gpus, sizes, options.repetitions);
  bool ok = result.check_passed;
  if (!ok) std::fprintf(stderr, "osdp_nccl_probe: all-reduce gave a wrong sum\n");
  const int n = result.gpus;
  osdp::Cluster cluster;
  cluster.name = options.name;
  cluster.ranks = n;
  cluster.gpus_per_node = n;
  cluster.gpu.name = result.gpu_name;
  cluster.gpu.memory_bytes = result.gpu_memory_bytes;
  fmt::print("{} x {}\n{:<16}{:>14}{:>12}{:>12}{:>12}\n", n, result.gpu_name, "collective", "bytes",
             "time us", "algbw GB/s", "busbw GB/s");
  for (CollectiveKind kind :
       {CollectiveKind::all_gather, CollectiveKind::reduce_scatter, CollectiveKind::all_reduce}) {
    std::vector<std::pair<double, double>> points;
    double largest_bus_Bps = 0;
    for (const auto& point : result.points) {
      if (kind_of(point.kind) != kind) continue;
      const double algorithm_Bps = point.bytes / point.time_s;
      const double bus_Bps = algorithm_Bps * osdp::bus_bandwidth_factor(kind, n);
      largest_bus_Bps = bus_Bps;  // points come in increasing size
      fmt::print("{:<16}{:>14.0f}{:>12.1f}{:>12.2f}{:>12.2f}\n", osdp::collective_name(kind),
                 point.bytes, 1e6 * point.time_s, algorithm_Bps / 1e9, bus_Bps / 1e9);
      if (osdp::ring_steps(kind, n) > 0) {
        points.emplace_back(osdp::ring_step_bytes(point.bytes, n),
                            point.time_s / osdp::ring_steps(kind, n));
      }
    }
    if (n > 1 && largest_bus_Bps < options.min_bus_bandwidth_Bps) {
      std::fprintf(stderr, "osdp_nccl_probe: %s bus bandwidth %.2f GB/s under the threshold\n",
                   std::string(osdp::collective_name(kind)).c_str(), largest_bus_Bps / 1e9);
      ok = false;
    }
    const osdp::CollectiveTiming timing = osdp::validate::fit_collective_timing(points);
    (kind == CollectiveKind::all_gather       ? cluster.world.all_gather
     : kind == CollectiveKind::reduce_scatter ? cluster.world.reduce_scatter
                                              : cluster.world.all_reduce) = timing;
  }
  cluster.intra_node = cluster.world;
  cluster.inter_node = cluster.world;
  if (!options.out.empty()) {
    osdp::write_file_atomically(options.out, osdp::cluster_to_json(cluster).dump(2) + "\n");
    fmt::print("cluster written to {}\n", options.out);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "osdp_nccl_probe: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    char* end = nullptr;
    if (flag == "--gpus") {
      options.gpus = static_cast<int>(std::strtol(value.c_str(), &end, 10));
    } else if (flag == "--out") {
      options.out = value;
    } else if (flag == "--name") {
      options.name = value;
    } else if (flag == "--min-bus-bandwidth") {
      options.min_bus_bandwidth_Bps = std::strtod(value.c_str(), &end) * 1e9;
    } else {
      std::fprintf(stderr, "osdp_nccl_probe: unknown option %s\n", flag.c_str());
      return 2;
    }
    if (end != nullptr && *end != '\0') {
      std::fprintf(stderr, "osdp_nccl_probe: %s: not a number: %s\n", flag.c_str(), value.c_str());
      return 2;
    }
  }
  try {
    return probe(options);
  } catch (const std::invalid_argument& error) {
    std::fprintf(stderr, "osdp_nccl_probe: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "osdp_nccl_probe: %s\n", error.what());
    return 1;
  }
}
