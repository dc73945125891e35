#include "validate/compute_threads.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <thread>

using namespace osdp::validate;

namespace {

int this_thread_nice() {
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

}  // namespace

TEST_CASE("the compute thread yields to communication threads started before it", "[threads]") {
  // Stand-ins for the communicator's threads: started first, they must keep their priority.
  std::promise<void> computed;
  std::promise<int> before;
  std::promise<int> after;
  std::thread communication([&, done = computed.get_future()]() mutable {
    before.set_value(this_thread_nice());
    done.wait();
    after.set_value(this_thread_nice());
  });
  const int communication_nice = before.get_future().get();
  int compute_before = 0;
  int compute_after = 0;
  std::thread compute([&]() {
    compute_before = this_thread_nice();
    let_communication_preempt_compute();
    compute_after = this_thread_nice();
  });
  compute.join();
  computed.set_value();
  communication.join();
  CHECK(compute_after == std::min(19, compute_before + compute_nicer_by));
  if (compute_before < 19) CHECK(compute_after > communication_nice);
  CHECK(after.get_future().get() == communication_nice);
  CHECK(this_thread_nice() == communication_nice);  // the caller's thread only, not the process
}
