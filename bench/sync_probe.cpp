// sync_probe: what a blocking collective costs a step on CPU ranks, split into its parts (not a
// timed test; the tensor-parallel gap of docs/fidelity.md). Two local ranks compute a stretch of
// n x n products, then all-reduce 256 KiB from the computing thread and wait, 200 times per
// stretch length. Each rank records when its compute ended and when the all-reduce returned
// (steady_clock: one clock for every process of a machine), and the table gives per stretch:
//   wait       issued -> returned, averaged over both ranks (what the step loses);
//   skew       |rank 0's compute end - rank 1's| (the early rank waits for the late one);
//   collective returned (first rank) - last arrival: the collective itself, mean and median.
//   sync_probe [DIR]   (per-rank samples written to DIR/rank<r>.txt, default /tmp/osdp-sync)
//   sync_probe --overlap [DIR]
//   sync_probe --queue [DIR]
//   sync_probe --beside [DIR]
// The second asks how much of a collective runs beside compute on shared cores: each rank times
// an all-gather alone (S), a stretch of products alone (C), then starts the all-gather, computes
// the same stretch and waits (the compute's wall time T and the wait W), 20 times per size and
// stretch; the table gives medians and two readings of the compute's share of a core while both
// run: C / T (the compute's own slowing, where the collective outlasts it) and C / (C + S - W)
// (from what the collective had left; an equal share of two threads on one core is 0.5).
// The third asks what a queue of collectives costs against one of the same bytes (a sharded
// step's first gather is one all-gather per operator unit): after a barrier each rank times one
// all-gather of B bytes, then N all-gathers of B / N issued at once and waited for together, then
// the N issued one at a time (each waited for before the next), 20 times per (B, N); the table
// gives medians and the queue's extra time per extra collective.
// The fourth asks how often a collective waits for the scheduler's tick: all-gathers started and
// waited for one after another, with nothing else running and with a compute thread beside
// them; the table gives each size's median, 90th percentile, mean, largest and share above 1 ms.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
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

// One of the two ranks, its threads set as the validator's CPU ranks run.
std::unique_ptr<Communicator> connect_rank(int rank, const std::string& dir) {
  auto comm = Communicator::connect(
      local_rank_connection(rank, 2, dir + "/store", ConnectOptions{}.timeout));
  use_one_compute_thread();
  let_communication_preempt_compute();
  return comm;
}

// Runs `body` on two local ranks; false (said on stderr) if a rank failed.
bool run_two_ranks(const std::function<int(int rank)>& body) {
  if (launch_local_ranks(2, body, std::chrono::seconds(5)).ok) return true;
  std::fprintf(stderr, "sync_probe: a rank failed\n");
  return false;
}

