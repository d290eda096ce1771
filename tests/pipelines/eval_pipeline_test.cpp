// The eval pipeline as a library call on a tiny classifier with the caller's own data: top-1 and
// top-5 as ATen's addmm gives them, outputs dumped row for row, a reference model's comparison
// (the same model: infinite SQNR; a scaled one: the closed-form SQNR), and bad settings before
// anything is written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/files.h"
#include "data/npy.h"
#include "ir/onnx_export.h"
#include "pipelines/eval_pipeline.h"
#include "support/checks.h"
#include "tiny_classifier.h"

namespace qforge::testing {
namespace {

struct TinyEval {
  TempDir dir{"eval-pipeline"};
  pipelines::EvalOptions o;

  TinyEval() {
    Graph g = linearClassifier();
    o.model_path = dir.file("tiny.onnx");
    exportOnnxFile(g, o.model_path);
    o.data = classifierData(50, 4, "evaluation tensors");
    o.batch = 20;
  }
};

TEST(EvalPipeline, ScoresTheCallersDatasetAsAtenDoes) {
  TinyEval t;
  t.o.dump_outputs = t.dir.file("y.npy");
  int events = 0;
  const pipelines::EvalReport r = pipelines::runEval(t.o, [&](const pipelines::ProgressEvent& e) {
    EXPECT_EQ(e.stage, "evaluate");
    EXPECT_EQ(e.total, 50);
    ++events;
  });
  const at::Tensor x = classifierInputs(50, 4), labels = classifierLabels(x, 4);
  const at::Tensor logits = at::addmm(classifierBias(), x, classifierWeight().t());
  EXPECT_EQ(r.data, "evaluation tensors");
  EXPECT_EQ(r.scores.metric, "top1");
  EXPECT_EQ(r.scores.samples, 50);
  EXPECT_EQ(r.scores.top1, correct(logits, labels));
  EXPECT_EQ(events, 3 + 1);  // three batches of at most 20, then the stage's end
  const at::Tensor dumped = data::NpyFile(t.o.dump_outputs).readAll();
  EXPECT_TRUE(at::allclose(dumped, logits, 1e-5, 1e-6));

  const nlohmann::json j = pipelines::evalReportJson(t.o, r);
  EXPECT_EQ(j["samples"], 50);
  EXPECT_DOUBLE_EQ(j["top1"].get<double>(), correct(logits, labels) / 50.0);
  EXPECT_EQ(j["outputs_file"], t.o.dump_outputs);
}

TEST(EvalPipeline, AReferenceModelIsComparedOutputByOutput) {
  TinyEval t;
  t.o.reference = t.o.model_path;  // the same model: no error at all
  pipelines::EvalReport same = pipelines::runEval(t.o);
  ASSERT_EQ(same.reference.size(), 1u);
  EXPECT_EQ(same.reference[0].output, "y");
  EXPECT_TRUE(std::isinf(same.reference[0].sqnr_db));
  EXPECT_DOUBLE_EQ(same.reference[0].cosine, 1.0);
  ASSERT_TRUE(same.reference[0].top1_agreement);
  EXPECT_DOUBLE_EQ(*same.reference[0].top1_agreement, 1.0);
  EXPECT_TRUE(pipelines::evalReportJson(t.o, same)["reference"]["outputs"][0]["sqnr_db"].is_null());

  // A reference whose weights and bias are 1.1 times ours: output = 1.1 * ours, so the error is
  // 0.1 * ours against a signal of 1.1 * ours: SQNR = 20 log10(11).
  Graph scaled = linearClassifier();
  for (const char* name : {"w", "b"}) {
    Value* v = scaled.findValue(name);
    v->setInitializer(v->initializer() * 1.1);
  }
  t.o.reference = t.dir.file("scaled.onnx");
  exportOnnxFile(scaled, t.o.reference);
  const pipelines::EvalReport r = pipelines::runEval(t.o);
  EXPECT_NEAR(r.reference[0].sqnr_db, 20 * std::log10(11.0), 1e-3);
  EXPECT_NEAR(r.reference[0].cosine, 1.0, 1e-6);
}

TEST(EvalPipeline, BadSettingsFailBeforeAnyOutput) {
  TinyEval t;
  t.o.dump_outputs = t.dir.file("y.npy");
  t.o.metric = "bleu";
  EXPECT_EQ(errorOf([&] { pipelines::runEval(t.o); }),
            "--metric must be auto, top1, psnr or none, not 'bleu'");
  t.o.metric = "top1";
  t.o.data = std::make_shared<TensorDataset>(classifierInputs(8, 1), at::Tensor(), "unlabelled");
  EXPECT_EQ(errorOf([&] { pipelines::runEval(t.o); }),
            "unlabelled has no labels; --metric top1 needs them (or use --metric psnr)");
  t.o.metric = "auto";
  t.o.batch = 0;
  EXPECT_EQ(errorOf([&] { pipelines::runEval(t.o); }), "--batch must be positive");
  EXPECT_FALSE(std::filesystem::exists(t.o.dump_outputs));
  EXPECT_EQ(pipelines::parseCrop("32x24"), (std::pair<int64_t, int64_t>{32, 24}));
  EXPECT_EQ(errorOf([&] { pipelines::parseCrop("32y"); }),
            "--crop '32y' must be SIZE or HEIGHTxWIDTH, e.g. 224 or 32x24");
}

}  // namespace
}  // namespace qforge::testing
