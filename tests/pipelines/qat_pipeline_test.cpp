// The QAT pipeline as a library call on a tiny classifier with the caller's own graph and data:
// steps and epochs as the data and batch size give them, float top-1 as ATen computes it, files
// and report.json, the training hooks; a stop request leaves a checkpoint and nothing else; the
// --algo table; bad settings before any file.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>

#include "core/files.h"
#include "pipelines/qat_pipeline.h"
#include "support/checks.h"
#include "tiny_classifier.h"

namespace qforge::testing {
namespace {

nlohmann::json lsqPatch() {
  return {{"weight", {{"fake_quantizer", "LSQ"}}},
          {"activation", {{"symmetric", true}, {"unsigned", false}, {"fake_quantizer", "LSQ"}}}};
}

struct TinyQat {
  TempDir dir{"qat-pipeline"};
  Graph graph = linearClassifier();
  pipelines::QatPipelineOptions o;

  TinyQat() {
    o.graph = &graph;
    o.model_path = "tiny classifier";
    o.backend = writeBackend(dir.file("tiny.json"), lsqPatch());
    o.data = classifierData(36, 3, "training tensors");  // 4 batches of 8, 4 samples left out
    o.training.epochs = 2;
    o.training.batch_size = 8;
    o.training.lr = 0.01;
    o.calib_batches = 2;
    o.calib_batch = 8;
    o.out = dir.file("out");
  }
};

TEST(QatPipeline, TrainsATinyClassifierAndWritesItsReport) {
  TinyQat t;
  t.o.eval = classifierData(50, 4, "evaluation tensors");
  t.o.eval_batch = 20;
  t.o.csv = t.dir.file("metrics.csv");
  int starts = 0, ends = 0;
  t.o.training_starts = [&] { ++starts; };
  t.o.training_ends = [&] { ++ends; };
  std::vector<pipelines::ProgressEvent> events;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(
      t.o, [&](const pipelines::ProgressEvent& e) { events.push_back(e); });
  const pipelines::QatPipelineReport& report = r.report;

  EXPECT_EQ(starts, 1);
  EXPECT_EQ(ends, 1);
  EXPECT_EQ(report.model, "tiny classifier");
  EXPECT_EQ(report.backend, "Tiny");
  EXPECT_EQ(report.algorithm, "backend default");
  EXPECT_EQ(report.calibration.data, "training tensors");  // no calib: the training data
  EXPECT_EQ(report.calibration.samples, 16);
  EXPECT_EQ(report.training.steps_run, 8);  // floor(36 / 8) steps x 2 epochs
  EXPECT_EQ(report.training.global_step, 8);
  EXPECT_EQ(report.training.samples_run, 64);
  ASSERT_EQ(report.training.epochs.size(), 2u);
  EXPECT_EQ(report.training.epochs[1].steps, 4);
  EXPECT_FALSE(report.training.interrupted);
  EXPECT_EQ(report.batch_size, 8);
  EXPECT_EQ(report.world_size, 1);
  EXPECT_EQ(report.batchnorms_merged, 0);
  EXPECT_EQ(report.checkpoint, t.o.out + "/checkpoint.pt");

  // Float top-1 in percent from ATen's addmm on the 50 evaluation samples.
  const at::Tensor x = classifierInputs(50, 4), labels = classifierLabels(x, 4);
  const int64_t float_correct =
      correct(at::addmm(classifierBias(), x, classifierWeight().t()), labels);
  ASSERT_TRUE(report.float_top1 && report.ptq_top1 && report.qat_top1);
  EXPECT_DOUBLE_EQ(*report.float_top1, 100.0 * float_correct / 50);
  // The trained model as returned and as evaluated.
  const at::Tensor y = r.model->executor().run({{"x", x}}).at("y");
  EXPECT_DOUBLE_EQ(*report.qat_top1, 100.0 * correct(y, labels) / 50);
  EXPECT_EQ(report.eval_data, "evaluation tensors");
  for (const auto& e : report.training.epochs)
    EXPECT_GE(e.eval_metric, 0);

  for (const char* name : {"checkpoint.pt", "prepared.onnx", "model.qdq.onnx", "report.json"})
    EXPECT_TRUE(std::filesystem::exists(t.o.out + "/" + name)) << name;
  EXPECT_EQ(report.files.back(), t.o.out + "/report.json");
  EXPECT_EQ(readFile(t.o.out + "/report.json"), pipelines::qatReportJson(report).dump(2) + "\n");
  EXPECT_EQ(readFile(t.o.csv), pipelines::qatEpochsCsv(report.training.epochs));
  EXPECT_TRUE(report.total_seconds.has_value());

  // Training progress: one event per step, paused (ended) before each evaluation and at the end.
  int steps = 0, pauses = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e.stage, "train");
    if (e.last) {
      ++pauses;
      continue;
    }
    ++steps;
    EXPECT_EQ(e.done, steps);
    EXPECT_EQ(e.total, 8);
    EXPECT_EQ(e.unit, "step");
  }
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(pauses, 3);
}

