// A counting CPU allocator: live bytes and their high-water mark, to the byte.
//
// This is the one process-wide hook of the validator: c10::SetCPUAllocator replaces libtorch's
// CPU allocator for the whole process, so the counts cover every tensor of every rank running in
// this process (one rank per process when `osdp validate` forks its ranks; ranks run as threads
// in tests share the counts). Install it once, before tensors whose memory should be counted are
// allocated; tensors allocated earlier are freed through their own deleters and never counted.
#pragma once

#include <cstdint>

namespace osdp::validate {

struct MemoryCounts {
  std::int64_t live_bytes = 0;
  std::int64_t peak_bytes = 0;
};

// Installs the counting allocator (idempotent; thread-safe).
void install_counting_allocator();
bool counting_allocator_installed();
MemoryCounts memory_counts();
// Starts a new high-water mark at the current live bytes.
void reset_peak_memory();

// The host arena (CPU offload on the CPU testbed, where device and host are one memory):
// allocations made on this thread while a HostArenaScope lives are counted apart, in
// host_memory_counts(), not in memory_counts(); their frees go back to the count they came from.
class HostArenaScope {
 public:
  HostArenaScope();
  ~HostArenaScope();
  HostArenaScope(const HostArenaScope&) = delete;
  HostArenaScope& operator=(const HostArenaScope&) = delete;

 private:
  bool outer_;
};
MemoryCounts host_memory_counts();

}  // namespace osdp::validate
