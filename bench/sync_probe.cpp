// sync_probe: what a blocking collective costs a step on CPU ranks, split into its parts (not a
// timed test; the tensor-parallel gap of docs/fidelity.md). Two local ranks compute a stretch of
// n x n products, then all-reduce 256 KiB from the computing thread and wait, 200 times per
// stretch length. Each rank records when its compute ended and when the all-reduce returned
// (steady_clock: one clock for every process of a machine), and the table gives per stretch:
//   wait       issued -> returned, averaged over both ranks (what the step loses);
//   skew       |rank 0's compute end - rank 1's| (the early rank waits for the late one);
//   collective returned (first rank) - last arrival: the collective itself, mean and median.
//   sync_probe [DIR]   (per-rank samples written to DIR/rank<r>.txt, default /tmp/osdp-sync)
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>
#include <vector>

#include "validate/communicator.hpp"
#include "validate/compute_threads.hpp"
#include "validate/launch.hpp"

using namespace osdp;
using namespace osdp::validate;
using Clock = std::chrono::steady_clock;

namespace {

struct Sample {
  long long start_ns = 0, computed_ns = 0, done_ns = 0;
};
using Key = std::tuple<int, int, int>;  // width, products, sample index

long long ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

int run_rank(int rank, const std::string& dir) {
  ConnectOptions connect;
  connect.rank = rank;
  connect.world_size = 2;
  connect.file_store_path = dir + "/store";
  auto comm = Communicator::connect(connect);
  use_one_compute_thread();  // as the validator's CPU ranks run
  let_communication_preempt_compute();
  at::Tensor buffer = at::ones({65536}, at::kFloat);
  std::ofstream out(fmt::format("{}/rank{}.txt", dir, rank));
  for (int width : {128, 256, 384, 512}) {
    at::Tensor work = at::rand({width, width}, at::kFloat);
    for (int products : {1, 4, 16}) {
      int index = 0;
      for (int rep = 0; rep < 40; ++rep) {
        comm->barrier();
        comm->run(CollectiveKind::all_reduce, buffer);  // both ranks awake and in step
        for (int call = 0; call < 5; ++call) {
          const auto start = Clock::now();
          for (int p = 0; p < products; ++p) work = at::mm(work, work).div_(width);
          const auto computed = Clock::now();
          comm->run(CollectiveKind::all_reduce, buffer);
          const auto done = Clock::now();
          out << width << ' ' << products << ' ' << index++ << ' ' << ns_of(start) << ' '
              << ns_of(computed) << ' ' << ns_of(done) << '\n';
        }
      }
    }
  }
  return 0;
}

std::map<Key, Sample> read_samples(const std::string& path) {
  std::map<Key, Sample> samples;
  std::ifstream in(path);
  int width = 0, products = 0, index = 0;
  Sample s;
  while (in >> width >> products >> index >> s.start_ns >> s.computed_ns >> s.done_ns) {
    samples[{width, products, index}] = s;
  }
  return samples;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / v.size();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/osdp-sync";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/store");
  const LaunchResult launched = launch_local_ranks(
      2, [&](int rank) { return run_rank(rank, dir); }, std::chrono::seconds(5));
  if (!launched.ok) {
    std::fprintf(stderr, "sync_probe: a rank failed\n");
    return 1;
  }
  const auto rank0 = read_samples(dir + "/rank0.txt");
  const auto rank1 = read_samples(dir + "/rank1.txt");
  std::map<std::pair<int, int>, std::vector<std::array<double, 4>>> by_stretch;
  for (const auto& [key, a] : rank0) {
    const auto found = rank1.find(key);
    if (found == rank1.end()) continue;
    const Sample& b = found->second;
    const double compute_ms =
        0.5e-6 * ((a.computed_ns - a.start_ns) + (b.computed_ns - b.start_ns));
    const double wait_ms = 0.5e-6 * ((a.done_ns - a.computed_ns) + (b.done_ns - b.computed_ns));
    const double skew_ms = 1e-6 * std::llabs(a.computed_ns - b.computed_ns);
    const double collective_ms =
        1e-6 * (std::min(a.done_ns, b.done_ns) - std::max(a.computed_ns, b.computed_ns));
    by_stretch[{std::get<0>(key), std::get<1>(key)}].push_back(
        {compute_ms, wait_ms, skew_ms, collective_ms});
  }
  fmt::print("{:>6}{:>9}{:>12}{:>10}{:>10}{:>18}{:>18}\n", "width", "products", "compute ms",
             "wait ms", "skew ms", "collective mean", "collective median");
  for (const auto& [stretch, rows] : by_stretch) {
    std::vector<double> column[4];
    for (const auto& row : rows) {
      for (int c = 0; c < 4; ++c) column[c].push_back(row[c]);
    }
    fmt::print("{:>6}{:>9}{:>12.2f}{:>10.3f}{:>10.3f}{:>18.3f}{:>18.3f}\n", stretch.first,
               stretch.second, mean(column[0]), mean(column[1]), mean(column[2]), mean(column[3]),
               median(column[3]));
  }
  return 0;
}