TEST(QatPipeline, AStopRequestLeavesACheckpointAndNothingElse) {
  TinyQat t;
  std::atomic<bool> stop{true};
  t.o.training.stop = &stop;
  int ends = 0;
  t.o.training_ends = [&] { ++ends; };
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);
  EXPECT_TRUE(r.report.training.interrupted);
  EXPECT_EQ(r.report.training.global_step, 1);  // stopped after the step that saw the request
  EXPECT_EQ(ends, 1);
  EXPECT_TRUE(std::filesystem::exists(t.o.out + "/checkpoint.pt"));
  EXPECT_FALSE(std::filesystem::exists(t.o.out + "/prepared.onnx"));
  EXPECT_FALSE(std::filesystem::exists(t.o.out + "/report.json"));
  const nlohmann::json j = pipelines::qatReportJson(r.report);
  EXPECT_EQ(j["interrupted"], true);
  EXPECT_FALSE(j.contains("files") || j.contains("batchnorms_merged") ||
               j.contains("seconds_total"));

  // Resumed from that directory, the run finishes where an uninterrupted one ends.
  stop = false;
  t.o.resume = t.o.out;
  t.o.out.clear();
  const pipelines::QatPipelineResult resumed = pipelines::runQatPipeline(t.o);
  EXPECT_TRUE(resumed.report.training.resumed);
  EXPECT_EQ(resumed.report.training.resumed_at_step, 1);
  EXPECT_EQ(resumed.report.training.global_step, 8);
  EXPECT_TRUE(std::filesystem::exists(t.o.resume + "/prepared.onnx"));
}

TEST(QatPipeline, BadSettingsFailBeforeAnyFileIsWritten) {
  TinyQat t;
  const auto failure = [&](void (*change)(pipelines::QatPipelineOptions&)) {
    pipelines::QatPipelineOptions changed = t.o;
    change(changed);
    return errorOf([&] { pipelines::runQatPipeline(changed); });
  };
  EXPECT_EQ(failure([](pipelines::QatPipelineOptions& c) { c.out.clear(); }),
            "give --out DIR (or --resume DIR to continue a run there)");
  EXPECT_EQ(failure([](pipelines::QatPipelineOptions& c) { c.calib_batches = 0; }),
            "--calib-batches and --calib-batch must be at least 1");
  EXPECT_EQ(failure([](pipelines::QatPipelineOptions& c) { c.training.label_smoothing = -0.5; }),
            "--label-smoothing must be in [0, 1); got -0.5");
  EXPECT_NE(failure([](pipelines::QatPipelineOptions& c) {
              c.resume = "/nowhere";
            }).find("--resume /nowhere: no checkpoint.pt there"),
            std::string::npos);
  EXPECT_EQ(failure([](pipelines::QatPipelineOptions& c) { c.algo = "lsqq"; }),
            "unknown QAT algorithm 'lsqq'; known: lsq, lsq+, pact, dsq, dorefa, tqt");
  EXPECT_EQ(failure([](pipelines::QatPipelineOptions& c) {
              c.passes = "fold-bn,nonsense";
            }).rfind("--passes: ", 0),
            0u);
  EXPECT_FALSE(std::filesystem::exists(t.o.out));

  // Too little data for one batch: the trainer refuses, and training's end hook still runs.
  int ends = 0;
  pipelines::QatPipelineOptions small = t.o;
  small.data = classifierData(5, 3, "five");
  small.calib = classifierData(16, 3, "calib");
  small.deploy = false;
  small.training_ends = [&] { ++ends; };
  EXPECT_NE(errorOf([&] {
              pipelines::runQatPipeline(small);
            }).find("5 samples, fewer than one batch of 8"),
            std::string::npos);
  EXPECT_EQ(ends, 1);
}

