#include "validate/cuda/nccl_communicator.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <cstdlib>
#include <map>
#include <numeric>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

// PyTorch 2.4 on wants a process group shut down before it is destroyed (destroying a live one
// warns, and at exit can crash in NCCL's watchdog); 1.13 has no shutdown.
#define OSDP_NCCL_HAS_SHUTDOWN \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace osdp::validate {
namespace {

using EventPtr = std::shared_ptr<at::cuda::CUDAEvent>;

EventPtr timing_event() { return std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault); }

// Done when the communication stream passes `done`; waiting queues the caller's stream behind
// it (the host does not block, as with NCCL in PyTorch).
class EventCompletion final : public CommHandle::Completion {
 public:
  EventCompletion(EventPtr done, c10::DeviceIndex device)
      : done_(std::move(done)), device_(device) {}
  bool ready() const override { return done_->query(); }
  void wait() const override { done_->block(c10::cuda::getCurrentCUDAStream(device_)); }

 private:
  EventPtr done_;
  c10::DeviceIndex device_;
};

// A collective whose times are read from its events once the stream is past them.
struct TimedCollective {
  CollectiveKind kind;
  double bytes;
  int ranks;
  EventPtr start;
  EventPtr end;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const ConnectOptions& options, c10::intrusive_ptr<c10d::Store> store)
      : store_(std::move(store)),
        rank_(options.rank),
        size_(options.world_size),
        device_(static_cast<c10::DeviceIndex>(options.cuda_device)),
        timeout_(options.timeout),
        lane_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_)) {
    world_.resize(size_);
    std::iota(world_.begin(), world_.end(), 0);
    process_group(world_);
  }

  ~NcclCommunicator() override {
    try {
      lane_.synchronize();
    } catch (...) {
      // A failed collective was reported where it was waited for.
    }
#if OSDP_NCCL_HAS_SHUTDOWN
    for (auto& [ranks, group] : groups_) {
      try {
        group->shutdown();
      } catch (...) {
        // Shutting down after a failure: the failure was reported where it happened.
      }
    }
#endif
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  CommHandle start(CollectiveKind kind, at::Tensor buffer, std::vector<int> group,
                   std::function<void()> then) override {
    if (group.empty()) group = world_;
    const int index = group_index(group, rank_);
    TORCH_CHECK(index >= 0, "rank ", rank_, " issued a collective of a group it is not in");
    TORCH_CHECK(buffer.is_cuda() && buffer.is_contiguous() && buffer.dim() == 1,
                "NCCL buffers are flat, contiguous CUDA tensors");
    TORCH_CHECK(buffer.numel() % static_cast<int64_t>(group.size()) == 0, "buffer of ",
                buffer.numel(), " elements over ", group.size(), " ranks");
    c10d::ProcessGroupNCCL& process_group = this->process_group(group);
    TimedCollective timed{kind, static_cast<double>(buffer.nbytes()),
                          static_cast<int>(group.size()), timing_event(), timing_event()};
    // One lane in issue order, as the Gloo rings: the collective starts once its buffer is
    // ready on the caller's stream and every earlier collective (and its `then`) is done.
    at::cuda::CUDAEvent buffer_ready;
    buffer_ready.record(c10::cuda::getCurrentCUDAStream(device_));
    buffer_ready.block(lane_);
    timed.start->record(lane_);
    try {
      c10::cuda::CUDAStreamGuard on_lane(lane_);
      c10::intrusive_ptr<c10d::Work> work = issue(process_group, kind, buffer, index, group.size());
      work->wait();  // queues the lane behind NCCL's stream; the host goes on
      if (then) then();
      timed.end->record(lane_);
    } catch (const std::exception& error) {
      throw CollectiveError(fmt::format("rank {}: NCCL {} over {} ranks failed: {}", rank_,
                                        collective_name(kind), group.size(), error.what()),
                            -1);
    }
    // The caller may drop the buffer now: the caching allocator keeps it until the lane is
    // past its last use.
    c10::cuda::CUDACachingAllocator::recordStream(buffer.storage().data_ptr(), lane_);
    EventPtr done = timed.end;
    pending_.push_back(std::move(timed));
    return CommHandle(std::make_shared<EventCompletion>(std::move(done), device_));
  }

  void barrier() override {
    at::Tensor token = at::ones(
        {size_}, at::TensorOptions().dtype(at::kFloat).device(c10::DeviceType::CUDA, device_));
    run(CollectiveKind::all_reduce, token);
    c10::cuda::getCurrentCUDAStream(device_).synchronize();
  }

  // CUDA events measure time between one another: they are tied to the steady clock through
  // one event recorded and read now.
  std::vector<CollectiveEvent> take_events() override {
    std::vector<TimedCollective> timed;
    timed.swap(pending_);
    lane_.synchronize();
    at::cuda::CUDAEvent now(cudaEventDefault);
    now.record(lane_);
    now.synchronize();
    const double now_s = steady_seconds();
    std::vector<CollectiveEvent> events;
    events.reserve(timed.size());
    for (const TimedCollective& collective : timed) {
      events.push_back({collective.kind, collective.bytes, collective.ranks,
                        now_s - 1e-3 * collective.start->elapsed_time(now),
                        now_s - 1e-3 * collective.end->elapsed_time(now)});
    }
    return events;
  }

 private:
  // In place: the rank's chunk of the buffer is NCCL's send (all-gather) or receive
  // (reduce-scatter) buffer, which NCCL supports without a copy.
  static c10::intrusive_ptr<c10d::Work> issue(c10d::ProcessGroupNCCL& group, CollectiveKind kind,
                                              at::Tensor& buffer, int index, std::size_t ranks) {
    const int64_t length = buffer.numel() / static_cast<int64_t>(ranks);
    at::Tensor own_chunk = buffer.narrow(0, index * length, length);
    switch (kind) {
      case CollectiveKind::all_gather:
        return group._allgather_base(buffer, own_chunk);
      case CollectiveKind::reduce_scatter:
        return group._reduce_scatter_base(own_chunk, buffer);
      case CollectiveKind::all_reduce:
        break;
    }
    std::vector<at::Tensor> tensors{buffer};
    return group.allreduce(tensors);
  }

  c10d::ProcessGroupNCCL& process_group(const std::vector<int>& group) {
    auto found = groups_.find(group);
    if (found == groups_.end()) {
      std::string prefix = "osdp-nccl";
      for (const int rank : group) prefix += fmt::format("-{}", rank);
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout_;
      found = groups_
                  .emplace(group,
                           c10::make_intrusive<c10d::ProcessGroupNCCL>(
                               c10::make_intrusive<c10d::PrefixStore>(prefix, store_),
                               group_index(group, rank_), static_cast<int>(group.size()), options))
                  .first;
    }
    return *found->second;
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  int size_;
  c10::DeviceIndex device_;
  std::chrono::milliseconds timeout_;
  c10::cuda::CUDAStream lane_;
  std::vector<int> world_;
  std::map<std::vector<int>, c10::intrusive_ptr<c10d::ProcessGroupNCCL>> groups_;
  std::vector<TimedCollective> pending_;  // issued since the last take_events()
};

}  // namespace

std::unique_ptr<Communicator> connect_nccl(const ConnectOptions& options,
                                           c10::intrusive_ptr<c10d::Store> store) {
  // Without it a collective whose peer died hangs forever in libtorch 1.13; with it NCCL's
  // watchdog aborts after the timeout (the launcher then names the rank that died). A value the
  // user set wins. PyTorch 2.x reads it under the second name.
  ::setenv("NCCL_ASYNC_ERROR_HANDLING", "1", /*overwrite=*/0);
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", /*overwrite=*/0);
  return std::make_unique<NcclCommunicator>(options, std::move(store));
}

}  // namespace osdp::validate