int run_rank(int rank, const std::string& dir) {
  auto comm = connect_rank(rank, dir);
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

// --overlap: per rank, lines of "bytes products S C T W" in seconds.
int run_overlap_rank(int rank, const std::string& dir) {
  auto comm = connect_rank(rank, dir);
  std::ofstream out(fmt::format("{}/overlap{}.txt", dir, rank));
  at::Tensor work = at::rand({384, 384}, at::kFloat);
  auto seconds = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  for (int64_t floats : {262144, 1048576, 4194304}) {
    at::Tensor buffer = at::ones({floats}, at::kFloat);
    for (int products : {4, 16, 48}) {
      for (int rep = 0; rep < 20; ++rep) {
        comm->barrier();
        auto start = Clock::now();
        comm->run(CollectiveKind::all_gather, buffer);
        const double alone_s = seconds(start);
        comm->barrier();
        start = Clock::now();
        for (int p = 0; p < products; ++p) work = at::mm(work, work).div_(384);
        const double compute_s = seconds(start);
        comm->barrier();
        start = Clock::now();
        const CommHandle gather = comm->start(CollectiveKind::all_gather, buffer);
        for (int p = 0; p < products; ++p) work = at::mm(work, work).div_(384);
        const double beside_s = seconds(start);
        const auto computed = Clock::now();
        gather.wait();
        const double wait_s = seconds(computed);
        out << floats * 4 << ' ' << products << ' ' << alone_s << ' ' << compute_s << ' '
            << beside_s << ' ' << wait_s << '\n';
      }
    }
  }
  return 0;
}

// --queue: per rank, lines of "bytes collectives one_s queue_s serial_s".
int run_queue_rank(int rank, const std::string& dir) {
  auto comm = connect_rank(rank, dir);
  std::ofstream out(fmt::format("{}/queue{}.txt", dir, rank));
  auto seconds = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  for (int64_t floats : {1048576, 4194304}) {
    at::Tensor whole = at::ones({floats}, at::kFloat);
    for (int collectives : {2, 5, 10, 20}) {
      std::vector<at::Tensor> parts;
      for (int c = 0; c < collectives; ++c)
        parts.push_back(at::ones({floats / collectives / 2 * 2}));
      for (int rep = 0; rep < 20; ++rep) {
        comm->barrier();
        auto start = Clock::now();
        comm->run(CollectiveKind::all_gather, whole);
        const double one_s = seconds(start);
        comm->barrier();
        start = Clock::now();
        std::vector<CommHandle> queued;
        for (at::Tensor& part : parts)
          queued.push_back(comm->start(CollectiveKind::all_gather, part));
        for (const CommHandle& handle : queued) handle.wait();
        const double queue_s = seconds(start);
        comm->barrier();
        start = Clock::now();
        for (at::Tensor& part : parts) comm->run(CollectiveKind::all_gather, part);
        const double serial_s = seconds(start);
        out << floats * 4 << ' ' << collectives << ' ' << one_s << ' ' << queue_s << ' ' << serial_s
            << '\n';
      }
    }
  }
  return 0;
}

int queue_main(const std::string& dir) {
  if (!run_two_ranks([&](int rank) { return run_queue_rank(rank, dir); })) return 1;
  std::map<std::pair<long long, int>, std::array<std::vector<double>, 3>> rows;
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(fmt::format("{}/queue{}.txt", dir, rank));
    long long bytes = 0;
    int collectives = 0;
    double one = 0, queue = 0, serial = 0;
    while (in >> bytes >> collectives >> one >> queue >> serial) {
      auto& row = rows[{bytes, collectives}];
      row[0].push_back(one);
      row[1].push_back(queue);
      row[2].push_back(serial);
    }
  }
  fmt::print("{:>10}{:>12}{:>10}{:>10}{:>12}{:>12}{:>12}{:>22}\n", "bytes", "collectives", "one ms",
             "queue ms", "queue p10", "queue p90", "serial ms", "extra per collective");
  for (auto& [key, row] : rows) {
    for (auto& column : row) std::sort(column.begin(), column.end());
    const double one = row[0][row[0].size() / 2], queue = row[1][row[1].size() / 2];
    fmt::print("{:>10}{:>12}{:>10.2f}{:>10.2f}{:>12.2f}{:>12.2f}{:>12.2f}{:>22.2f}\n", key.first,
               key.second, 1e3 * one, 1e3 * queue, 1e3 * row[1][row[1].size() / 10],
               1e3 * row[1][row[1].size() * 9 / 10], 1e3 * row[2][row[2].size() / 2],
               1e3 * (queue - one) / (key.second - 1));
  }
  return 0;
}

int overlap_main(const std::string& dir) {
  if (!run_two_ranks([&](int rank) { return run_overlap_rank(rank, dir); })) return 1;
  std::map<std::pair<long long, int>, std::array<std::vector<double>, 4>> rows;
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(fmt::format("{}/overlap{}.txt", dir, rank));
    long long bytes = 0;
    int products = 0;
    double alone = 0, compute = 0, beside = 0, wait = 0;
    while (in >> bytes >> products >> alone >> compute >> beside >> wait) {
      auto& row = rows[{bytes, products}];
      row[0].push_back(alone);
      row[1].push_back(compute);
      row[2].push_back(beside);
      row[3].push_back(wait);
    }
  }
  fmt::print("{:>10}{:>9}{:>10}{:>10}{:>10}{:>10}{:>10}{:>14}\n", "bytes", "products", "S ms",
             "C ms", "T ms", "W ms", "C / T", "C/(C+S-W)");
  for (auto& [key, row] : rows) {
    std::array<double, 4> m{};
    for (int c = 0; c < 4; ++c) {
      std::sort(row[c].begin(), row[c].end());
      m[c] = row[c][row[c].size() / 2];
    }
    fmt::print("{:>10}{:>9}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}{:>10.2f}{:>14.2f}\n", key.first,
               key.second, 1e3 * m[0], 1e3 * m[1], 1e3 * m[2], 1e3 * m[3], m[1] / m[2],
               m[1] / (m[1] + m[0] - m[3]));
  }
  return 0;
}