TEST(QatPipeline, RunsTheGivenGraphPassesThenPlacementKeepingBatchNorm) {
  TinyQat t;
  t.o.passes = "constants-to-initializers";
  t.o.deploy = false;
  t.o.training.epochs = 1;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);
  std::vector<std::string> ran;
  for (const passes::PassRecord& p : r.model->passRecords())
    ran.push_back(p.name);
  ASSERT_GE(ran.size(), 2u);
  EXPECT_EQ(ran.front(), "constants-to-initializers");
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "fold-bn"), 0);  // QAT trains BatchNorm
  EXPECT_EQ(std::count(ran.begin(), ran.end(), "insert-fake-quant"), 1);
}

TEST(QatPipeline, WithoutLabelsTheLossDistillsTheFloatModel) {
  TinyQat t;
  t.o.data = std::make_shared<TensorDataset>(classifierInputs(32, 3), at::Tensor(), "unlabelled");
  t.o.calib = classifierData(16, 3, "calib");
  t.o.deploy = false;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);
  EXPECT_EQ(r.report.loss, "distillation (mse)");
  ASSERT_EQ(r.report.training.epochs.size(), 2u);
  for (const algos::QatEpochResult& e : r.report.training.epochs) {
    EXPECT_TRUE(std::isfinite(e.loss));
    EXPECT_GE(e.loss, 0.0);
    EXPECT_EQ(e.train_top1, -1);  // nothing to score without labels
  }

  // Labelled data keeps cross entropy; kl is there on request.
  TinyQat labelled;
  labelled.o.deploy = false;
  EXPECT_EQ(pipelines::runQatPipeline(labelled.o).report.loss, "cross entropy");
  TinyQat kl;
  kl.o.deploy = false;
  kl.o.loss = "kl";
  EXPECT_EQ(pipelines::runQatPipeline(kl.o).report.loss, "distillation (kl)");
  TinyQat bad;
  bad.o.loss = "hinge";
  EXPECT_EQ(errorOf([&] { pipelines::runQatPipeline(bad.o); }),
            "--loss: unknown loss 'hinge'; known: auto, cross-entropy, mse, kl");
  EXPECT_FALSE(std::filesystem::exists(bad.o.out));
}

TEST(QatPipeline, DistillingASoftmaxOutputComparesScoresWithBatchNormFrozen) {
  TinyQat t;
  Node* softmax = t.graph.addNode("Softmax", {t.graph.outputs().front()}, {"p"}, "softmax");
  softmax->attributes.set(Attribute::makeInt("axis", 1));
  t.graph.setOutputs({softmax->output(0)});
  t.o.data = std::make_shared<TensorDataset>(classifierInputs(32, 3), at::Tensor(), "unlabelled");
  t.o.calib = classifierData(16, 3, "calib");
  t.o.deploy = false;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);  // loss "auto"
  EXPECT_EQ(r.report.loss, "distillation (kl, on the scores the output's Softmax reads)");
  ASSERT_EQ(r.report.training.epochs.size(), 2u);
  for (const algos::QatEpochResult& e : r.report.training.epochs)
    EXPECT_TRUE(e.bn_frozen);

  // An epoch the caller gives stands, -1 (never) included; MSE compares the probabilities.
  TinyQat chosen;
  chosen.graph = t.graph.clone();
  chosen.o.data = t.o.data;
  chosen.o.calib = t.o.calib;
  chosen.o.deploy = false;
  chosen.o.loss = "mse";
  chosen.o.freeze_bn_epoch_given = true;
  const pipelines::QatPipelineResult given = pipelines::runQatPipeline(chosen.o);
  EXPECT_EQ(given.report.loss, "distillation (mse)");
  for (const algos::QatEpochResult& e : given.report.training.epochs)
    EXPECT_FALSE(e.bn_frozen);
}

