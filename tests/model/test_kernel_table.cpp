// Kernel tables (model/kernel_table): GEMM and attention timings by shape, read strictly, and the
// laws fitted on them: exact on timings a law made, cross-validated by shape group, written into
// a cluster where the cost model times operators with them.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "model/cost_model.hpp"
#include "model/input_error.hpp"
#include "model/kernel_table.hpp"
#include "model/workload.hpp"

using namespace osdp;

namespace {

// A GEMM table timed by fixed + FLOPs / rate exactly.
std::string gemm_csv(double fixed_s, double rate) {
  std::string text = "tokens,k,n,what,hidden,median_s,min_s,tflops\n";
  for (double hidden : {768.0, 2048.0, 4096.0}) {
    for (double tokens : {512.0, 4096.0}) {
      for (const auto& [what, k, n] :
           {std::tuple{"qkv", hidden, 3 * hidden}, std::tuple{"fc2", 4 * hidden, hidden}}) {
        const double flops = 2 * tokens * k * n;
        const double t = fixed_s + flops / rate;
        text += fmt::format("{},{},{},{},{},{:.12e},{:.12e},{:.4f}\n", tokens, k, n, what, hidden,
                            t, t, flops / t / 1e12);
      }
    }
  }
  return text;
}

// An attention table timed by FLOPs / rate + rows x row cost, forward and backward.
std::string attention_csv() {
  std::string text = "batch,heads,seq,head_dim,fwd_s,fwd_bwd_s,fwd_tflops_causal\n";
  for (double seq : {512.0, 2048.0, 8192.0}) {
    for (double d : {64.0, 128.0}) {
      const double batch = 32768 / seq, heads = 16;
      const double flops = 2 * batch * heads * seq * seq * d;
      const double rows = batch * heads * seq;
      const double forward = flops / 600e12 + rows * 0.2e-9;
      const double backward = 2.5 * flops / 500e12 + rows * 1.5e-9;
      text += fmt::format("{},{},{},{},{:.12e},{:.12e},{:.4f}\n", batch, heads, seq, d, forward,
                          forward + backward, flops / forward / 1e12);
    }
  }
  return text;
}

}  // namespace

TEST_CASE("a GEMM law fitted on timings it made is that law, in and out of sample",
          "[model][kernel]") {
  const KernelTable table = parse_kernel_table(gemm_csv(30e-6, 700e12), "gemm.csv");
  REQUIRE(table.kind == KernelTableKind::gemm);
  REQUIRE(table.rows() == 12);
  const std::vector<KernelLawFit> fits = fit_kernel_table(table);
  REQUIRE(fits.size() == 1);
  CHECK(fits[0].law.fixed_s == Approx(30e-6).epsilon(1e-6));
  CHECK(*fits[0].law.flops_per_s == Approx(700e12).epsilon(1e-6));
  CHECK(fits[0].fit_mape_percent < 1e-6);
  CHECK(fits[0].cv_mape_percent < 1e-6);  // each hidden size from the others
}

TEST_CASE("an attention law has a FLOP rate and a cost per row, forward and backward",
          "[model][kernel]") {
  const KernelTable table = parse_kernel_table(attention_csv(), "sdpa.csv");
  REQUIRE(table.kind == KernelTableKind::attention);
  const std::vector<KernelLawFit> fits = fit_kernel_table(table);
  REQUIRE(fits.size() == 2);
  CHECK(*fits[0].law.score_flops_per_s == Approx(600e12).epsilon(1e-6));
  CHECK(*fits[0].law.score_row_s == Approx(0.2e-9).epsilon(1e-6));
  CHECK(*fits[1].law.score_flops_per_s == Approx(500e12).epsilon(1e-6));
  CHECK(*fits[1].law.score_row_s == Approx(1.5e-9).epsilon(1e-6));
  CHECK(fits[1].cv_mape_percent < 1e-6);
  // Written into a cluster, the laws time the table's rows back.
  Cluster cluster;
  cluster.gpu.compute_flops_per_s = 100e12;
  apply_kernel_laws(cluster, fits);
  const std::vector<double> predicted =
      predict_kernel_table(cluster, JsonSource{"cluster.json"}, table);
  for (int i = 0; i < table.rows(); ++i) {
    CHECK(predicted[i] == Approx(table.attention[i].forward_backward_s).epsilon(1e-9));
  }
}

