// Launching ranks as processes: a rank that dies or hangs makes the others fail within a
// bounded time with a message naming it; the torchrun variables are read strictly.
#include "validate/launch.hpp"

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/input_error.hpp"
#include "tests/validate/rank_threads.hpp"
#include "validate/rank_runner.hpp"
#include "validate/runtime_process.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

using namespace osdp;
using namespace osdp::validate;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& line : lines) {
    if (line.find(part) != std::string::npos) return true;
  }
  return false;
}

// Rank 1 misbehaves (`fault`) after one all-reduce; rank 0 keeps reducing until it fails and
// writes the error it saw. Returns the launch result, rank 0's message and the elapsed time.
struct FaultRun {
  LaunchResult launched;
  std::string rank0_message;
  double elapsed_s = 0;
};

FaultRun run_with_fault(int fault_signal, std::chrono::milliseconds timeout) {
  const std::filesystem::path directory = testing::temporary_path("osdp-launch-test");
  std::filesystem::create_directories(directory);
  const std::string message_path = (directory / "rank0.txt").string();
  const auto start = std::chrono::steady_clock::now();
  FaultRun run;
  run.launched = launch_local_ranks(
      2,
      [&](int rank) {
        auto comm = Communicator::connect(
            local_rank_connection(rank, 2, (directory / "store").string(), timeout));
        at::Tensor buffer = at::ones({1024}, at::kFloat);
        comm->run(CollectiveKind::all_reduce, buffer);
        if (rank == 1) raise(fault_signal);
        try {
          for (int i = 0; i < 100000; ++i) comm->run(CollectiveKind::all_reduce, buffer);
        } catch (const CollectiveError& error) {
          std::ofstream(message_path) << error.what();
          return 3;
        }
        return 0;
      },
      std::chrono::seconds(3));
  run.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.rank0_message = read_text(message_path);
  std::filesystem::remove_all(directory);
  return run;
}

}  // namespace

TEST_CASE("a killed rank makes the others fail, naming it", "[validate][launch]") {
  const FaultRun run = run_with_fault(SIGKILL, std::chrono::seconds(30));
  CHECK_FALSE(run.launched.ok);
  CHECK(run.launched.first_failed_rank == 1);
  CHECK(any_contains(run.launched.failures, "rank 1 was killed by signal 9"));
  CHECK(any_contains(run.launched.failures, "rank 0 exited with code 3"));
  CHECK(run.rank0_message.find("lost contact with rank 1") != std::string::npos);
  // The peer's closed connection is noticed at once, far inside the 60 s bound.
  CHECK(run.elapsed_s < 20.0);
}

TEST_CASE("a hung rank makes the others fail after the collective timeout", "[validate][launch]") {
  const FaultRun run = run_with_fault(SIGSTOP, std::chrono::seconds(2));
  CHECK_FALSE(run.launched.ok);
  CHECK(run.rank0_message.find("lost contact with rank 1") != std::string::npos);
  CHECK(any_contains(run.launched.failures, "rank 0 exited with code 3"));
  // rank 0 fails after its 2 s timeout; the stopped rank 1 is killed 3 s later.
  CHECK(any_contains(run.launched.failures, "rank 1 was stopped"));
  CHECK(run.elapsed_s > 1.5);
  CHECK(run.elapsed_s < 20.0);
}

TEST_CASE("torchrun, Slurm and mpirun variables", "[validate][launch]") {
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                           "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    unsetenv(name);
  }
  CHECK_FALSE(rank_from_environment().has_value());
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("MASTER_ADDR", "10.0.0.1", 1);
  setenv("MASTER_PORT", "29511", 1);
  const auto environment = rank_from_environment();
  REQUIRE(environment.has_value());
  CHECK(environment->rank == 3);
  CHECK(environment->world_size == 4);
  CHECK(environment->local_rank == 1);
  CHECK(environment->master_addr == "10.0.0.1");
  CHECK(environment->master_port == 29511);
  setenv("RANK", "4", 1);  // out of range
  CHECK_THROWS_AS(rank_from_environment(), InputError);
  unsetenv("RANK");  // WORLD_SIZE alone
  CHECK_THROWS_AS(rank_from_environment(), InputError);
  setenv("SLURM_PROCID", "2", 1);
  const auto slurm = rank_from_environment();
  REQUIRE(slurm.has_value());
  CHECK(slurm->rank == 2);
  for (const char* name :
       {"WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID"}) {
    unsetenv(name);
  }
}