// The tiny classifier with Softmax(axis 1) after its scores y, trained for one step on one
// labelled batch of 8 (made from `seed`).
struct SoftmaxOneStep : TinyQat {
  at::Tensor x, labels;
  explicit SoftmaxOneStep(int64_t seed) {
    Node* softmax = graph.addNode("Softmax", {graph.outputs().front()}, {"p"}, "softmax");
    softmax->attributes.set(Attribute::makeInt("axis", 1));
    graph.setOutputs({softmax->output(0)});
    x = classifierInputs(8, seed);
    labels = classifierLabels(x, seed);
    o.data = std::make_shared<TensorDataset>(x, labels, "one batch");
    o.calib = classifierData(16, 3, "calib");
    o.deploy = false;
    o.training.epochs = 1;
  }
};

TEST(QatPipeline, CrossEntropyOfASoftmaxClassifierReadsItsScores) {
  SoftmaxOneStep t(5);
  const at::Tensor& x = t.x;
  const at::Tensor& labels = t.labels;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);
  EXPECT_EQ(r.report.loss, "cross entropy, on the scores the output's Softmax reads");
  // One step: the loss is the cross entropy of the (8-bit) scores, not of the probabilities
  // taken as scores (0.84 here, against 0.59 for the scores).
  ASSERT_EQ(r.report.training.epochs.size(), 1u);
  const at::Tensor scores = at::addmm(classifierBias(), x, classifierWeight().t());
  const double of_scores = at::cross_entropy_loss(scores, labels).item<double>();
  const double of_probabilities =
      at::cross_entropy_loss(at::softmax(scores, 1), labels).item<double>();
  EXPECT_GT(std::abs(of_scores - of_probabilities), 0.1);
  EXPECT_NEAR(r.report.training.epochs[0].loss, of_scores, 0.02);
}

TEST(QatPipeline, IntermediateValuesAreDistilledBesideTheOutputsLoss) {
  // Cross entropy on the scores y and, at weight 1000, y's MSE against the float scores over
  // their mean square. One step at a negligible learning rate, so the trained model is the one
  // the step's loss was computed on.
  SoftmaxOneStep t(6);
  const at::Tensor& x = t.x;
  const at::Tensor& labels = t.labels;
  t.o.training.lr = 1e-12;
  t.o.distill_at = {"y"};
  t.o.distill_weight = 1000;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);
  EXPECT_EQ(r.report.loss,
            "cross entropy, on the scores the output's Softmax reads + 1000 x relative MSE of y");
  const at::Tensor student = r.model->executor().run({{"x", x}}, {"y"}).at("y");
  const at::Tensor teacher = at::addmm(classifierBias(), x, classifierWeight().t());
  const double cross_entropy = at::cross_entropy_loss(student, labels).item<double>();
  const double term = 1000 * (student - teacher).square().mean().item<double>() /
                      teacher.square().mean().item<double>();
  EXPECT_GT(term, 0.01);  // 8-bit scores differ from the float ones enough to tell
  ASSERT_EQ(r.report.training.epochs.size(), 1u);
  EXPECT_NEAR(r.report.training.epochs[0].loss, cross_entropy + term, 1e-4);
}

