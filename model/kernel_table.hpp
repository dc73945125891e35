// Kernel timings by shape, the tables `../shared/data/h100-gemm-bf16.csv` and
// `h100-sdpa-bf16.csv` hold (one GPU, one kernel at a time, not training steps):
//   GEMM:      tokens,k,n,what,hidden,median_s,min_s,tflops
//              A (tokens x k) @ B (k x n); `what` is the block's product: qkv, proj, fc1, fc2
//   attention: batch,heads,seq,head_dim,fwd_s,fwd_bwd_s,fwd_tflops_causal
//              causal scaled-dot-product attention (FlashAttention), forward and forward+backward
// and the compute laws fitted on them, in the cost model's own terms (model/cluster.hpp):
//   a matrix product      fixed_s + 2 tokens k n / flops_per_s
//   attention's scores    FLOPs / score_flops_per_s + rows x score_row_s, rows = batch x heads x
//                         sequence, FLOPs = 2 batch heads sequence^2 head_dim forward (the causal
//                         half of QK^T and PV) and 2.5 times that backward (FlashAttention
//                         recomputes QK^T beside the four gradient products)
// so that a law fitted on one GPU's kernels can time a training step's operators, and a law
// fitted on training steps can be held against the kernels. Bad tables are InputErrors naming
// the file, the line, the column and the value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/cluster.hpp"
#include "model/json_reader.hpp"

namespace osdp {

enum class KernelTableKind { gemm, attention };

struct GemmTiming {
  int line = 0;
  double tokens = 0;
  double k = 0;
  double n = 0;
  std::string what;  // qkv, proj, fc1, fc2
  double hidden = 0;
  double median_s = 0;
  double flops() const { return 2.0 * tokens * k * n; }
};

struct AttentionTiming {
  int line = 0;
  double batch = 0;
  double heads = 0;
  double sequence = 0;
  double head_dim = 0;
  double forward_s = 0;
  double forward_backward_s = 0;
  double forward_flops() const { return 2.0 * batch * heads * sequence * sequence * head_dim; }
  double rows() const { return batch * heads * sequence; }
};

struct KernelTable {
  std::string file;
  KernelTableKind kind = KernelTableKind::gemm;
  std::vector<GemmTiming> gemms;
  std::vector<AttentionTiming> attention;
  int rows() const;
};

// Which kernel table a header line is, if it is one.
std::optional<KernelTableKind> kernel_table_kind(const std::string& header_line);
KernelTable parse_kernel_table(const std::string& text, const std::string& file);
KernelTable read_kernel_table(const std::string& path);

// Backward score FLOPs per forward score FLOP of FlashAttention (model/workload.cpp's too).
inline constexpr double flash_backward_score_flops = 2.5;

// One law fitted on a kernel table, with its figures: per row the measured and fitted seconds,
// and the seconds predicted by the law fitted without the row's group (hidden size for GEMMs,
// sequence length for attention).
struct KernelLawFit {
  std::string name;      // "matrix product", "attention forward", "attention backward"
  std::string group_by;  // "hidden size", "sequence length"
  ComputeLaw law;        // GEMM: fixed_s (per product) and flops_per_s; attention: score terms
  std::vector<int> lines;
  std::vector<double> measured_s;
  std::vector<double> fitted_s;
  std::vector<double> cross_validated_s;
  double fit_mape_percent = 0;
  double fit_max_percent = 0;
  double cv_mape_percent = 0;
  int groups = 0;  // of rows by group_by; with one, nothing is left out (cross_validated_s: fitted)
};

// The table's laws: one for a GEMM table, forward and backward for an attention table.
std::vector<KernelLawFit> fit_kernel_table(const KernelTable& table);

// A product's or an attention pass's seconds under a law, as the fit and the cost model take it.
double matrix_product_s(const ComputeLaw& per_product, double flops);
double score_kernel_s(const ComputeLaw& law, double flops, double rows);

// The cluster with the fitted laws written into its operator laws: a GEMM law as the rate of
// attention, MLP and head and their fixed part (two products a forward call of attention or MLP,
// four backward; the head one and two); an attention law as attention's score rate and per-row
// cost. What the laws do not cover (activation traffic, host floors) is kept.
void apply_kernel_laws(Cluster& cluster, const std::vector<KernelLawFit>& fits);

// What a cluster's laws predict for each row of a kernel table (seconds; an attention row's
// forward + backward), in the table's order; InputError when the cluster has no law to use.
// `source` names where the cluster was written, for a law it lacks.
std::vector<double> predict_kernel_table(const Cluster& cluster, const JsonSource& source,
                                         const KernelTable& table);

}  // namespace osdp