TEST_CASE("measured runs on forked ranks", "[validate][launch]") {
  const GptShape shape{2, 64, 4, 16, 128};
  Plan dp;
  dp.batch_size = 2;
  dp.choices.assign(shape.operators(), OperatorChoice::whole(Mode::dp));
  Plan zdp = dp;
  zdp.choices.assign(shape.operators(), OperatorChoice::whole(Mode::zdp));
  ValidationOptions options;
  options.warmup_iterations = 1;
  options.iterations = 3;
  options.collective_timeout = std::chrono::seconds(20);
  const auto measurements = run_measurements(shape, {{"dp", dp}, {"zdp", zdp}}, 2, options, 2);
  REQUIRE(measurements.has_value());
  REQUIRE(measurements->size() == 2);
  for (const auto& measurement : *measurements) {
    REQUIRE(measurement.ranks.size() == 2);
    for (const auto& rank : measurement.ranks) {
      CHECK(rank.iteration_time_s > 0);
      CHECK(rank.peak_memory_bytes > 0);
      CHECK(rank.loss > 0);
      CHECK(rank.iteration_times_s.size() == 3);  // 3 rounds of one measured iteration
      CHECK(rank.exposed_communication_steps_s.size() == 3);
      // Every collective over both ranks: each step's waits split, the peer's part within them.
      REQUIRE(rank.peer_wait_steps_s.size() == 3);
      for (std::size_t step = 0; step < 3; ++step) {
        CHECK(rank.peer_wait_steps_s[step] >= 0.0);
        CHECK(rank.peer_wait_steps_s[step] <= rank.exposed_communication_steps_s[step] + 1e-9);
      }
    }
    const Spread spread = measurement.iteration_time_spread();
    CHECK(spread.first_quartile_s <= spread.median_s);
    CHECK(spread.median_s <= spread.third_quartile_s);
    CHECK(spread.median_s == measurement.iteration_time_s());
  }
  // One process per rank: each peak is that rank's own; ZDP holds half the model states.
  CHECK((*measurements)[1].peak_memory_bytes() < (*measurements)[0].peak_memory_bytes());
  // Both plans train the same model on the same data.
  CHECK((*measurements)[0].ranks[0].loss == Approx((*measurements)[1].ranks[0].loss).epsilon(1e-4));
}

TEST_CASE("a temporary folder goes with its files, nested folders and links",
          "[validate][launch]") {
  namespace fs = std::filesystem;
  fs::path kept;
  {
    const osdp::validate::TemporaryDirectory directory("osdp-remove-test");
    kept = directory.path();
    fs::create_directories(kept / "ranks" / "deeper");
    std::ofstream(kept / "measurements.json") << "{}";
    std::ofstream(kept / "ranks" / "deeper" / "trace.json") << "[]";
    const fs::path outside = fs::temp_directory_path() / "osdp-remove-test-outside";
    std::ofstream(outside) << "kept";
    fs::create_symlink(outside, kept / "ranks" / "link");
    REQUIRE(fs::exists(kept / "ranks" / "deeper" / "trace.json"));
  }
  CHECK_FALSE(fs::exists(kept));
  // The link went, not what it pointed at.
  const fs::path outside = fs::temp_directory_path() / "osdp-remove-test-outside";
  CHECK(fs::exists(outside));
  fs::remove(outside);
  // A folder that is not there is no error.
  osdp::validate::remove_directory_tree(kept);
  CHECK_FALSE(fs::exists(kept));
}
