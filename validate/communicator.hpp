// The ranks' communication, reached through a store, behind one interface:
//   gloo (CPU tensors): ring all-gather / reduce-scatter / all-reduce written on send/recv over
//     one flat buffer, the ring collectives of model/collectives.hpp (Gloo in libtorch 1.13 has
//     no reduce-scatter, and its all-gather copies through a second full-size buffer). They run
//     on one communication thread per rank in issue order (NCCL stream semantics); every send
//     and receive is bounded by the timeout, and a lost peer becomes a CollectiveError naming it.
//   nccl (CUDA tensors; only in a build with OSDP_WITH_CUDA, validate/cuda/): ProcessGroupNCCL's
//     own _allgather_base / _reduce_scatter_base / allreduce, in place, queued in issue order
//     on one CUDA stream per rank.
// Collectives return handles to wait on.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/collectives.hpp"
#include "validate/launch.hpp"

namespace osdp::validate {

enum class CommBackend { gloo, nccl };

// How a rank finds the others.
struct ConnectOptions {
  int rank = 0;
  int world_size = 1;
  CommBackend backend = CommBackend::gloo;
  int cuda_device = 0;  // nccl: the rank's device (its LOCAL_RANK)
  // Rendezvous through a file (local ranks) or a TCP store at master_addr:master_port hosted by
  // rank 0 (torchrun, Slurm, mpirun); a rank alone (world_size 1) needs no rendezvous: an
  // in-process store leaves no file behind when the process is stopped.
  enum class StoreKind { file, tcp, in_process } store = StoreKind::file;
  std::string file_store_path;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Address Gloo binds to; empty: the machine's hostname (Gloo's default device).
  std::string gloo_hostname = "127.0.0.1";
  // Bound on rendezvous and on every send / receive.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

// A local rank that osdp forked (launch_local_ranks): the ranks meet through a file store at
// `file_store_path`.
ConnectOptions local_rank_connection(int rank, int world_size, std::string file_store_path,
                                     std::chrono::milliseconds timeout);
// A rank that torchrun, Slurm or mpirun started: the TCP store rank 0 hosts at the launch's
// master; Gloo binds to the machine's hostname, where the other machines reach it.
ConnectOptions launched_rank_connection(const RankEnvironment& environment,
                                        std::chrono::milliseconds timeout);

// A collective failed: a peer died, closed its connection or timed out.
class CollectiveError : public std::runtime_error {
 public:
  CollectiveError(std::string message, int missing_rank)
      : std::runtime_error(std::move(message)), missing_rank_(missing_rank) {}
  int missing_rank() const { return missing_rank_; }

 private:
  int missing_rank_;
};

// Completion of an asynchronous collective.
class CommHandle {
 public:
  // How a backend completes: the Gloo rings on a future the caller blocks on, NCCL on a CUDA
  // event the caller's stream waits for.
  class Completion {
   public:
    virtual ~Completion() = default;
    virtual bool ready() const = 0;
    virtual void wait() const = 0;
    // steady_seconds() when the collective completed, once it has; none where the backend
    // cannot say (transfers, NCCL's events).
    virtual std::optional<double> completed_s() const { return std::nullopt; }
  };

  CommHandle() = default;
  // A task on a communication thread: `done` when it ends, `completed_s` (written before
  // `done` is set) when that was.
  CommHandle(std::shared_future<void> done, std::shared_ptr<const double> completed_s);
  explicit CommHandle(std::shared_ptr<const Completion> completion)
      : completion_(std::move(completion)) {}
  bool valid() const { return completion_ != nullptr; }
  bool ready() const { return !completion_ || completion_->ready(); }
  // Gloo: blocks until done and rethrows the collective's error. NCCL: work queued on the
  // caller's current stream from now on runs after the collective.
  void wait() const {
    if (completion_) completion_->wait();
  }
  std::optional<double> completed_s() const {
    return completion_ ? completion_->completed_s() : std::nullopt;
  }

 private:
  std::shared_ptr<const Completion> completion_;
};

// One collective as the communication thread ran it (steady-clock seconds), for traces.
struct CollectiveEvent {
  CollectiveKind kind = CollectiveKind::all_gather;
  double bytes = 0;  // the full buffer
  int ranks = 0;     // group size
  double start_s = 0;
  double end_s = 0;
};

// Seconds on the steady clock, the time base of CollectiveEvent and StepMetrics.
double steady_seconds();
// Seconds on the steady clock from `start` until now.
double seconds_since(std::chrono::steady_clock::time_point start);

// Blocks until every handle's collective is done; returns the seconds of the wait that were
// communication: from now until the last of them completed. On CPU ranks a thread woken by a
// completed collective may then wait for a core that the other ranks' threads hold; that is
// not communication (on a GPU the compute resumes on the stream at once), and the validator's
// exposed communication leaves it out. A handle that cannot say when it completed counts until
// the wait returns.
double wait_exposed_s(const std::vector<CommHandle>& handles);
double wait_exposed_s(const CommHandle& handle);

class Communicator {
 public:
  // Rendezvous with the other ranks; throws CollectiveError when they do not come in time.
  static std::unique_ptr<Communicator> connect(const ConnectOptions& options);
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  // Ring collectives over `group` (global ranks in ring order; empty: all ranks), on a flat
  // contiguous float buffer whose numel the group size divides. Chunk c of the buffer belongs to
  // the group's c-th rank.
  //   all_gather: this rank's chunk is in place; on completion every chunk is.
  //   reduce_scatter: every rank's full buffer; on completion this rank's chunk holds the sum
  //     (what the other chunks hold depends on the backend).
  //   all_reduce: reduce-scatter then all-gather, in place: every chunk holds the sum.
  // `then` runs right after the collective succeeds, in its order (Gloo: on the communication
  // thread; NCCL: queued on the communication stream), e.g. to copy a reduced chunk out and
  // drop the full buffer as soon as possible.
  virtual CommHandle start(CollectiveKind kind, at::Tensor buffer, std::vector<int> group = {},
                           std::function<void()> then = {}) = 0;
  // One all-gather of several buffers, as of their concatenation (each buffer's chunk c from
  // the group's c-th rank): one collective's latency for all of them, as a flat parameter's
  // gather (FSDP's, DeepSpeed's). Gloo: one ring whose steps send every buffer's chunk and
  // receive the next straight into place (no staging copy); other backends: one collective each.
  virtual CommHandle start_all_gather(std::vector<at::Tensor> buffers, std::vector<int> group = {});
  void run(CollectiveKind kind, at::Tensor buffer, std::vector<int> group = {}) {
    start(kind, std::move(buffer), std::move(group)).wait();
  }
  // Point-to-point transfers (pipeline stages): the k-th send to a peer meets the peer's k-th
  // receive from this rank. send returns at once (wait on the handle before reusing the
  // tensor); receive blocks until the tensor holds the peer's data. Gloo only.
  virtual CommHandle send(at::Tensor tensor, int peer);
  virtual void receive(at::Tensor tensor, int peer);
  // Blocks until every rank reaches it (an all-reduce of one value).
  virtual void barrier() = 0;
  // The collectives completed since the last call (oldest first).
  virtual std::vector<CollectiveEvent> take_events() = 0;
};

// Index of `rank` in `group`, or -1.
int group_index(const std::vector<int>& group, int rank);

}  // namespace osdp::validate
