// Starting ranks: under torchrun, Slurm (via srun's torchrun-style exports) or mpirun the
// process is one rank and reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
// otherwise `osdp` forks its local ranks itself and watches them: a rank that dies is named and
// the others are stopped if they have not failed on their own within the grace period.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace osdp::validate {

struct RankEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// The torchrun variables; nullopt when RANK and WORLD_SIZE are both unset. Slurm's SLURM_PROCID
// / SLURM_NTASKS and Open MPI's OMPI_COMM_WORLD_RANK / _SIZE stand in for RANK / WORLD_SIZE.
// Throws InputError (file "environment") for malformed or partial settings.
std::optional<RankEnvironment> rank_from_environment();

struct LaunchResult {
  bool ok = true;
  // One line per rank that failed: "rank 1 was killed by signal 9 (SIGKILL)".
  std::vector<std::string> failures;
  // The first rank that failed, -1 if none.
  int first_failed_rank = -1;
  // SIGINT or SIGTERM reached this process during the run: the ranks were stopped; 0 if not.
  int interrupted_by_signal = 0;
};

// A run failed: a rank died, hung or reported an error, or a signal stopped it. The message
// names the ranks.
class RunFailure : public std::runtime_error {
 public:
  explicit RunFailure(const std::string& message, int interrupted_by_signal = 0)
      : std::runtime_error(message), interrupted_by_signal_(interrupted_by_signal) {}
  // SIGINT or SIGTERM when the user stopped the run; 0 when it failed by itself.
  int interrupted_by_signal() const { return interrupted_by_signal_; }

 private:
  int interrupted_by_signal_ = 0;
};

// Throws RunFailure ("the <what> run failed:" and one line per failure) unless `result` is ok.
void throw_if_failed(const LaunchResult& result, const std::string& what);

// Forks `ranks` processes running `body(rank)` (its return value is the exit code) and waits.
// When one fails, the others get `grace` to fail on their own (their collectives time out or
// lose their peer), then are killed. A SIGINT or SIGTERM to this process while it waits is
// passed to the ranks (killed if still there after a second) and reported in the result.
// Ranks ignore SIGPIPE, so a lost peer is an error they report, not a silent death. Call
// before creating threads: a forked child copies only the calling thread.
LaunchResult launch_local_ranks(int ranks, const std::function<int(int rank)>& body,
                                std::chrono::milliseconds grace);

}  // namespace osdp::validate