TEST(QatPipeline, DistillingAModelWithSeveralOutputsKeepsEveryFloatOutput) {
  // Outputs y (the scores), z = Relu(y) and the int64 ArgMax of y. Without labels y is distilled
  // by MSE, z joins at 100 times its relative MSE, and the index output is left alone. One step
  // at a negligible learning rate, as above.
  TinyQat t;
  Value* y = t.graph.outputs().front();
  Node* relu = t.graph.addNode("Relu", {y}, {"z"}, "relu");
  relu->output(0)->type = y->type;
  Node* argmax = t.graph.addNode("ArgMax", {y}, {"k"}, "argmax");
  argmax->attributes.set(Attribute::makeInt("axis", 1));
  argmax->output(0)->type =
      TensorType{DType::Int64, std::vector<Dim>{Dim::symbolic("N"), Dim::known(1)}};
  t.graph.setOutputs({y, relu->output(0), argmax->output(0)});
  const at::Tensor x = classifierInputs(8, 7);
  t.o.data = std::make_shared<TensorDataset>(x, at::Tensor(), "one unlabelled batch");
  t.o.calib = classifierData(16, 3, "calib");
  t.o.deploy = false;
  t.o.training.epochs = 1;
  t.o.training.lr = 1e-12;
  t.o.distill_weight = 100;
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(t.o);
  EXPECT_EQ(r.report.loss, "distillation (mse) + 100 x relative MSE of output z");
  const at::Tensor student = r.model->executor().run({{"x", x}}, {"y"}).at("y");
  const at::Tensor teacher = at::addmm(classifierBias(), x, classifierWeight().t());
  const double mse = (student - teacher).square().mean().item<double>();
  const at::Tensor z_student = at::relu(student), z_teacher = at::relu(teacher);
  const double z_term = 100 * (z_student - z_teacher).square().mean().item<double>() /
                        z_teacher.square().mean().item<double>();
  EXPECT_GT(z_term, 1e-3);  // large enough against the tolerance below to tell
  ASSERT_EQ(r.report.training.epochs.size(), 1u);
  EXPECT_NEAR(r.report.training.epochs[0].loss, mse + z_term, 1e-5);
}

TEST(QatPipeline, ValuesToDistilMustBeInTheFloatAndThePreparedModel) {
  TinyQat missing;
  missing.o.distill_at = {"nope"};
  EXPECT_EQ(errorOf([&] { pipelines::runQatPipeline(missing.o); }),
            "--distill-at: the model has no value 'nope'; name values as the ONNX file does "
            "(`qforge inspect MODEL --dump` shows them)");
  EXPECT_FALSE(std::filesystem::exists(missing.o.out));

  // The weight reaches the Gemm through two Identities, which prepare folds into one initializer.
  TinyQat folded;
  Node* gemm = folded.graph.outputs().front()->producer();
  Node* first = folded.graph.addNode("Identity", {gemm->input(1)}, {"w_copy"}, "copy");
  Node* second = folded.graph.addNode("Identity", {first->output(0)}, {"w_copy2"}, "copy2");
  folded.graph.setInput(gemm, 1, second->output(0));
  folded.o.distill_at = {"w_copy"};
  EXPECT_EQ(errorOf([&] { pipelines::runQatPipeline(folded.o); }),
            "--distill-at: value 'w_copy' is folded or renamed in the prepared model; name another "
            "value, such as the output of a Conv, Add or activation after it");
  EXPECT_FALSE(std::filesystem::exists(folded.o.out));

  TinyQat negative;
  negative.o.distill_at = {"y"};
  negative.o.distill_weight = -1;
  EXPECT_EQ(errorOf([&] { pipelines::runQatPipeline(negative.o); }),
            "--distill-weight must be at least 0; got -1");
}

