// llm-foundry's benchmark table: reading it, expressing its runs, and the shipped scenario's
// predictions on the shipped fit half (every run fitted in memory, so none may be called OOM).
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "model/foundry_fit.hpp"
#include "model/foundry_runs.hpp"
#include "model/foundry_table.hpp"
#include "model/input_error.hpp"

using namespace osdp;

namespace {

const std::string header =
    "Model,SeqLen (T),# GPUs,GPU,MFU,HFU,Model TFLOP,MicroBatchSize,GradAccum,GlobalBatchSize,"
    "Throughput (S/s),Throughput (T/s),Throughput (T/s/GPU),GlobalBatchSize (T),Precision,"
    "MP Mode,Sharding Strategy,Activation Checkpointing,Activation CPUOffload,NumParams";

std::string error_of(const std::string& text) {
  try {
    parse_foundry_table(text, "t.csv");
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

const std::string sources = OSDP_SOURCE_DIR;

}  // namespace

TEST_CASE("the foundry table reads the published header, with or without section and time",
          "[foundry]") {
  const std::string row =
      "7b,2048,16,a100_40gb,50.4,66.3,,16,1,256,4,9000,560,524288,bf16,PURE,FULL_SHARD,True,"
      "False,6658859008";
  const FoundryTable plain = parse_foundry_table(header + "\n" + row + "\n", "t.csv");
  REQUIRE(plain.runs.size() == 1);
  const FoundryRun& run = plain.runs[0];
  CHECK(run.model == "7b");
  CHECK(run.gpus == 16);
  CHECK(run.global_batch == 256);
  CHECK(run.activation_checkpointing);
  CHECK(run.mixed_precision == "PURE");
  // No iter_time_s: GlobalBatchSize (T) / Throughput (T/s).
  REQUIRE(run.iteration_time_s);
  CHECK(*run.iteration_time_s == Approx(524288.0 / 9000.0));
  const FoundryTable timed =
      parse_foundry_table(header + ",section,iter_time_s\n" + row + ",A100 40GB,58.5\n", "t.csv");
  CHECK(*timed.runs[0].iteration_time_s == 58.5);
  CHECK(timed.runs[0].section == "A100 40GB");
  // A configuration to predict leaves the measured columns empty.
  const FoundryTable configs = parse_foundry_table(
      header + "\n7b,2048,16,a100_40gb,,,,16,1,256,,,,,bf16,PURE,FULL_SHARD,True,False,\n",
      "t.csv");
  CHECK_FALSE(configs.runs[0].iteration_time_s);
  CHECK_FALSE(configs.has_times());
}

TEST_CASE("bad foundry tables name the line, the column and the value", "[foundry]") {
  const std::string good_start = header + "\n7b,2048,16,a100_40gb,50,66,,16,1,";
  const std::string good_end = ",4,9000,560,524288,bf16,PURE,FULL_SHARD,True,False,1\n";
  CHECK_THAT(error_of(good_start + "255" + good_end),
             Catch::Contains("line 2") && Catch::Contains("GlobalBatchSize") &&
                 Catch::Contains("MicroBatchSize x GradAccum x # GPUs (256)"));
  CHECK_THAT(error_of(header + "\n7b,2048,16,a100_40gb,50,66,,16,1,256,4,9000,560,524288,"
                               "fp4,PURE,FULL_SHARD,True,False,1\n"),
             Catch::Contains("Precision") && Catch::Contains("\"fp4\""));
  CHECK_THAT(error_of("Model,SeqLen\n"), Catch::Contains("header"));
  CHECK_THAT(error_of(header + "\n7b,2048\n"), Catch::Contains("2 cells"));
  CHECK_THAT(error_of(header + "\n7b,2048,16,a100_40gb,-3,66,,16,1,256,4,9000,560,524288,bf16,"
                               "PURE,FULL_SHARD,True,False,1\n"),
             Catch::Contains("MFU") && Catch::Contains("positive number"));
  CHECK_THAT(error_of(header + "\n"), Catch::Contains("at least one row"));
}

TEST_CASE("a fused cross-entropy keeps the logits once, PyTorch's also the fp32 log-probabilities",
          "[foundry][gpt]") {
  Training training;
  training.precision = Precision::mixed;
  GptSpec torch_loss;
  torch_loss.layers = 2;
  torch_loss.hidden_sizes = {512};
  torch_loss.heads = 8;
  torch_loss.sequence_length = 1024;
  GptSpec fused = torch_loss;
  fused.loss = LossKernel::fused;
  const Operator a = make_gpt(torch_loss, training).op(5);  // the head
  const Operator b = make_gpt(fused, training).op(5);
  const double s = 1024, v = 50257;
  CHECK(a.activation_bytes_per_sample - b.activation_bytes_per_sample == Approx(4 * s * v - 4 * s));
  CHECK(a.workspace_bytes_per_sample == Approx(6 * s * v));  // fp32 grads + bf16 logits' grads
  CHECK(b.workspace_bytes_per_sample == Approx(2 * s * v));
  CHECK(a.forward_flops_per_sample == b.forward_flops_per_sample);
}

TEST_CASE("a foundry run is FSDP with one unit per block, checkpointed inside the unit",
          "[foundry]") {
  const Scenario scenario = load_scenario(sources + "/scenarios/llmfoundry-mpt.json");
  const FoundrySetup setup = read_foundry_setup(scenario);
  FoundryRun run;
  run.model = "1b";
  run.sequence_length = 2048;
  run.gpus = 16;
  run.gpu = "a100_40gb";
  run.micro_batch = 4;
  run.accumulation_steps = 2;
  run.global_batch = 128;
  run.precision = "bf16";
  run.mixed_precision = "PURE";
  run.sharding = "FULL_SHARD";
  run.activation_checkpointing = true;
  const Scenario on_run = foundry_scenario_for_run(scenario, setup, run);
  const GptSpec& spec = *on_run.gpt;
  CHECK(on_run.cluster.ranks == 16);
  CHECK(on_run.cluster.gpus_per_node == 8);
  // Embedding, one unit per block, head.
  CHECK(on_run.workload->size() == spec.layers + 2);
  CHECK(on_run.training.gradient_reduce == ReducePrecision::parameters);
  CHECK(on_run.training.accumulation_steps == 2);
  const Plan plan = foundry_plan_for_run(on_run, run);
  for (int i = 0; i < on_run.workload->size(); ++i) {
    CHECK(plan.choices[i].mode == Mode::zdp);
    const bool block = i > 0 && i < on_run.workload->size() - 1;
    CHECK(plan.choices[i].checkpoint == (block ? Checkpoint::fused : Checkpoint::none));
  }
  run.sharding = "SHARD_GRAD_OP";
  run.mixed_precision = "DEFAULT";
  const Scenario z2 = foundry_scenario_for_run(scenario, setup, run);
  CHECK(z2.training.gradient_reduce == ReducePrecision::fp32);
  CHECK(foundry_plan_for_run(z2, run).choices[1].mode == Mode::z2);
  CHECK(foundry_plan_for_run(z2, run).choices[1].checkpoint == Checkpoint::unfused);
  run.gpu = "tpu_v5";
  CHECK_THROWS_WITH(foundry_scenario_for_run(scenario, setup, run),
                    Catch::Contains("tpu_v5") && Catch::Contains("a100_40gb"));
}

TEST_CASE(
    "the shipped scenario calls none of the measured runs out of memory and predicts them "
    "within 7 %",
    "[foundry]") {
  const Scenario scenario = load_scenario(sources + "/scenarios/llmfoundry-mpt.json");
  const FoundrySetup setup = read_foundry_setup(scenario);
  const FoundryTable table =
      read_foundry_table(sources + "/scenarios/measurements/foundry-fsdp-fit.csv");
  REQUIRE(table.runs.size() == 92);
  double sum = 0;
  for (const FoundryRun& run : table.runs) {
    const FoundryPrediction p = predict_foundry_run(scenario, setup, run);
    INFO(run.model << " seq " << run.sequence_length << " on " << run.gpus << " " << run.gpu
                   << " micro " << run.micro_batch);
    CHECK(p.fits());
    // And not absurdly far under: the runs were tuned to fill the GPU.
    CHECK(p.cost.peak_memory_bytes > 0.2 * p.memory_bytes);
    sum += std::abs(p.cost.iteration_time_s - *run.iteration_time_s) / *run.iteration_time_s;
  }
  CHECK(100.0 * sum / table.runs.size() < 7.0);
}

TEST_CASE("the foundry fit recovers constants it generated the times from", "[foundry]") {
  // Times predicted with the shipped constants, then fitted from a fixed start: the fit must
  // find them again (the model is exact for its own data).
  const Scenario scenario = load_scenario(sources + "/scenarios/llmfoundry-mpt.json");
  const FoundrySetup setup = read_foundry_setup(scenario);
  FoundryTable table = read_foundry_table(sources + "/scenarios/measurements/foundry-fsdp-fit.csv");
  std::vector<FoundryRun> a100;
  for (const FoundryRun& run : table.runs) {
    if (run.gpu == "a100_80gb") a100.push_back(run);
  }
  table.runs = a100;
  for (FoundryRun& run : table.runs) {
    run.iteration_time_s = predict_foundry_run(scenario, setup, run).cost.iteration_time_s;
  }
  const FoundryFitResult fit = fit_foundry_table(scenario, setup, table);
  CHECK(fit.fit_mape_percent < 0.05);
  const ComputeLaw& shipped =
      setup.gpus.at("a100_80gb").cluster.gpu.operator_compute.at("mlp").forward;
  const ComputeLaw& found =
      fit.fitted.gpus.at("a100_80gb").cluster.gpu.operator_compute.at("mlp").forward;
  CHECK(*found.flops_per_s == Approx(*shipped.flops_per_s).epsilon(0.01));
  CHECK(*found.score_flops_per_s == Approx(*shipped.score_flops_per_s).epsilon(0.02));
}
