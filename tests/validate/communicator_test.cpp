#include "tests/validate/rank_threads.hpp"
#include "validate/counting_allocator.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <thread>

using namespace osdp;
using namespace osdp::validate;

TEST_CASE("ring collectives are exact on 3 ranks", "[validate]") {
  testing::run_rank_threads(3, [](Communicator& comm) {
    const int n = comm.size();
    const int r = comm.rank();
    const int64_t chunk = 5;
    // all-gather: chunk c holds c * 10 + element index
    at::Tensor gathered = at::zeros({n * chunk});
    gathered.narrow(0, r * chunk, chunk).copy_(at::arange(chunk) + 10.0 * r);
    comm.run(CollectiveKind::all_gather, gathered);
    for (int c = 0; c < n; ++c) {
      REQUIRE(
          gathered.narrow(0, c * chunk, chunk).equal(at::arange(chunk).to(at::kFloat) + 10.0 * c));
    }
    // reduce-scatter of (rank + 1) * index: chunk r holds sum_ranks (rank + 1) * index
    at::Tensor buffer = at::arange(n * chunk).to(at::kFloat) * (r + 1);
    comm.run(CollectiveKind::reduce_scatter, buffer);
    const double factor = n * (n + 1) / 2.0;
    REQUIRE(buffer.narrow(0, r * chunk, chunk)
                .equal(at::arange(r * chunk, (r + 1) * chunk).to(at::kFloat) * factor));
    // all-reduce, asynchronously, two in flight
    at::Tensor a = at::full({n * 2}, r + 1.0);
    at::Tensor b = at::full({n * 4}, 2.0 * r);
    CommHandle first = comm.start(CollectiveKind::all_reduce, a);
    CommHandle second = comm.start(CollectiveKind::all_reduce, b);
    second.wait();
    first.wait();
    REQUIRE(a.equal(at::full({n * 2}, factor)));
    REQUIRE(b.equal(at::full({n * 4}, 2.0 * (n - 1) * n / 2)));
  });
}

TEST_CASE("ring collectives over subgroups", "[validate]") {
  testing::run_rank_threads(4, [](Communicator& comm) {
    const int r = comm.rank();
    // two groups {0,1}, {2,3} then {0,2}, {1,3}, as hsdp uses them
    std::vector<int> node = {r / 2 * 2, r / 2 * 2 + 1};
    std::vector<int> replicas = {r % 2, r % 2 + 2};
    at::Tensor x = at::full({4}, static_cast<double>(r));
    comm.run(CollectiveKind::all_reduce, x, node);
    REQUIRE(x.equal(at::full({4}, r < 2 ? 1.0 : 5.0)));
    comm.run(CollectiveKind::all_reduce, x, replicas);
    REQUIRE(x.equal(at::full({4}, 6.0)));
  });
}

TEST_CASE("one all-gather of several buffers gathers each as its own all-gather would",
          "[validate]") {
  testing::run_rank_threads(3, [](Communicator& comm) {
    const int n = comm.size();
    const int r = comm.rank();
    // Three buffers of different chunk sizes, each chunk c holding 100 b + 10 c + index; a
    // subgroup too (ranks 0 and 2; rank 1 gathers alone over itself).
    std::vector<at::Tensor> buffers;
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t chunk = 2 + 3 * b;
      at::Tensor buffer = at::full({n * chunk}, -1.0);
      buffer.narrow(0, r * chunk, chunk).copy_(at::arange(chunk) + 100.0 * b + 10.0 * r);
      buffers.push_back(buffer);
    }
    comm.start_all_gather(buffers).wait();
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t chunk = 2 + 3 * b;
      for (int c = 0; c < n; ++c) {
        REQUIRE(buffers[b]
                    .narrow(0, c * chunk, chunk)
                    .equal(at::arange(chunk).to(at::kFloat) + 100.0 * b + 10.0 * c));
      }
    }
    const std::vector<CollectiveEvent> events = comm.take_events();
    REQUIRE(events.size() == 1);  // one collective, every buffer's bytes
    REQUIRE(events.front().bytes == 4.0 * n * (2 + 5 + 8));
    const std::vector<int> pair = r == 1 ? std::vector<int>{1} : std::vector<int>{0, 2};
    at::Tensor a = at::zeros({static_cast<int64_t>(pair.size()) * 2});
    a.narrow(0, group_index(pair, r) * 2, 2).fill_(r + 1.0);
    comm.start_all_gather({a}, pair).wait();
    REQUIRE(a.equal(r == 1 ? at::full({2}, 2.0) : at::tensor({1.0f, 1.0f, 3.0f, 3.0f})));
  });
}

TEST_CASE("an all-gather of several buffers receives in place: nothing held beside them",
          "[validate]") {
  // Staging the chunks in one packed message held 2/n of the buffers' bytes beside them on every
  // rank (z2's step-start gather peaked 16 MiB above the model on the CPU testbed).
  install_counting_allocator();
  testing::run_rank_threads(2, [](Communicator& comm) {
    const int r = comm.rank();
    std::vector<at::Tensor> buffers;
    for (int64_t b = 0; b < 4; ++b) {
      at::Tensor buffer = at::zeros({2 * 65536});  // 512 KiB each
      buffer.narrow(0, r * 65536, 65536).fill_(10.0 * b + r);
      buffers.push_back(buffer);
    }
    comm.barrier();
    if (r == 0) reset_peak_memory();
    comm.barrier();
    const std::int64_t live_bytes = memory_counts().live_bytes;
    comm.start_all_gather(buffers).wait();
    comm.barrier();
    // Both ranks' threads count in one process: a barrier's token is all either allocates.
    if (r == 0) CHECK(memory_counts().peak_bytes - live_bytes < 64 * 1024);
    comm.barrier();  // before either allocates the tensors the checks below compare with
    for (int64_t b = 0; b < 4; ++b) {
      REQUIRE(buffers[b].narrow(0, 0, 65536).equal(at::full({65536}, 10.0f * b)));
      REQUIRE(buffers[b].narrow(0, 65536, 65536).equal(at::full({65536}, 10.0f * b + 1)));
    }
  });
}

TEST_CASE("a wait's exposed communication ends when the collective completed", "[validate]") {
  // A collective that completes 50 ms after it was issued and wakes its waiter 50 ms later still
  // (as a thread that waits for a core after its collective ended): the wait counts until the
  // completion, never the time after it.
  auto promise = std::make_shared<std::promise<void>>();
  auto completed_s = std::make_shared<double>(0.0);
  const CommHandle handle(promise->get_future().share(), completed_s);
  const double before_s = steady_seconds();
  std::thread collective([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    *completed_s = steady_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    promise->set_value();
  });
  const double exposed_s = wait_exposed_s(handle);
  const double wall_s = steady_seconds() - before_s;
  collective.join();
  CHECK(exposed_s > 0.0);
  CHECK(exposed_s <= *completed_s - before_s);
  CHECK(wall_s - exposed_s >= 0.05);
  // Completed before the wait began: nothing exposed.
  CHECK(wait_exposed_s(handle) == 0.0);
}

TEST_CASE("ranks that connect and leave at once never break a peer's connection", "[validate]") {
  // A rank's group is built before its peers' are; one that left at once used to close a
  // connection a peer was still finishing ("Connection closed by peer": once in CI; before the
  // fix this case failed 2 of 10 runs on a loaded 2-core machine). Connecting now returns only
  // once every rank is connected.
  for (int round = 0; round < 20; ++round) {
    CHECK_NOTHROW(testing::run_rank_threads(3, [](Communicator&) {}));
  }
}
