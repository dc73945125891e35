#include "validate/counting_allocator.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <malloc.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

namespace osdp::validate {
namespace {

// Whether this thread's allocations go to the host arena (HostArenaScope).
thread_local bool in_host_arena = false;

struct Counter {
  std::atomic<std::int64_t> live{0};
  std::atomic<std::int64_t> peak{0};

  void add(std::int64_t delta) {
    const std::int64_t now = live.fetch_add(delta) + delta;
    std::int64_t high = peak.load();
    while (now > high && !peak.compare_exchange_weak(high, now)) {
    }
  }
  MemoryCounts counts() const { return {live.load(), peak.load()}; }
};

// Wraps the default CPU allocator; each allocation carries its size in the deleter context.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  // libtorch 1.x's Allocator declares allocate const, 2.x's non-const and adds copy_data: both
  // allocates and copy_data are defined, and each overrides where the base declares it (so no
  // `override` in this class).
  c10::DataPtr allocate(size_t bytes) const {
    c10::DataPtr inner = inner_->allocate(bytes);
    Counter* counter = in_host_arena ? &host_ : &device_;
    auto* record = new Record{inner.release_context(), inner.get_deleter(), bytes, counter};
    void* data = inner.get();
    counter->add(static_cast<std::int64_t>(bytes));
    return {data, record, &CountingAllocator::free, inner.device()};
  }
  c10::DataPtr allocate(size_t bytes) { return std::as_const(*this).allocate(bytes); }
  void copy_data(void* target, const void* source, std::size_t bytes) const {
    std::memcpy(target, source, bytes);
  }

  c10::DeleterFnPtr raw_deleter() const { return nullptr; }

  MemoryCounts counts() const { return device_.counts(); }
  MemoryCounts host_counts() const { return host_.counts(); }
  void reset_peak() { device_.peak.store(device_.live.load()); }

 private:
  struct Record {
    void* inner_context;
    c10::DeleterFnPtr inner_deleter;
    size_t bytes;
    Counter* counter;  // the arena it was counted in
  };

  static void free(void* context) {
    auto* record = static_cast<Record*>(context);
    if (record->inner_deleter != nullptr) record->inner_deleter(record->inner_context);
    record->counter->add(-static_cast<std::int64_t>(record->bytes));
    delete record;
  }

  c10::Allocator* inner_;
  mutable Counter device_;
  mutable Counter host_;
};

// The process-wide instance (see the header); never destroyed, since tensors may outlive main.
CountingAllocator* instance = nullptr;
std::once_flag installed;

}  // namespace

// Freed blocks stay with the process, as the CUDA caching allocator keeps a GPU's: by default
// glibc maps every block of 128 KiB or more afresh and unmaps it when it is freed, so each
// gather buffer of a sharded operator (and each activation) page-faults its memory in again,
// and each unmap interrupts the other cores to flush their TLBs. On the testbed that cost the
// sharded plans 6-10 % of their step (about 100,000 of the fidelity bench's 220,000 page faults),
// which no GPU pays. Blocks up to 32 MiB (glibc's largest threshold) now come from the heap,
// whose top is never given back; the counted live bytes are unchanged.
namespace {
void keep_freed_blocks() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}
}  // namespace

void install_counting_allocator() {
  std::call_once(installed, [] {
    keep_freed_blocks();
    instance = new CountingAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(instance, /*priority=*/100);
  });
}

bool counting_allocator_installed() { return instance != nullptr; }

MemoryCounts memory_counts() { return instance != nullptr ? instance->counts() : MemoryCounts{}; }

void reset_peak_memory() {
  if (instance != nullptr) instance->reset_peak();
}

HostArenaScope::HostArenaScope() : outer_(in_host_arena) { in_host_arena = true; }
HostArenaScope::~HostArenaScope() { in_host_arena = outer_; }

MemoryCounts host_memory_counts() {
  return instance != nullptr ? instance->host_counts() : MemoryCounts{};
}

}  // namespace osdp::validate
