#include "validate/communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

// PyTorch's pip wheels may ship without Gloo's own headers, which ProcessGroupGloo.hpp needs:
// such a build has the NCCL backend only (the GPU machine's), and says so when asked for Gloo.
#if __has_include(<gloo/algorithm.h>)
#define OSDP_HAS_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#else
#define OSDP_HAS_GLOO 0
#endif

#ifdef OSDP_WITH_CUDA_DEVICE
#include "validate/cuda/nccl_communicator.hpp"
#endif

namespace osdp::validate {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

namespace {

class FutureCompletion final : public CommHandle::Completion {
 public:
  FutureCompletion(std::shared_future<void> done, std::shared_ptr<const double> completed_s)
      : done_(std::move(done)), completed_s_(std::move(completed_s)) {}
  bool ready() const override {
    return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  void wait() const override { done_.get(); }
  std::optional<double> completed_s() const override {
    if (!completed_s_ || !ready()) return std::nullopt;
    return *completed_s_;
  }

 private:
  std::shared_future<void> done_;
  std::shared_ptr<const double> completed_s_;
};

// A point-to-point transfer: waits for its c10d work, a lost peer as a CollectiveError.
class TransferCompletion final : public CommHandle::Completion {
 public:
  TransferCompletion(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor,
                     std::chrono::milliseconds timeout, int rank, int peer, const char* what)
      : work_(std::move(work)),
        tensor_(std::move(tensor)),
        timeout_(timeout),
        rank_(rank),
        peer_(peer),
        what_(what) {}
  bool ready() const override { return work_->isCompleted(); }
  void wait() const override {
    try {
      work_->wait(timeout_);
    } catch (const std::exception& error) {
      std::string detail = error.what();
      if (const auto newline = detail.find('\n'); newline != std::string::npos)
        detail.resize(newline);
      throw CollectiveError(fmt::format("rank {}: {} rank {} failed (timeout {} ms): {}", rank_,
                                        what_, peer_, timeout_.count(), detail),
                            peer_);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // kept alive until the transfer is done
  std::chrono::milliseconds timeout_;
  int rank_;
  int peer_;
  const char* what_;
};

}  // namespace

CommHandle::CommHandle(std::shared_future<void> done, std::shared_ptr<const double> completed_s)
    : completion_(done.valid()
                      ? std::make_shared<FutureCompletion>(std::move(done), std::move(completed_s))
                      : nullptr) {}

double wait_exposed_s(const std::vector<CommHandle>& handles) {
  const double start_s = steady_seconds();
  double completed_s = start_s;
  for (const CommHandle& handle : handles) {
    handle.wait();
    completed_s = std::max(completed_s, handle.completed_s().value_or(steady_seconds()));
  }
  return completed_s - start_s;
}

double wait_exposed_s(const CommHandle& handle) {
  return wait_exposed_s(std::vector<CommHandle>{handle});
}

namespace {

// Several collectives waited for as one.
class GroupCompletion final : public CommHandle::Completion {
 public:
  explicit GroupCompletion(std::vector<CommHandle> handles) : handles_(std::move(handles)) {}
  bool ready() const override {
    return std::all_of(handles_.begin(), handles_.end(),
                       [](const CommHandle& handle) { return handle.ready(); });
  }
  void wait() const override {
    for (const CommHandle& handle : handles_) handle.wait();
  }
  std::optional<double> completed_s() const override {
    double last_s = 0;
    for (const CommHandle& handle : handles_) {
      const std::optional<double> completed_s = handle.completed_s();
      if (!completed_s) return std::nullopt;
      last_s = std::max(last_s, *completed_s);
    }
    return last_s;
  }

