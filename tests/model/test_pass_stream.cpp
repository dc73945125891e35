#include <catch2/catch.hpp>

#include "model/pass_stream.hpp"

namespace osdp {
namespace {

TEST_CASE("pass stream: without collectives a pass is its compute", "[pass_stream]") {
  PassStream stream(2.0, 2.0);
  const StreamedPassTime time = stream.run({{1.0, 0, 0}, {2.5, 0, 0}});
  CHECK(time.length_s == Approx(3.5));
  CHECK(time.wait_s == 0);
  CHECK(stream.drain_s() == 0);
}

TEST_CASE("pass stream: gathers prefetched one operator ahead", "[pass_stream]") {
  // Apart (GPUs): the first gather is waited for in full (1 s); the second (3 s) runs beside
  // the first compute (2 s) and is waited for 1 s; the third (1 s) queues behind it and is done
  // before the third compute starts.
  PassStream stream(1.0, 1.0);
  const StreamedPassTime time = stream.run({{2.0, 1.0, 0}, {2.0, 3.0, 0}, {2.0, 1.0, 0}});
  CHECK(time.wait_s == Approx(2.0));
  CHECK(time.length_s == Approx(8.0));
  CHECK(stream.drain_s() == 0);
}

TEST_CASE("pass stream: one reduction in flight, the last drained after", "[pass_stream]") {
  PassStream stream(1.0, 1.0);
  // The first reduction (3 s) is issued at 1 s; the second operator ends at 2 s and waits for
  // it until 4 s before issuing its own (1 s), which the drain waits for.
  const StreamedPassTime time = stream.run({{1.0, 0, 3.0}, {1.0, 0, 1.0}});
  CHECK(time.wait_s == Approx(2.0));
  CHECK(time.length_s == Approx(4.0));
  CHECK(stream.drain_s() == Approx(1.0));
}

TEST_CASE("pass stream: the stream carries over to the next pass", "[pass_stream]") {
  PassStream stream(1.0, 1.0);
  // A backward leaves a 3 s reduction in the stream; the next forward's first gather (1 s)
  // queues behind it: the compute waits 4 s.
  CHECK(stream.run({{1.0, 0, 3.0}}).length_s == Approx(1.0));
  const StreamedPassTime next = stream.run({{2.0, 1.0, 0}});
  CHECK(next.wait_s == Approx(4.0));
  CHECK(next.length_s == Approx(6.0));
}

TEST_CASE("pass stream: shared cores slow both while both run", "[pass_stream]") {
  // Two threads on one core's share each (slowdown 2): 4 s of compute beside 2 s of a
  // reduction left by the last pass take 6 s, the work of both at full speed back to back.
  PassStream shared(2.0, 2.0);
  shared.run({{0.0, 0, 2.0}});
  const StreamedPassTime time = shared.run({{4.0, 0, 0}});
  CHECK(time.length_s == Approx(6.0));
  CHECK(time.wait_s == 0);
  // Only the compute slowed (a GPU's kernels beside NCCL's, 1.5): the reduction ends at 2 s,
  // 4/3 s of compute done by then, the other 8/3 at full speed.
  PassStream gpu(1.5, 1.0);
  gpu.run({{0.0, 0, 2.0}});
  CHECK(gpu.run({{4.0, 0, 0}}).length_s == Approx(2.0 + 8.0 / 3.0));
}

TEST_CASE("pass stream: a collective starts once every rank has issued it", "[pass_stream]") {
  // Shared cores (slowdown 2), every rank's issue 1 s after this one's: a 2 s reduction issued
  // at the end of a pass waits 1 s while the next pass's compute runs alone at full speed (1 s
  // of its 4), then both share the cores for 4 s (2 s of compute), then the last 1 s of
  // compute runs alone: 6 s.
  PassStream stream(2.0, 2.0, 1.0);
  stream.run({{0.0, 0, 2.0}});
  CHECK(stream.run({{4.0, 0, 0}}).length_s == Approx(6.0));
  // A gather waited for at once: the other ranks' issue, then its work.
  CHECK(stream.run({{1.0, 0.5, 0}}).wait_s == Approx(1.5));
  // Queued behind earlier work a collective starts when the stream gets to it: both gathers
  // issued at 0 s, every rank's by 1 s; the first runs 1-4 s, the second 4-5 s (not 5-6: its
  // ranks arrived long before), so the second operator waits 0.5 s after the first's 0.5 s.
  PassStream queued(1.0, 1.0, 1.0);
  const StreamedPassTime time = queued.run({{0.5, 3.0, 0}, {1.0, 1.0, 0}});
  CHECK(time.wait_s == Approx(4.0 + 0.5));
  CHECK(time.length_s == Approx(6.0));
  // A reduction's own issue counts: issued at 6 s, it can start at 7 s.
  queued.run({{0.0, 0, 0.5}});
  CHECK(queued.drain_s() == Approx(1.5));
}

}  // namespace
}  // namespace osdp