TEST(QatPipeline, ACallersLossTrainsInsteadOfTheDefault) {
  // The caller's loss is ATen's cross entropy, what the default loss computes: the same trained
  // weights, bit for bit, and the loss runs once per step on the step's batch.
  TinyQat mine;
  mine.o.deploy = false;
  int calls = 0;
  mine.o.custom_loss = [&](const at::Tensor& output, const data::Batch& batch) {
    ++calls;
    EXPECT_TRUE(output.requires_grad());
    EXPECT_EQ(output.size(0), batch.labels.size(0));
    return at::cross_entropy_loss(output, batch.labels);
  };
  mine.o.custom_loss_name = "my loss";
  const pipelines::QatPipelineResult r = pipelines::runQatPipeline(mine.o);
  EXPECT_EQ(r.report.loss, "my loss");
  EXPECT_EQ(calls, 8);  // floor(36 / 8) steps x 2 epochs

  TinyQat standard;
  standard.o.deploy = false;
  const pipelines::QatPipelineResult d = pipelines::runQatPipeline(standard.o);
  EXPECT_EQ(d.report.loss, "cross entropy");
  const at::Tensor x = classifierInputs(20, 9);
  EXPECT_TRUE(at::equal(r.model->executor().run({{"x", x}}).at("y"),
                        d.model->executor().run({{"x", x}}).at("y")));

  // A loss that ignores the output trains nothing: the weights stay as calibrated.
  TinyQat flat;
  flat.o.deploy = false;
  flat.o.training.train_weights = true;
  flat.o.custom_loss = [](const at::Tensor& output, const data::Batch&) {
    return (output * 0).sum();
  };
  const pipelines::QatPipelineResult f = pipelines::runQatPipeline(flat.o);
  EXPECT_TRUE(at::equal(f.model->graph().findValue("w")->initializer(), classifierWeight()));
}

TEST(QatPipeline, AlgorithmsSetTheQuantizersTheConfigDoesNotName) {
  passes::QuantConfig config;
  pipelines::applyQatAlgorithm("", config);
  EXPECT_TRUE(config.weight.empty() && config.activation.empty());
  pipelines::applyQatAlgorithm("pact", config);
  EXPECT_EQ(config.weight["fake_quantizer"], "LSQ");
  EXPECT_EQ(config.activation["fake_quantizer"], "PACT");

  passes::QuantConfig own;
  own.weight = {{"bits", 4}, {"fake_quantizer", "DSQ"}, {"observer", "MSE"}};
  pipelines::applyQatAlgorithm("dorefa", own);
  EXPECT_EQ(own.weight["fake_quantizer"], "DSQ");  // the config's choice wins
  EXPECT_EQ(own.weight["bits"], 4);
  EXPECT_EQ(own.weight["per_channel"], false);
  EXPECT_EQ(own.weight["observer"], "MSE");  // not DoReFa: its observer stays

  passes::QuantConfig dorefa;
  dorefa.weight = {{"observer", "MSE"}, {"observer_options", {{"p", 2}}}};
  pipelines::applyQatAlgorithm("dorefa", dorefa);
  EXPECT_EQ(dorefa.weight["fake_quantizer"], "DoReFa");
  EXPECT_EQ(dorefa.weight["observer"], "none");
  EXPECT_FALSE(dorefa.weight.contains("observer_options"));
  EXPECT_EQ(dorefa.activation["fake_quantizer"], "LSQ");

  passes::QuantConfig tqt;
  pipelines::applyQatAlgorithm("tqt", tqt);
  EXPECT_EQ(tqt.weight["symmetric"], true);
  EXPECT_EQ(tqt.activation["symmetric"], true);
  EXPECT_EQ(tqt.activation["fake_quantizer"], "TQT");
}

TEST(QatPipeline, EpochsCsvHasOneRowPerEpoch) {
  std::vector<algos::QatEpochResult> epochs(2);
  epochs[0] = {0, 1.5, 0.25, -1, 0.001, 3.25, 12, false};
  epochs[1] = {1, 0.5, -1, 88.5, 0.0005, 2.0, 12, true};
  EXPECT_EQ(pipelines::qatEpochsCsv(epochs),
            "epoch,loss,train_top1,eval_top1,lr,steps,bn_frozen,seconds\n"
            "1,1.500000,25.0000,-1.0000,0.001,12,0,3.250\n"
            "2,0.500000,-1.0000,88.5000,0.0005,12,1,2.000\n");
}

}  // namespace
}  // namespace qforge::testing