 private:
  std::vector<CommHandle> handles_;
};

}  // namespace

CommHandle Communicator::start_all_gather(std::vector<at::Tensor> buffers, std::vector<int> group) {
  std::vector<CommHandle> handles;
  for (at::Tensor& buffer : buffers) {
    handles.push_back(start(CollectiveKind::all_gather, std::move(buffer), group));
  }
  return CommHandle(std::shared_ptr<const CommHandle::Completion>(
      std::make_shared<GroupCompletion>(std::move(handles))));
}

CommHandle Communicator::send(at::Tensor, int) {
  TORCH_CHECK(false, "point-to-point transfers need the Gloo backend");
}

void Communicator::receive(at::Tensor, int) {
  TORCH_CHECK(false, "point-to-point transfers need the Gloo backend");
}

int group_index(const std::vector<int>& group, int rank) {
  for (std::size_t i = 0; i < group.size(); ++i) {
    if (group[i] == rank) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// One thread running tasks in the order they were queued.
class SerialExecutor {
 public:
  SerialExecutor() : thread_([this] { loop(); }) {}
  ~SerialExecutor() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  // The task's completion, and when it completed (written before the future is set).
  CommHandle submit(std::function<void()> task) {
    auto promise = std::make_shared<std::promise<void>>();
    std::shared_future<void> done = promise->get_future().share();
    auto completed_s = std::make_shared<double>(0.0);
    {
      std::lock_guard lock(mutex_);
      tasks_.emplace_back([task = std::move(task), promise, completed_s] {
        try {
          task();
          *completed_s = steady_seconds();
          promise->set_value();
        } catch (...) {
          *completed_s = steady_seconds();
          promise->set_exception(std::current_exception());
        }
      });
    }
    wake_.notify_one();
    return CommHandle(std::move(done), std::move(completed_s));
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

#if OSDP_HAS_GLOO
class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group, int rank, int size,
                   std::chrono::milliseconds timeout)
      : group_(std::move(group)), rank_(rank), size_(size), timeout_(timeout) {
    world_.resize(size_);
    std::iota(world_.begin(), world_.end(), 0);
  }

  ~GlooCommunicator() override { executor_.reset(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  CommHandle start(CollectiveKind kind, at::Tensor buffer, std::vector<int> group,
                   std::function<void()> then) override {
    if (group.empty()) group = world_;
    check_ring_buffer(buffer, group);
    const double bytes = static_cast<double>(buffer.nbytes());
    return submit_collective(kind, bytes, std::move(group),
                             [this, kind, buffer, then = std::move(then)](
                                 const std::vector<int>& group, int index, int tag) {
                               switch (kind) {
                                 case CollectiveKind::all_gather:
                                   ring_all_gather(buffer, group, index, tag);
                                   break;
                                 case CollectiveKind::reduce_scatter:
                                   ring_reduce_scatter(buffer, group, index, tag);
                                   break;
                                 case CollectiveKind::all_reduce:
                                   ring_reduce_scatter(buffer, group, index, tag);
                                   ring_all_gather(buffer, group, index, tag);
                                   break;
                               }
                               if (then) then();
                             });
  }

  CommHandle start_all_gather(std::vector<at::Tensor> buffers, std::vector<int> group) override {
    if (group.empty()) group = world_;
    double bytes = 0;
    for (const at::Tensor& buffer : buffers) {
      check_ring_buffer(buffer, group);
      bytes += static_cast<double>(buffer.nbytes());
    }
    return submit_collective(
        CollectiveKind::all_gather, bytes, std::move(group),
        [this, buffers = std::move(buffers)](const std::vector<int>& group, int index, int tag) {
          multi_ring_all_gather(buffers, group, index, tag);
        });
  }

  std::vector<CollectiveEvent> take_events() override {
    std::lock_guard lock(events_mutex_);
    std::vector<CollectiveEvent> events;
    events.swap(events_);
    return events;
  }

  // Gloo's send returns at once; the transfer completes when the peer receives.
  CommHandle send(at::Tensor tensor, int peer) override {
    TORCH_CHECK(tensor.is_contiguous(), "point-to-point tensors are contiguous");
    std::vector<at::Tensor> tensors{tensor};
    auto work = group_->send(tensors, peer, transfer_tag(sends_to_, peer));
    // The tensor stays alive with the work until it is waited for.
    auto waiter = std::make_shared<TransferCompletion>(std::move(work), tensor, timeout_, rank_,
                                                       peer, "send to");
    return CommHandle(std::shared_ptr<const CommHandle::Completion>(waiter));
  }

  void receive(at::Tensor tensor, int peer) override {
    TORCH_CHECK(tensor.is_contiguous(), "point-to-point tensors are contiguous");
    std::vector<at::Tensor> tensors{tensor};
    auto work = group_->recv(tensors, peer, transfer_tag(receives_from_, peer));
    TransferCompletion(std::move(work), tensor, timeout_, rank_, peer, "receive from").wait();
  }

  void barrier() override {
    at::Tensor token = at::ones({size_}, at::kFloat);
    run(CollectiveKind::all_reduce, token);
  }

 private:
  // Queues `ring(group, this rank's index, tag)` on the communication thread in issue order: it
  // is not run after an earlier collective failed, its failure fails every later one, and its
  // event is recorded when it succeeds.
  template <typename Ring>
  CommHandle submit_collective(CollectiveKind kind, double bytes, std::vector<int> group,
                               Ring ring) {
    const int index = group_index(group, rank_);
    TORCH_CHECK(index >= 0, "rank ", rank_, " issued a collective of a group it is not in");
    const int tag = collective_tag(group);
    return executor_->submit([this, kind, bytes, group = std::move(group), index, tag,
                              ring = std::move(ring)] {
      if (failure_) std::rethrow_exception(failure_);
      const double start_s = steady_seconds();
      try {
        ring(group, index, tag);
        std::lock_guard lock(events_mutex_);
        events_.push_back({kind, bytes, static_cast<int>(group.size()), start_s, steady_seconds()});
      } catch (...) {
        failure_ = std::current_exception();
        throw;
      }
    });
  }

  static void check_ring_buffer(const at::Tensor& buffer, const std::vector<int>& group) {
    TORCH_CHECK(buffer.is_contiguous() && buffer.dim() == 1,
                "ring buffers are flat and contiguous");
    TORCH_CHECK(buffer.numel() % static_cast<int64_t>(group.size()) == 0, "ring buffer of ",
                buffer.numel(), " elements over ", group.size(), " ranks");
  }

  // Chunk c of a buffer split over the group.
  static at::Tensor chunk(const at::Tensor& buffer, std::size_t ranks, int c) {
    const int64_t length = buffer.numel() / static_cast<int64_t>(ranks);
    return buffer.narrow(0, c * length, length);
  }

  // Step t: send chunk (i - t) to the right neighbour, receive chunk (i - t - 1) from the left.
  void ring_all_gather(const at::Tensor& buffer, const std::vector<int>& group, int i, int tag) {
    const int n = static_cast<int>(group.size());
    for (int t = 0; t < ring_steps(CollectiveKind::all_gather, n); ++t) {
      const int send_chunk = ((i - t) % n + n) % n;
      const int recv_chunk = ((i - t - 1) % n + n) % n;
      at::Tensor receive = chunk(buffer, n, recv_chunk);
      exchange(chunk(buffer, n, send_chunk), receive, group, i, tag, "all-gather", t);
    }
  }

  // ring_all_gather over several buffers at once: each step sends every buffer's chunk and
  // receives every buffer's next one straight into place, all posted before any is waited for
  // (one ring's latency, whatever the number of buffers; packing them into one message held
  // 2/n of their bytes in staging copies beside them: z2's step-start gather peaked 40 % above
  // the parameters it gathered).
  void multi_ring_all_gather(const std::vector<at::Tensor>& buffers, const std::vector<int>& group,
                             int i, int tag) {
    const int n = static_cast<int>(group.size());
    if (n <= 1 || buffers.empty()) return;
    for (int t = 0; t < ring_steps(CollectiveKind::all_gather, n); ++t) {
      const int send_chunk = ((i - t) % n + n) % n;
      const int recv_chunk = ((i - t - 1) % n + n) % n;
      std::vector<at::Tensor> sends;
      std::vector<at::Tensor> receives;
      for (const at::Tensor& buffer : buffers) {
        sends.push_back(chunk(buffer, n, send_chunk));
        receives.push_back(chunk(buffer, n, recv_chunk));
      }
      exchange(sends, receives, group, i, tag, "all-gather", t);
    }
  }

  // Step t: send the partial sum of chunk (i - t - 1) right, receive chunk (i - t - 2) from the
  // left and add it in; after n - 1 steps chunk i holds every rank's contribution.
  void ring_reduce_scatter(const at::Tensor& buffer, const std::vector<int>& group, int i,
                           int tag) {
    const int n = static_cast<int>(group.size());
    if (n <= 1) return;
    at::Tensor incoming = at::empty({buffer.numel() / n}, buffer.options());
    for (int t = 0; t < ring_steps(CollectiveKind::reduce_scatter, n); ++t) {
      const int send_chunk = ((i - t - 1) % n + n) % n;
      const int recv_chunk = ((i - t - 2) % n + n) % n;
      exchange(chunk(buffer, n, send_chunk), incoming, group, i, tag, "reduce-scatter", t);
      chunk(buffer, n, recv_chunk).add_(incoming);
    }
  }

  void exchange(at::Tensor send, at::Tensor receive, const std::vector<int>& group, int i, int tag,
                const char* what, int step) {
    exchange(std::vector<at::Tensor>{std::move(send)}, std::vector<at::Tensor>{std::move(receive)},
             group, i, tag, what, step);
  }

  // Sends each of `sends` right and receives each of `receives` from the left, pairwise in
  // order: one message per tensor under the collective's tag (Gloo matches a pair's messages of
  // one tag in the order they were posted).
  void exchange(const std::vector<at::Tensor>& sends, const std::vector<at::Tensor>& receives,
                const std::vector<int>& group, int i, int tag, const char* what, int step) {
    const int n = static_cast<int>(group.size());
    const int right = group[(i + 1) % n];
    const int left = group[(i - 1 + n) % n];
    std::vector<c10::intrusive_ptr<c10d::Work>> received;
    std::vector<c10::intrusive_ptr<c10d::Work>> sent;
    int peer = left;
    try {
      for (const at::Tensor& receive : receives) {
        std::vector<at::Tensor> tensors{receive};
        received.push_back(group_->recv(tensors, left, tag));
      }
      peer = right;
      for (const at::Tensor& send : sends) {
        std::vector<at::Tensor> tensors{send};
        sent.push_back(group_->send(tensors, right, tag));
      }
      peer = left;
      for (auto& work : received) work->wait(timeout_);
      peer = right;
      for (auto& work : sent) work->wait(timeout_);
    } catch (const std::exception& error) {
      std::string detail = error.what();
      if (const auto newline = detail.find('\n'); newline != std::string::npos)
        detail.resize(newline);
      throw CollectiveError(
          fmt::format("rank {}: {} step {} failed: lost contact with rank {} (it died, hung or "
                      "closed its connection; timeout {} ms): {}",
                      rank_, what, step, peer, timeout_.count(), detail),
          peer);
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::vector<int> world_;
  // Tags pair a message with its receive. A collective's: the group's own count of collectives
  // (every member issues the group's collectives in one order, whatever else it runs) under
  // bits of the group's identity, so that two groups with a pair of ranks in common never
  // match each other's messages. A transfer's: a count per peer and direction, in a range of
  // its own.
  int collective_tag(const std::vector<int>& group) {
    std::uint32_t hash = 2166136261u;  // FNV-1a over the ranks
    for (int rank : group) hash = (hash ^ static_cast<std::uint32_t>(rank)) * 16777619u;
    const long long count = collectives_by_group_[group]++;
    return static_cast<int>(((hash % 1024u) << 20) | static_cast<std::uint32_t>(count % (1 << 20)));
  }
  static int transfer_tag(std::map<int, long long>& counts, int peer) {
    return static_cast<int>((1u << 30) | static_cast<std::uint32_t>(counts[peer]++ % (1 << 30)));
  }

  std::map<std::vector<int>, long long> collectives_by_group_;
  std::map<int, long long> sends_to_;
  std::map<int, long long> receives_from_;
  std::exception_ptr failure_;  // touched only on the communication thread
  std::mutex events_mutex_;
  std::vector<CollectiveEvent> events_;
  std::unique_ptr<SerialExecutor> executor_ = std::make_unique<SerialExecutor>();
};
#else
// A rank alone in a build without Gloo (the calibration's and the one-GPU runs' own
// communicators): a collective over one rank leaves its buffer as it is.
class SoloCommunicator final : public Communicator {
 public:
  explicit SoloCommunicator(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  CommHandle start(CollectiveKind kind, at::Tensor buffer, std::vector<int> group,
                   std::function<void()> then) override {
    TORCH_CHECK(group.empty() || (group.size() == 1 && group.front() == 0),
                "rank 0 alone issued a collective of a group of ", group.size());
    const double start_s = steady_seconds();
    if (then) then();
    events_.push_back({kind, static_cast<double>(buffer.nbytes()), 1, start_s, steady_seconds()});
    return CommHandle();
  }

  void barrier() override {}

  std::vector<CollectiveEvent> take_events() override {
    std::vector<CollectiveEvent> events;
    events.swap(events_);
    return events;
  }

 private:
  std::chrono::milliseconds timeout_;
  std::vector<CollectiveEvent> events_;
};
#endif  // OSDP_HAS_GLOO

}  // namespace

namespace {

c10::intrusive_ptr<c10d::Store> make_store(const ConnectOptions& options) {
  c10::intrusive_ptr<c10d::Store> store;
  if (options.store == ConnectOptions::StoreKind::file) {
    store = c10::make_intrusive<c10d::FileStore>(options.file_store_path, options.world_size);
  } else if (options.store == ConnectOptions::StoreKind::in_process) {
    TORCH_CHECK(options.world_size == 1, "an in-process store serves one rank, not ",
                options.world_size);
    store = c10::make_intrusive<c10d::HashStore>();
  } else {
    c10d::TCPStoreOptions tcp;
    tcp.port = static_cast<std::uint16_t>(options.master_port);
    tcp.isServer = options.rank == 0;
    tcp.numWorkers = options.world_size;
    tcp.waitWorkers = false;
    tcp.timeout = options.timeout;
    store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, tcp);
  }
  store->setTimeout(options.timeout);
  return store;
}

// A rank's group is built once its own connections are; a peer may still be finishing its side.
// Were this rank to tear its group down now (a run with nothing to exchange), the peer would read
// "connection closed by peer". So, as torch.distributed's store-based barrier does, every rank
// returns only when every rank's group is built.
void wait_for_every_rank(c10d::Store& store, const ConnectOptions& options) {
  if (options.world_size == 1) return;
  store.set(fmt::format("osdp-connected/{}", options.rank), std::vector<std::uint8_t>{1});
  std::vector<std::string> keys;
  for (int rank = 0; rank < options.world_size; ++rank) {
    keys.push_back(fmt::format("osdp-connected/{}", rank));
  }
  store.wait(keys, options.timeout);
}

std::unique_ptr<Communicator> connect_gloo(const ConnectOptions& options,
                                           c10::intrusive_ptr<c10d::Store> store) {
#if !OSDP_HAS_GLOO
  (void)store;
  if (options.world_size == 1) return std::make_unique<SoloCommunicator>(options.timeout);
  TORCH_CHECK(false, "rank ", options.rank,
              ": this osdp-runtime was built against a libtorch without Gloo's headers, so it "
              "has no Gloo backend (CPU ranks); use the NCCL backend (validation.device \"cuda\")");
#else
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  gloo_options->devices.push_back(
      options.gloo_hostname.empty()
          ? c10d::ProcessGroupGloo::createDefaultDevice()
          : c10d::ProcessGroupGloo::createDeviceForHostname(options.gloo_hostname));
  gloo_options->threads = 1;
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>("osdp", std::move(store)), options.rank,
      options.world_size, gloo_options);
  return std::make_unique<GlooCommunicator>(std::move(group), options.rank, options.world_size,
                                            options.timeout);
#endif
}

}  // namespace

ConnectOptions local_rank_connection(int rank, int world_size, std::string file_store_path,
                                     std::chrono::milliseconds timeout) {
  ConnectOptions connect;
  connect.rank = rank;
  connect.world_size = world_size;
  connect.store = ConnectOptions::StoreKind::file;
  connect.file_store_path = std::move(file_store_path);
  connect.timeout = timeout;
  return connect;
}

ConnectOptions launched_rank_connection(const RankEnvironment& environment,
                                        std::chrono::milliseconds timeout) {
  ConnectOptions connect;
  connect.rank = environment.rank;
  connect.world_size = environment.world_size;
  connect.store = ConnectOptions::StoreKind::tcp;
  connect.master_addr = environment.master_addr;
  connect.master_port = environment.master_port;
  connect.gloo_hostname = "";
  connect.timeout = timeout;
  return connect;
}

std::unique_ptr<Communicator> Communicator::connect(const ConnectOptions& options) {
  TORCH_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
              "rank ", options.rank, " of ", options.world_size);
#ifndef OSDP_WITH_CUDA_DEVICE
  TORCH_CHECK(options.backend == CommBackend::gloo,
              "the NCCL backend needs a build with -DOSDP_WITH_CUDA=ON");
#endif
  try {
    auto store = make_store(options);
    std::unique_ptr<Communicator> communicator;
#ifdef OSDP_WITH_CUDA_DEVICE
    if (options.backend == CommBackend::nccl) communicator = connect_nccl(options, store);
#endif
    if (!communicator) communicator = connect_gloo(options, store);
    wait_for_every_rank(*store, options);
    return communicator;
  } catch (const c10::Error& error) {
    std::string detail = error.what_without_backtrace();
    if (const auto newline = detail.find('\n'); newline != std::string::npos)
      detail.resize(newline);
    throw CollectiveError(
        fmt::format("rank {}: rendezvous of {} ranks failed within {} ms: {}", options.rank,
                    options.world_size, options.timeout.count(), detail),
        -1);
  }
}

}  // namespace osdp::validate