TEST_CASE("the cost model pays an attention law's cost per score row", "[model][kernel]") {
  Operator attention;
  attention.kind = OperatorKind::attention;
  attention.forward_flops_per_sample = 10e9;
  attention.score_forward_flops_per_sample = 4e9;
  attention.score_rows_per_sample = 1e6;
  const Workload workload = Workload::chain("one attention", {attention});
  Cluster cluster;
  ComputeLaw law;
  law.flops_per_s = 600e12;
  law.score_flops_per_s = 400e12;
  law.score_row_s = 0.5e-9;
  cluster.gpu.operator_compute["attention"] = {law, law};
  Training training;
  const CostModel model(workload, cluster, training, CostSettings{});
  // 6 GFLOP of GEMMs at 600 TFLOP/s, 4 GFLOP of scores at 400, a million rows at 0.5 ns.
  CHECK(model.forward_compute_s(0).per_sample == Approx(6e9 / 600e12 + 4e9 / 400e12 + 0.5e-3));
}

TEST_CASE("bad kernel tables name the file, the line, the column and the value",
          "[model][kernel]") {
  auto error_of = [](const std::string& text) {
    try {
      parse_kernel_table(text, "k.csv");
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of(""), Catch::Contains("empty file"));
  CHECK_THAT(error_of("tokens,k,n\n1,2,3\n"), Catch::Contains("header"));
  const std::string header = "tokens,k,n,what,hidden,median_s,min_s,tflops\n";
  CHECK_THAT(error_of(header + "512,768,2304,qkv,768,-1,1e-5,60\n512,768,768,proj,768,1,1,1\n"),
             Catch::Contains("line 2") && Catch::Contains("median_s") &&
                 Catch::Contains("a kernel's time"));
  CHECK_THAT(error_of(header + "512,768,2304,gate,768,1e-5,1e-5,60\n"),
             Catch::Contains("what") && Catch::Contains("one of qkv,proj,fc1,fc2"));
  CHECK_THAT(error_of(header + "512,768,2304,qkv,768,1e-5,1e-5\n"), Catch::Contains("7 cells"));
  // Sizes are whole numbers written as such.
  for (const char* k : {"2.5", "0x10", " 512"}) {
    CHECK_THAT(error_of(header + "512," + std::string(k) + ",2304,qkv,768,1e-5,1e-5,60\n"),
               Catch::Contains("column \"k\"") && Catch::Contains("a whole number"));
  }
  // A time below a nanosecond is a unit slip; its errors would print with hundreds of digits.
  CHECK_THAT(error_of(header + "512,768,2304,qkv,768,1e-300,1e-300,60\n"),
             Catch::Contains("median_s") && Catch::Contains("a kernel's time"));
  CHECK_THAT(error_of(header + "512,768,2304,qkv,768,1e-5,1e-5,60\n"),
             Catch::Contains("at least 2"));
  CHECK_THAT(error_of("batch,heads,seq,head_dim,fwd_s,fwd_bwd_s,fwd_tflops_causal\n"
                      "64,16,512,64,2e-4,1e-4,200\n"),
             Catch::Contains("fwd_bwd_s") && Catch::Contains("more than the row's fwd_s"));
}

TEST_CASE("a kernel table that leaves a law without a FLOP rate is refused", "[model][kernel]") {
  auto fit_error = [](const std::string& text) {
    try {
      (void)fit_kernel_table(parse_kernel_table(text, "k.csv"));
    } catch (const InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::string header = "tokens,k,n,what,hidden,median_s,min_s,tflops\n";
  const std::string row = "512,768,2304,qkv,768,2.8843e-05,2.6855e-05,62.82\n";
  // One shape twice: its fixed part and its rate do not come apart.
  CHECK_THAT(fit_error(header + row + row), Catch::StartsWith("k.csv") &&
                                                Catch::Contains("one shape only") &&
                                                Catch::Contains("at least two shapes"));
  // Two shapes, the larger one faster: the rate is left at zero.
  CHECK_THAT(fit_error(header + row + "4096,768,2304,qkv,768,1.0e-05,1.0e-05,62.82\n"),
             Catch::StartsWith("k.csv") && Catch::Contains("no FLOP rate"));
  // One attention shape timed many times: its two constants do not come apart.
  const std::string attention = attention_csv();
  const std::string attention_header = attention.substr(0, attention.find('\n') + 1);
  const std::string one_row =
      attention.substr(attention_header.size(),
                       attention.find('\n', attention_header.size()) + 1 - attention_header.size());
  CHECK_THAT(fit_error(attention_header + one_row + one_row + one_row),
             Catch::StartsWith("k.csv") && Catch::Contains("one shape only"));
  // The laws fitted on timings they made pass.
  CHECK(fit_error(gemm_csv(30e-6, 700e12)) == "no error");
  CHECK(fit_error(attention_csv()) == "no error");
}
