#include "validate/counting_allocator.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>

namespace osdp::validate {
namespace {

// Wraps the default CPU allocator; each allocation carries its size in the deleter context.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t bytes) const override {
    c10::DataPtr inner = inner_->allocate(bytes);
    auto* record = new Record{inner.release_context(), inner.get_deleter(), bytes,
                              const_cast<CountingAllocator*>(this)};
    void* data = inner.get();
    add(static_cast<std::int64_t>(bytes));
    return {data, record, &CountingAllocator::free, inner.device()};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  MemoryCounts counts() const { return {live_.load(), peak_.load()}; }
  void reset_peak() { peak_.store(live_.load()); }

 private:
  struct Record {
    void* inner_context;
    c10::DeleterFnPtr inner_deleter;
    size_t bytes;
    CountingAllocator* owner;
  };

  static void free(void* context) {
    auto* record = static_cast<Record*>(context);
    if (record->inner_deleter != nullptr) record->inner_deleter(record->inner_context);
    record->owner->add(-static_cast<std::int64_t>(record->bytes));
    delete record;
  }

  void add(std::int64_t delta) const {
    const std::int64_t live = live_.fetch_add(delta) + delta;
    std::int64_t peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
  }

  c10::Allocator* inner_;
  mutable std::atomic<std::int64_t> live_{0};
  mutable std::atomic<std::int64_t> peak_{0};
};

// The process-wide instance (see the header); never destroyed, since tensors may outlive main.
CountingAllocator* instance = nullptr;
std::once_flag installed;

}  // namespace

void install_counting_allocator() {
  std::call_once(installed, [] {
    instance = new CountingAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(instance, /*priority=*/100);
  });
}

bool counting_allocator_installed() { return instance != nullptr; }

MemoryCounts memory_counts() { return instance != nullptr ? instance->counts() : MemoryCounts{}; }

void reset_peak_memory() {
  if (instance != nullptr) instance->reset_peak();
}

}  // namespace osdp::validate
