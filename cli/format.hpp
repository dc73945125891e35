// Output helpers shared by the subcommands: aligned text tables, numbers with units, and plans
// compressed into runs of consecutive operators with the same choice.
#pragma once

#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/plan.hpp"
#include "model/workload.hpp"

namespace osdp::cli {

// A plain text table: a header row, then rows; columns padded to their widest cell.
class Table {
 public:
  enum class Align { left, right };
  struct Column {
    std::string header;
    Align align = Align::left;
  };

  explicit Table(std::vector<Column> columns);
  void add_row(std::vector<std::string> cells);
  // Each line starts with `indent`; a dashed rule under the header.
  std::string render(const std::string& indent = "  ") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_throughput(double samples_per_s);  // "123.4 samples/s"
std::string format_percent(double fraction);          // "97.5 %"
std::string format_count(double count);               // "1.31 B", "354 M", "12.0 k"
// A --memory-limit value at least `bytes`, in the unit that reads best: "22.74GiB", "1.9MiB",
// "37KiB" (advice after "nothing fits").
std::string memory_limit_flag_value(double bytes);
// The text's words in lines of at most `width` characters (a longer word alone on its line),
// every line after the first starting with `indent`; newlines in the text are kept.
std::string wrap_words(const std::string& text, std::size_t width = 100,
                       const std::string& indent = "");
// The median of the values (0 for none), for error summaries.
double median(std::vector<double> values);

// "model states 5.20 GiB (dominant), activations 2.10 GiB, transient 600.0 MiB (layer3.mlp)".
std::string describe_peak(const PeakBreakdown& peak, const Workload& workload);

// A run of consecutive operators (execution order) that share one choice.
struct ChoiceRun {
  int first = 0;  // operator indices
  int last = 0;
  int count = 0;
  OperatorChoice choice;
};
std::vector<ChoiceRun> compress_runs(const Workload& workload, const Plan& plan);
// "layer0.attention..layer47.mlp" or the single name.
std::string run_label(const Workload& workload, const ChoiceRun& run);

// The plan in runs, one line each: label, choice, count ("x96").
std::string render_runs(const Workload& workload, const Plan& plan,
                        const std::string& indent = "  ");

}  // namespace osdp::cli
