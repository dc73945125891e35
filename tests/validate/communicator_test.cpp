#include "tests/validate/rank_threads.hpp"

// libtorch pulls in glog, whose CHECK would shadow Catch's.
#undef CHECK
#include <catch2/catch.hpp>

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