// --beside: per rank, lines of "bytes busy seconds": all-gathers of each size started and waited
// for one after another by the rank's main thread, 100 of each, with no compute beside them
// (busy 0) or with a second thread of the rank computing products all along (busy 1, its nice
// value raised as the runtime's compute thread's is).
int run_beside_rank(int rank, const std::string& dir) {
  auto comm = connect_rank(rank, dir);
  std::ofstream out(fmt::format("{}/beside{}.txt", dir, rank));
  for (int busy : {0, 1}) {
    std::atomic<bool> stop{false};
    std::thread compute;
    if (busy) {
      compute = std::thread([&stop] {
        use_one_compute_thread();
        let_communication_preempt_compute();
        at::Tensor work = at::rand({384, 384}, at::kFloat);
        while (!stop.load()) work = at::mm(work, work).div_(384);
      });
    }
    for (int64_t floats : {16384, 65536, 131328, 524288}) {
      at::Tensor buffer = at::ones({floats}, at::kFloat);
      comm->barrier();
      for (int call = 0; call < 100; ++call) {
        const auto start = Clock::now();
        comm->start(CollectiveKind::all_gather, buffer).wait();
        out << floats * 4 << ' ' << busy << ' '
            << std::chrono::duration<double>(Clock::now() - start).count() << '\n';
      }
    }
    stop = true;
    if (compute.joinable()) compute.join();
  }
  return 0;
}

int beside_main(const std::string& dir) {
  if (!run_two_ranks([&](int rank) { return run_beside_rank(rank, dir); })) return 1;
  std::map<std::pair<long long, int>, std::vector<double>> rows;
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(fmt::format("{}/beside{}.txt", dir, rank));
    long long bytes = 0;
    int busy = 0;
    double seconds = 0;
    while (in >> bytes >> busy >> seconds) rows[{bytes, busy}].push_back(seconds);
  }
  fmt::print("{:>10}{:>9}{:>12}{:>10}{:>10}{:>10}{:>10}\n", "bytes", "compute", "median ms",
             "p90 ms", "mean ms", "max ms", "> 1 ms");
  for (auto& [key, v] : rows) {
    std::sort(v.begin(), v.end());
    double sum = 0;
    int slow = 0;
    for (double x : v) {
      sum += x;
      slow += x > 1e-3;
    }
    fmt::print("{:>10}{:>9}{:>12.3f}{:>10.3f}{:>10.3f}{:>10.3f}{:>9.0f}%\n", key.first,
               key.second ? "beside" : "none", 1e3 * v[v.size() / 2], 1e3 * v[v.size() * 9 / 10],
               1e3 * sum / v.size(), 1e3 * v.back(), 100.0 * slow / v.size());
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
  const bool overlap = argc > 1 && std::string(argv[1]) == "--overlap";
  const bool queue = argc > 1 && std::string(argv[1]) == "--queue";
  const bool beside = argc > 1 && std::string(argv[1]) == "--beside";
  const int dir_argument = overlap || queue || beside ? 2 : 1;
  // One mode at most, then one directory; anything else (a misspelt mode above all, which would
  // become a directory) is refused.
  if (argc > dir_argument + 1 || (argc > dir_argument && argv[dir_argument][0] == '-')) {
    std::fprintf(stderr,
                 "sync_probe: got \"%s\": expected [--overlap | --queue | --beside] [DIR]\n",
                 argv[argc > dir_argument + 1 ? dir_argument + 1 : dir_argument]);
    return 2;
  }
  const std::string dir = argc > dir_argument ? argv[dir_argument] : "/tmp/osdp-sync";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/store");
  if (overlap) return overlap_main(dir);
  if (queue) return queue_main(dir);
  if (beside) return beside_main(dir);
  if (!run_two_ranks([&](int rank) { return run_rank(rank, dir); })) return 1;
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
