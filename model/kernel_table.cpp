#include "model/kernel_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "model/csv.hpp"
#include "model/input_error.hpp"
#include "model/json_reader.hpp"
#include "model/least_squares.hpp"

namespace osdp {
namespace {

const std::vector<std::string>& gemm_columns() {
  static const std::vector<std::string> columns{"tokens", "k",        "n",     "what",
                                                "hidden", "median_s", "min_s", "tflops"};
  return columns;
}

const std::vector<std::string>& attention_columns() {
  static const std::vector<std::string> columns{
      "batch", "heads", "seq", "head_dim", "fwd_s", "fwd_bwd_s", "fwd_tflops_causal"};
  return columns;
}

const std::vector<std::string> gemm_products{"qkv", "proj", "fc1", "fc2"};

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

// A positive number cell, at most `most` (so that products of sizes stay finite).
double positive(const CsvRow& row, const std::string& column, double most = 1e9) {
  const std::optional<double> value = positive_number(row.cell(column), most);
  if (!value) row.fail(column, fmt::format("a positive number, at most {:g}", most));
  return *value;
}

// A size cell (tokens, a matrix dimension, heads...): a whole number written as one, from 1 to
// `most` (2.5, 0x10 or " 512" are not sizes).
double whole(const CsvRow& row, const std::string& column, long long most = 1'000'000'000) {
  const std::optional<long long> value = whole_number(row.cell(column), most);
  if (!value) row.fail(column, fmt::format("a whole number from 1 to {}", most));
  return static_cast<double>(*value);
}

// A kernel's seconds, within limits::kernel_time_s (1e-300 s would print errors of hundreds
// of digits).
double seconds(const CsvRow& row, const std::string& column) {
  const Range& range = limits::kernel_time_s;
  const std::optional<double> value = positive_number(row.cell(column), range.max);
  if (!value || *value < range.min) {
    row.fail(column, "seconds " + describe_range(range, units::Dimension::seconds));
  }
  return *value;
}

// A law linear in its constants: time = features . constants. Fitted by non-negative least
// squares on the relative error (each row divided by its measured time; columns scaled to unit
// maximum for conditioning).
using Features = std::vector<double>;

std::vector<double> fit_constants(const std::vector<Features>& features,
                                  const std::vector<double>& measured_s,
                                  const std::vector<int>& use) {
  const std::size_t count = features.front().size();
  std::vector<std::vector<double>> a;
  std::vector<double> scale(count, 0.0);
  for (int r : use) {
    Features row = features[r];
    for (std::size_t c = 0; c < count; ++c) {
      row[c] /= measured_s[r];
      scale[c] = std::max(scale[c], std::abs(row[c]));
    }
    a.push_back(std::move(row));
  }
  for (auto& row : a) {
    for (std::size_t c = 0; c < count; ++c) row[c] = scale[c] > 0 ? row[c] / scale[c] : 0.0;
  }
  std::vector<double> x = non_negative_least_squares(a, std::vector<double>(a.size(), 1.0));
  for (std::size_t c = 0; c < count; ++c) x[c] = scale[c] > 0 ? x[c] / scale[c] : 0.0;
  return x;
}

double dot(const Features& features, const std::vector<double>& constants) {
  double sum = 0;
  for (std::size_t c = 0; c < features.size(); ++c) sum += features[c] * constants[c];
  return sum;
}

// Whether the rows determine a law of two constants: some row is not a multiple of the first
// (one shape timed many times, or shapes whose two features keep one ratio, do not).
bool determines_two_constants(const std::vector<Features>& features) {
  const Features& first = features.front();
  for (const Features& row : features) {
    const double cross = first[0] * row[1] - first[1] * row[0];
    if (std::abs(cross) > 1e-9 * std::abs(first[0] * row[1]) + 1e-300) return true;
  }
  return false;
}

// Fits on every row, then once per group without the group's rows, and fills the figures.
KernelLawFit fit_law(const std::string& file, std::string name, std::string group_by,
                     const std::vector<Features>& features, const std::vector<double>& measured_s,
                     const std::vector<double>& group_of, const std::vector<int>& lines,
                     const std::function<ComputeLaw(const std::vector<double>&)>& law_of) {
  KernelLawFit fit;
  if (!determines_two_constants(features)) {
    throw InputError(
        file, "rows",
        fmt::format("timings of one shape only for the {} law ({} rows)", name, features.size()),
        "timings of at least two shapes, so that the law's fixed part and its rate "
        "come apart");
  }
  fit.name = std::move(name);
  fit.group_by = std::move(group_by);
  fit.lines = lines;
  fit.measured_s = measured_s;
  std::vector<int> all(measured_s.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const std::vector<double> constants = fit_constants(features, measured_s, all);
  fit.law = law_of(constants);
  for (const Features& row : features) fit.fitted_s.push_back(dot(row, constants));
  fit.fit_mape_percent = mean_abs_percent_error(fit.fitted_s, measured_s, &fit.fit_max_percent);
  fit.cross_validated_s.assign(measured_s.size(), 0.0);
  const std::set<double> groups(group_of.begin(), group_of.end());
  fit.groups = static_cast<int>(groups.size());
  for (double group : groups) {
    std::vector<int> train;
    for (int i : all) {
      if (group_of[i] != group) train.push_back(i);
    }
    // One group only: nothing to hold out; its own fit stands in.
    const std::vector<double> held =
        train.empty() ? constants : fit_constants(features, measured_s, train);
    for (int i : all) {
      if (group_of[i] == group) fit.cross_validated_s[i] = dot(features[i], held);
    }
  }
  fit.cv_mape_percent = mean_abs_percent_error(fit.cross_validated_s, measured_s);
  return fit;
}

std::vector<KernelLawFit> fit_gemms(const KernelTable& table) {
  std::vector<Features> features;
  std::vector<double> measured, hidden;
  std::vector<int> lines;
  for (const GemmTiming& gemm : table.gemms) {
    features.push_back({1.0, gemm.flops()});
    measured.push_back(gemm.median_s);
    hidden.push_back(gemm.hidden);
    lines.push_back(gemm.line);
  }
  return {fit_law(table.file, "matrix product", "hidden size", features, measured, hidden, lines,
                  [](const std::vector<double>& c) {
                    ComputeLaw law;
                    law.fixed_s = c[0];
                    if (c[1] > 0) law.flops_per_s = 1.0 / c[1];
                    return law;
                  })};
}

std::vector<KernelLawFit> fit_attention(const KernelTable& table) {
  std::vector<KernelLawFit> fits;
  for (bool backward : {false, true}) {
    std::vector<Features> features;
    std::vector<double> measured, sequence;
    std::vector<int> lines;
    for (const AttentionTiming& row : table.attention) {
      const double flops = row.forward_flops() * (backward ? flash_backward_score_flops : 1.0);
      features.push_back({flops, row.rows()});
      measured.push_back(backward ? row.forward_backward_s - row.forward_s : row.forward_s);
      sequence.push_back(row.sequence);
      lines.push_back(row.line);
    }
    fits.push_back(fit_law(table.file, backward ? "attention backward" : "attention forward",
                           "sequence length", features, measured, sequence, lines,
                           [](const std::vector<double>& c) {
                             ComputeLaw law;
                             if (c[0] > 0) law.score_flops_per_s = 1.0 / c[0];
                             law.score_row_s = c[1];
                             return law;
                           }));
  }
  return fits;
}

const ComputeLaw& law_for(const Cluster& cluster, const JsonSource& source, const std::string& kind,
                          bool backward, const std::string& what) {
  const OperatorCompute* compute = cluster.gpu.compute_law(kind);
  if (!compute) {
    throw InputError(source.file, source.path("gpu.operator_compute." + kind), "nothing",
                     fmt::format("a compute law for {} to time the table's {} rows", kind, what));
  }
  return backward ? compute->backward : compute->forward;
}

}  // namespace

int KernelTable::rows() const {
  return static_cast<int>(kind == KernelTableKind::gemm ? gemms.size() : attention.size());
}

std::optional<KernelTableKind> kernel_table_kind(const std::string& header_line) {
  const std::vector<std::string> cells = split_csv_line(without_byte_order_mark(header_line));
  if (cells.empty()) return std::nullopt;
  if (cells.front() == "tokens") return KernelTableKind::gemm;
  if (cells.front() == "batch") return KernelTableKind::attention;
  return std::nullopt;
}

KernelTable parse_kernel_table(const std::string& text, const std::string& file) {
  KernelTable table;
  table.file = file;
  std::stringstream stream(without_byte_order_mark(text));
  std::string line;
  if (!std::getline(stream, line)) {
    throw InputError(file, "header", "an empty file", "a kernel table's header line");
  }
  const std::optional<KernelTableKind> kind = kernel_table_kind(line);
  const std::vector<std::string> columns = split_csv_line(line);
  const std::vector<std::string>& expected =
      kind == KernelTableKind::attention ? attention_columns() : gemm_columns();
  if (!kind || columns != expected) {
    const std::string difference = header_difference(columns, expected);
    throw InputError(file, "header (line 1)", difference.empty() ? line : difference,
                     fmt::format("a GEMM table's header \"{}\" or an attention table's \"{}\"",
                                 joined(gemm_columns()), joined(attention_columns())));
  }
  table.kind = *kind;
  int number = 1;
  while (std::getline(stream, line)) {
    ++number;
    if (line.empty() || line == "\r") continue;
    const std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != columns.size()) {
      throw InputError(file, csv_location(number, ""), fmt::format("{} cells", cells.size()),
                       fmt::format("{} comma-separated cells, one per column", columns.size()));
    }
    const CsvRow row{file, number, columns, cells};
    if (table.kind == KernelTableKind::gemm) {
      GemmTiming gemm{
          number,           whole(row, "tokens"), whole(row, "k"),         whole(row, "n"),
          row.cell("what"), whole(row, "hidden"), seconds(row, "median_s")};
      if (std::find(gemm_products.begin(), gemm_products.end(), gemm.what) == gemm_products.end()) {
        throw InputError(file, csv_location(number, "what"), fmt::format("\"{}\"", gemm.what),
                         "one of " + joined(gemm_products));
      }
      seconds(row, "min_s");
      positive(row, "tflops");
      table.gemms.push_back(std::move(gemm));
    } else {
      AttentionTiming timing{number,
                             whole(row, "batch"),
                             whole(row, "heads"),
                             whole(row, "seq"),
                             whole(row, "head_dim"),
                             seconds(row, "fwd_s"),
                             seconds(row, "fwd_bwd_s")};
      positive(row, "fwd_tflops_causal");
      if (timing.forward_backward_s <= timing.forward_s) {
        throw InputError(file, csv_location(number, "fwd_bwd_s"),
                         fmt::format("\"{}\"", row.cell("fwd_bwd_s")),
                         "more than the row's fwd_s (forward and backward together)");
      }
      table.attention.push_back(timing);
    }
    if (table.rows() > 1'000'000) {
      throw InputError(file, csv_location(number, ""), "more rows", "at most 1,000,000 rows");
    }
  }
  if (table.rows() < 2) {
    throw InputError(file, "rows", fmt::format("{} rows", table.rows()),
                     "at least 2 timed kernels to fit a law of two constants");
  }
  return table;
}

KernelTable read_kernel_table(const std::string& path) {
  return parse_kernel_table(read_input_file(path, "CSV"), path);
}

std::vector<KernelLawFit> fit_kernel_table(const KernelTable& table) {
  const bool gemm = table.kind == KernelTableKind::gemm;
  std::vector<KernelLawFit> fits = gemm ? fit_gemms(table) : fit_attention(table);
  for (const KernelLawFit& fit : fits) {
    // Times that shrink as FLOPs grow leave the rate at zero (one shape is refused before the
    // fit): a law of fixed cost alone, which would time every operator alike.
    const bool has_rate =
        gemm ? fit.law.flops_per_s.has_value() : fit.law.score_flops_per_s.has_value();
    if (!has_rate) {
      throw InputError(table.file, "rows",
                       fmt::format("timings whose {} law has no FLOP rate (its times do not grow "
                                   "with the FLOPs)",
                                   fit.name),
                       "timings of at least two shapes, the larger ones slower");
    }
  }
  return fits;
}

double matrix_product_s(const ComputeLaw& per_product, double flops) {
  return per_product.fixed_s + (per_product.flops_per_s ? flops / *per_product.flops_per_s : 0.0);
}

double score_kernel_s(const ComputeLaw& law, double flops, double rows) {
  const std::optional<double> rate =
      law.score_flops_per_s ? law.score_flops_per_s : law.flops_per_s;
  return (rate ? flops / *rate : 0.0) + rows * law.score_row_s.value_or(0.0);
}

void apply_kernel_laws(Cluster& cluster, const std::vector<KernelLawFit>& fits) {
  auto& laws = cluster.gpu.operator_compute;
  for (const KernelLawFit& fit : fits) {
    if (fit.name == "matrix product") {
      // Products per call: attention (QKV, projection) and MLP (fc1, fc2) two forward, each
      // twice backward (input and weight gradients); the head one forward, two backward.
      for (const auto& [kind, products] :
           {std::pair{"attention", 2.0}, std::pair{"mlp", 2.0}, std::pair{"head", 1.0}}) {
        OperatorCompute& compute = laws[kind];
        compute.forward.flops_per_s = fit.law.flops_per_s;
        compute.forward.fixed_s = products * fit.law.fixed_s;
        compute.backward.flops_per_s = fit.law.flops_per_s;
        compute.backward.fixed_s = 2.0 * products * fit.law.fixed_s;
      }
    } else {
      ComputeLaw& law =
          fit.name == "attention backward" ? laws["attention"].backward : laws["attention"].forward;
      law.score_flops_per_s = fit.law.score_flops_per_s;
      law.score_row_s = fit.law.score_row_s;
    }
  }
}

std::vector<double> predict_kernel_table(const Cluster& cluster, const JsonSource& source,
                                         const KernelTable& table) {
  std::vector<double> predicted;
  if (table.kind == KernelTableKind::gemm) {
    for (const GemmTiming& gemm : table.gemms) {
      const bool attention = gemm.what == "qkv" || gemm.what == "proj";
      ComputeLaw law = law_for(cluster, source, attention ? "attention" : "mlp", false, "GEMM");
      law.fixed_s /= 2.0;  // two products a forward call
      if (!law.flops_per_s) law.flops_per_s = cluster.gpu.compute_flops_per_s;
      if (!law.flops_per_s) {
        throw InputError(source.file, source.path("gpu.operator_compute"), "no rate",
                         "a rate for attention and mlp (or the GPU's compute) to time GEMM rows");
      }
      predicted.push_back(matrix_product_s(law, gemm.flops()));
    }
    return predicted;
  }
  // Without a score rate the attention law's rate, else the GPU's sustained rate, times them.
  auto with_rate = [&](ComputeLaw law) {
    if (!law.score_flops_per_s && !law.flops_per_s)
      law.flops_per_s = cluster.gpu.compute_flops_per_s;
    if (!law.score_flops_per_s && !law.flops_per_s) {
      throw InputError(source.file, source.path("gpu.operator_compute.attention"), "no rate",
                       "a score_rate or rate (or the GPU's compute) to time attention rows");
    }
    return law;
  };
  const ComputeLaw forward = with_rate(law_for(cluster, source, "attention", false, "attention"));
  const ComputeLaw backward = with_rate(law_for(cluster, source, "attention", true, "attention"));
  for (const AttentionTiming& row : table.attention) {
    predicted.push_back(
        score_kernel_s(forward, row.forward_flops(), row.rows()) +
        score_kernel_s(backward, flash_backward_score_flops * row.forward_flops(), row.rows()));
  }
  return predicted;
}

}  // namespace osdp
