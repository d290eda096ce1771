// The QAT trainer on tiny graphs: one step against PyTorch's own learnable fake-quantize ops and
// cross entropy, training that lowers the loss and moves scales, BN statistics trained or frozen,
// checkpoints that resume bit for bit (stopped by the flag or by a step limit), and bad input.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "algos/calibrate.h"
#include "algos/qat.h"
#include "core/error.h"
#include "support/checks.h"
#include "support/classifier_graphs.h"
#include "support/quant_graphs.h"
#include "support/tensor_dataset.h"

namespace qforge::testing {
namespace {

// x[N,4] -> Gemm(W[3,4], b, transB) -> y[N,3]
Graph linearClassifier() {
  at::manual_seed(5);
  Graph g;
  Value* x = g.addValue("x");
  setBatchedShape(x, {4});
  g.addInput(x);
  Value* w = g.addInitializer("w", at::randn({3, 4}));
  Value* b = g.addInitializer("b", at::randn({3}) * 0.1);
  Node* gemm = g.addNode("Gemm", {x, w, b}, {"y"}, "fc");
  gemm->attributes.set(Attribute::makeInt("transB", 1));
  setBatchedShape(gemm->output(0), {3});
  g.addOutput(gemm->output(0));
  return g;
}

backends::BackendConfig lsqBackend(int bits = 4) {
  return tinyBackend(
      {{"weight", {{"bits", bits}, {"fake_quantizer", "LSQ"}}},
       {"activation",
        {{"bits", bits}, {"symmetric", true}, {"unsigned", false}, {"fake_quantizer", "LSQ"}}},
       {"fusions", {{"Conv", "BatchNormalization?", "Relu?"}, {"Gemm"}}}});
}

std::shared_ptr<data::Dataset> linearData(int64_t n) {
  at::manual_seed(11);
  at::Tensor x = at::randn({n, 4});
  at::Tensor labels = (x.narrow(1, 0, 3) * at::tensor({1.0f, -1.0f, 0.5f})).argmax(1);
  return std::make_shared<TensorDataset>(x, labels);
}

// Three classes told apart by the image's mean level (-1, 0, +1) under noise.
std::shared_ptr<data::Dataset> imageData(int64_t n) {
  at::manual_seed(13);
  at::Tensor labels = at::randint(0, 3, {n}, at::kLong);
  at::Tensor x = at::randn({n, 1, 6, 6}) + (labels.to(at::kFloat) - 1).reshape({n, 1, 1, 1});
  return std::make_shared<TensorDataset>(x, labels);
}

std::unique_ptr<passes::PreparedModel> calibrated(Graph g, const std::shared_ptr<data::Dataset>& d,
                                                  const backends::BackendConfig& backend) {
  auto m = algos::prepareForQat(std::move(g), backend);
  data::LoaderOptions lo;
  lo.batch_size = 16;
  data::BatchLoader loader(d, lo);
  algos::calibrate(*m, loader, 2);
  return m;
}

std::vector<at::Tensor> snapshot(const algos::QatTrainer& t) {
  std::vector<at::Tensor> copies;
  for (const at::Tensor& p : t.parameters())
    copies.push_back(p.detach().clone());
  return copies;
}

std::string tempPath(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("qforge-qat-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(Qat, OneStepEqualsTheLsqClosedFormWithCrossEntropyAndSgd) {
  auto data = linearData(8);
  auto m = calibrated(linearClassifier(), data, lsqBackend());
  // The quantizers as calibration left them; PyTorch's ops get the same starting point.
  quant::FakeQuantizer* act = nullptr;
  quant::FakeQuantizer* weight = nullptr;
  for (const auto& p : m->points()) {
    if (p.kind == passes::PointKind::Weight) weight = m->quantizer(p.quantizer);
    if (p.kind == passes::PointKind::Activation) act = m->quantizer(p.quantizer);
  }
  ASSERT_TRUE(act && weight);
  at::Tensor sa = act->state().at("scale").clone().requires_grad_(true);
  at::Tensor sw = weight->state().at("scale").clone().requires_grad_(true);
  at::Tensor w = m->graph().value("w")->initializer().clone().requires_grad_(true);
  at::Tensor b = m->graph().value("b")->initializer().clone().requires_grad_(true);
  const int64_t qmin_a = act->scheme().qmin(), qmax_a = act->scheme().qmax();
  const int64_t qmin_w = weight->scheme().qmin(), qmax_w = weight->scheme().qmax();

  algos::QatConfig c;
  c.epochs = 1;
  c.batch_size = 8;
  c.lr = 0.05;
  c.schedule = algos::QatSchedule::Constant;
  algos::QatTrainer trainer(*m, c);
  data::LoaderOptions lo;
  const algos::QatReport r = trainer.train(data, lo);
  ASSERT_EQ(r.steps_run, 1);

  // The reference, written with ATen autograd: LSQ with the scale's gradient scaled by
  // g = 1/sqrt(numel * qmax) (per channel for weights) and round straight-through; a value counts
  // as clipped when its rounded level leaves the grid, as in PyTorch's FakeQuantize (the LSQ
  // paper clips at x/s beyond qmax, PyTorch's learnable kernels at levels equal to qmin or qmax;
  // they differ within half a step of the grid's ends, where MinMax calibration puts the largest
  // value). Then cross entropy over the whole batch and one SGD step (no momentum yet).
  at::Tensor x =
      at::stack({data->get(0).input, data->get(1).input, data->get(2).input, data->get(3).input,
                 data->get(4).input, data->get(5).input, data->get(6).input, data->get(7).input});
  at::Tensor labels = at::empty({8}, at::kLong);
  for (int64_t i = 0; i < 8; ++i)
    labels[i] = data->get(i).label;
  const auto lsq = [](const at::Tensor& x, const at::Tensor& scale, double g, int64_t qmin,
                      int64_t qmax) {
    const at::Tensor s = scale * g + (scale - scale * g).detach();
    const at::Tensor v = x / s;
    const at::Tensor level = at::round(v).detach();
    const at::Tensor inside = (level >= qmin) & (level <= qmax);
    const at::Tensor clamped =
        at::clamp(level, static_cast<double>(qmin), static_cast<double>(qmax));
    return at::where(inside, s * (v + (level - v).detach()), s * clamped);
  };
  at::Tensor xq = lsq(x, sa, 1.0 / std::sqrt(x.numel() * double(qmax_a)), qmin_a, qmax_a);
  at::Tensor wq = lsq(w, sw.reshape({3, 1}), 1.0 / std::sqrt(4.0 * double(qmax_w)), qmin_w, qmax_w);
  at::cross_entropy_loss(at::linear(xq, wq, b), labels).backward();
  const auto stepped = [&](const at::Tensor& p) { return (p - 0.05 * p.grad()).detach(); };

  const std::vector<at::Tensor>& mine = trainer.parameters();
  const auto find = [&](const std::string& name) {
    return m->graph().value(name)->initializer().detach();
  };
  EXPECT_TRUE(at::allclose(find("w"), stepped(w), 1e-5, 1e-6)) << find("w") - stepped(w);
  EXPECT_TRUE(at::allclose(find("b"), stepped(b), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(act->state().at("scale"), stepped(sa), 1e-5, 1e-7))
      << act->state().at("scale") << stepped(sa);
  EXPECT_TRUE(at::allclose(weight->state().at("scale"), stepped(sw), 1e-5, 1e-7));
  EXPECT_FALSE(at::allclose(stepped(sa), sa.detach()));  // the scale did move
  EXPECT_EQ(mine.size(), 4u);                            // w, b, two scale tensors
}

// PyTorch's label_smoothing, written out: the target puts 1 - e + e/K on the label and e/K on
// every class, so loss = -(1 - e) log p_label - (e / K) sum_k log p_k, averaged over the batch.
double smoothedCrossEntropy(const at::Tensor& logits, const at::Tensor& labels, double e) {
  const at::Tensor z = logits.to(at::kDouble);
  const int64_t n = z.size(0), k = z.size(1);
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double norm = 0;
    for (int64_t j = 0; j < k; ++j)
      norm += std::exp(z[i][j].item<double>());
    const auto log_p = [&](int64_t j) { return z[i][j].item<double>() - std::log(norm); };
    double sum_log_p = 0;
    for (int64_t j = 0; j < k; ++j)
      sum_log_p += log_p(j);
    total += -(1 - e) * log_p(labels[i].item<int64_t>()) - e / k * sum_log_p;
  }
  return total / n;
}

TEST(Qat, LabelSmoothingIsPyTorchsSmoothedCrossEntropy) {
  const at::Tensor logits = at::tensor({2.0f, -1.0f, 0.5f, 0.1f, 0.2f, 3.0f}).reshape({2, 3});
  data::Batch batch;
  batch.labels = at::tensor({0, 1}, at::kLong);
  EXPECT_NEAR(algos::crossEntropyLoss(logits, batch).item<double>(),
              smoothedCrossEntropy(logits, batch.labels, 0), 1e-6);
  EXPECT_NEAR(algos::crossEntropyLoss(logits, batch, 0.1).item<double>(),
              smoothedCrossEntropy(logits, batch.labels, 0.1), 1e-6);
  EXPECT_THROW(algos::crossEntropyLoss(logits, batch, 1.0), Error);
  EXPECT_THROW(algos::crossEntropyLoss(logits, batch, -0.1), Error);

  // The trainer's default loss takes the config's smoothing: one step's reported loss is the
  // smoothed loss of the calibrated model's outputs.
  auto data = linearData(8);
  auto m = calibrated(linearClassifier(), data, lsqBackend());
  algos::QatConfig c;
  c.batch_size = 8;
  c.label_smoothing = 0.2;
  algos::QatTrainer trainer(*m, c);
  at::Tensor x = at::empty({8, 4});
  at::Tensor labels = at::empty({8}, at::kLong);
  for (int64_t i = 0; i < 8; ++i) {
    x[i] = data->get(i).input;
    labels[i] = data->get(i).label;
  }
  const double expected = smoothedCrossEntropy(trainer.infer(x), labels, 0.2);
  data::LoaderOptions lo;
  const algos::QatReport r = trainer.train(data, lo);
  ASSERT_EQ(r.epochs.size(), 1u);
  EXPECT_NEAR(r.epochs[0].loss, expected, 1e-5);

  // Smoothing belongs to the default loss; with a loss of one's own it is refused, and so is a
  // value outside [0, 1).
  auto again = calibrated(linearClassifier(), data, lsqBackend());
  const algos::QatLoss own = [](const at::Tensor& out, const data::Batch& b) {
    return algos::crossEntropyLoss(out, b);
  };
  EXPECT_THROW(algos::QatTrainer(*again, c, own), Error);
  c.label_smoothing = 1.0;
  EXPECT_THROW(algos::QatTrainer(*again, c), Error);
}

TEST(Qat, TrainingLowersTheLossAndUpdatesBatchNormStatistics) {
  auto data = imageData(256);
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  const at::Tensor mean_before = m->graph().value("mean")->initializer().clone();
  algos::QatConfig c;
  c.epochs = 4;
  c.batch_size = 32;
  c.lr = 0.05;
  algos::QatTrainer trainer(*m, c);
  const algos::QatReport r = trainer.train(data, {});
  ASSERT_EQ(r.epochs.size(), 4u);
  EXPECT_EQ(r.steps_run, 4 * 8);
  EXPECT_EQ(r.batchnorms_simulated, 1);  // the Conv+BN unit trains with simulated folding
  EXPECT_LT(r.epochs.back().loss, 0.8 * r.epochs.front().loss)
      << r.epochs.front().loss << " -> " << r.epochs.back().loss;
  EXPECT_GT(r.quantizer_parameters, 0);
  // Batch statistics moved the running mean towards the data's.
  EXPECT_FALSE(at::equal(m->graph().value("mean")->initializer(), mean_before));
  // BN in inference mode from here: infer() and the finished model agree.
  at::Tensor x = at::randn({5, 1, 6, 6});
  const at::Tensor before_finish = trainer.infer(x);
  EXPECT_EQ(trainer.finish(), 1);
  EXPECT_EQ(m->graph().findValue("bn")->producer()->opType(), "Conv");  // BN merged
  const at::Tensor after = m->executor().run({{"x", x}}, {"y"}).at("y");
  EXPECT_TRUE(at::allclose(before_finish, after, 1e-4, 1e-5));
}

TEST(Qat, FrozenBatchNormKeepsItsRunningStatistics) {
  auto data = imageData(64);
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  const at::Tensor mean_before = m->graph().value("mean")->initializer().clone();
  const at::Tensor var_before = m->graph().value("var")->initializer().clone();
  algos::QatConfig c;
  c.epochs = 1;
  c.batch_size = 16;
  c.freeze_bn_epoch = 0;
  algos::QatTrainer trainer(*m, c);
  const algos::QatReport r = trainer.train(data, {});
  EXPECT_TRUE(r.epochs.front().bn_frozen);
  EXPECT_TRUE(at::equal(m->graph().value("mean")->initializer(), mean_before));
  EXPECT_TRUE(at::equal(m->graph().value("var")->initializer(), var_before));
}

struct TrainedRun {
  std::vector<at::Tensor> params;
  std::vector<algos::QatEpochResult> epochs;
};

algos::QatConfig resumableConfig(const std::string& checkpoint) {
  algos::QatConfig c;
  c.epochs = 3;
  c.batch_size = 16;
  c.lr = 0.02;
  c.weight_decay = 1e-3;
  c.seed = 4;
  c.augment_shift = 1;  // drawn per step: resuming must draw the same
  c.augment_flip = true;
  c.checkpoint_path = checkpoint;
  return c;
}

TrainedRun uninterrupted(const std::shared_ptr<data::Dataset>& data) {
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatTrainer trainer(*m, resumableConfig(tempPath("full.pt")));
  const algos::QatReport r = trainer.train(data, {});
  return {snapshot(trainer), r.epochs};
}

void expectSameRun(const TrainedRun& resumed, const TrainedRun& full) {
  ASSERT_EQ(resumed.params.size(), full.params.size());
  for (size_t i = 0; i < full.params.size(); ++i)
    EXPECT_TRUE(at::equal(resumed.params[i], full.params[i])) << "parameter " << i;
  ASSERT_EQ(resumed.epochs.size(), full.epochs.size());
  for (size_t i = 0; i < full.epochs.size(); ++i)
    EXPECT_EQ(resumed.epochs[i].loss, full.epochs[i].loss) << "epoch " << i;
}

TEST(Qat, AStoppedRunSavesItsPlaceAndResumesBitForBit) {
  auto data = imageData(80);  // 5 steps per epoch
  const TrainedRun full = uninterrupted(data);
  const std::string path = tempPath("stopped.pt");
  std::atomic<bool> stop{false};
  {
    auto m = calibrated(convBnClassifier(7), data, lsqBackend());
    algos::QatConfig c = resumableConfig(path);
    c.stop = &stop;
    algos::QatTrainer trainer(*m, c);
    // The signal arrives in the second epoch, after its third step.
    const algos::QatReport r = trainer.train(data, {}, [&](const algos::QatStepInfo& s) {
      if (s.global_step == 8) stop = true;
    });
    EXPECT_TRUE(r.interrupted);
    EXPECT_EQ(r.global_step, 8);
    EXPECT_EQ(r.epochs.size(), 1u);
  }
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatTrainer trainer(*m, resumableConfig(path));
  trainer.resume(path);
  const algos::QatReport r = trainer.train(data, {});
  EXPECT_TRUE(r.resumed);
  EXPECT_EQ(r.resumed_at_step, 8);
  EXPECT_EQ(r.steps_run, 15 - 8);
  expectSameRun({snapshot(trainer), r.epochs}, full);
}

TEST(Qat, ARunEndedByAStepLimitResumesBitForBit) {
  auto data = imageData(80);
  const TrainedRun full = uninterrupted(data);
  const std::string path = tempPath("limited.pt");
  {
    auto m = calibrated(convBnClassifier(7), data, lsqBackend());
    algos::QatConfig c = resumableConfig(path);
    c.max_steps = 11;
    algos::QatTrainer trainer(*m, c);
    EXPECT_EQ(trainer.train(data, {}).global_step, 11);
  }
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatTrainer trainer(*m, resumableConfig(path));
  trainer.resume(path);
  const algos::QatReport r = trainer.train(data, {});
  expectSameRun({snapshot(trainer), r.epochs}, full);
}

TEST(Qat, ResumingWithOtherSettingsNamesThem) {
  auto data = imageData(32);
  const std::string path = tempPath("settings.pt");
  {
    auto m = calibrated(convBnClassifier(7), data, lsqBackend());
    algos::QatConfig c = resumableConfig(path);
    c.max_steps = 1;
    algos::QatTrainer trainer(*m, c);
    trainer.train(data, {});
  }
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatConfig other = resumableConfig(path);
  other.lr = 0.5;
  other.batch_size = 8;
  algos::QatTrainer trainer(*m, other);
  try {
    trainer.resume(path);
    FAIL() << "resumed with another lr and batch";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("lr 0.02 -> 0.5"), std::string::npos) << what;
    EXPECT_NE(what.find("batch_size 16 -> 8"), std::string::npos) << what;
  }
}

TEST(Qat, ADamagedOrMissingCheckpointIsRefusedWithItsPath) {
  auto data = imageData(32);
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatTrainer trainer(*m, resumableConfig(""));
  const std::string path = tempPath("damaged.pt");
  std::ofstream(path) << "not a checkpoint";
  try {
    trainer.resume(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unreadable"), std::string::npos) << e.what();
  }
  EXPECT_THROW(trainer.resume(tempPath("missing.pt")), Error);
}

TEST(Qat, TheLossReadsOnlyValuesTheModelHas) {
  auto data = imageData(32);
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatTrainer trainer(*m, algos::QatConfig{});
  EXPECT_EQ(errorOf([&] { trainer.readLossFrom("nope"); }),
            "the QAT loss is to read value 'nope', which the model does not have");
  const algos::QatValuesTerm term = [](const std::vector<at::Tensor>& values, const data::Batch&) {
    return values.front().sum();
  };
  EXPECT_EQ(errorOf([&] {
              trainer.addLossTerm({"y", "nope"}, term);
            }),
            "a QAT loss term is to read value 'nope', which the model does not have");
  EXPECT_EQ(errorOf([&] { trainer.addLossTerm({}, term); }),
            "a QAT loss term needs values to read and a function");
  EXPECT_EQ(errorOf([&] { trainer.addLossTerm({"y"}, {}); }),
            "a QAT loss term needs values to read and a function");
}

TEST(Qat, RefusesAnUncalibratedModelAndTooLittleData) {
  passes::PrepareOptions options;
  options.fold_batchnorm = false;
  auto raw = passes::prepare(convBnClassifier(7), lsqBackend(), options);
  try {
    algos::QatTrainer trainer(*raw, algos::QatConfig{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("calibrat"), std::string::npos) << e.what();
  }
  auto data = imageData(40);
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  algos::QatConfig c;
  c.batch_size = 64;
  algos::QatTrainer trainer(*m, c);
  try {
    trainer.train(data, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("40 samples, fewer than one batch of 64"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(algos::parseQatOptimizer("rmsprop"), Error);
  EXPECT_THROW(algos::parseQatSchedule("linear"), Error);
}

TEST(Qat, RefusesABatchNormTheBackendFoldsThatWasNotRewrittenBeforeCalibration) {
  passes::PrepareOptions options;
  options.fold_batchnorm = false;
  auto m = passes::prepare(convBnClassifier(7), lsqBackend(), options);  // not prepareForQat
  calibrateOn(*m, at::randn({8, 1, 6, 6}));
  try {
    algos::QatTrainer trainer(*m, algos::QatConfig{});
    FAIL() << "trained weight quantizers calibrated on unfolded weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNormalization 'bn' after 'conv'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("prepareForQat"), std::string::npos) << e.what();
  }
}

TEST(Qat, FrozenWeightsTrainOnlyTheQuantizers) {
  auto data = imageData(64);
  auto m = calibrated(convBnClassifier(7), data, lsqBackend());
  const at::Tensor fw = m->graph().value("fw")->initializer().clone();
  const at::Tensor gamma = m->graph().value("gamma")->initializer().clone();
  std::map<std::string, at::Tensor> scales;
  for (quant::FakeQuantizer* q : m->quantizers())
    scales[q->name()] = q->state().at("scale");
  algos::QatConfig c;
  c.batch_size = 16;
  c.lr = 0.05;
  c.train_weights = false;
  algos::QatTrainer trainer(*m, c);
  trainer.train(data, {});
  EXPECT_TRUE(at::equal(m->graph().value("fw")->initializer(), fw));
  EXPECT_TRUE(at::equal(m->graph().value("gamma")->initializer(), gamma));
  int moved = 0;
  for (quant::FakeQuantizer* q : m->quantizers())
    moved += !at::equal(q->state().at("scale"), scales[q->name()]);
  EXPECT_GT(moved, 0);
  EXPECT_EQ(trainer.parameters().size(), m->quantizers().size());  // one scale tensor each
}

TEST(Qat, AQuantizerLearningRateScaleScalesTheQuantizersStepsOnly) {
  auto data = linearData(8);
  std::vector<at::Tensor> moves;
  for (double factor : {1.0, 0.25}) {
    auto m = calibrated(linearClassifier(), data, lsqBackend());
    std::vector<at::Tensor> before;
    for (quant::FakeQuantizer* q : m->quantizers())
      before.push_back(q->state().at("scale"));
    const at::Tensor w = m->graph().value("w")->initializer().clone();
    algos::QatConfig c;
    c.batch_size = 8;
    c.lr = 0.05;
    c.schedule = algos::QatSchedule::Constant;
    c.quantizer_lr_scale = factor;
    algos::QatTrainer trainer(*m, c);
    trainer.train(data, {});
    std::vector<at::Tensor> after;
    for (quant::FakeQuantizer* q : m->quantizers())
      after.push_back(q->state().at("scale"));
    moves.push_back(at::cat(after) - at::cat(before));
    moves.push_back(m->graph().value("w")->initializer() - w);
  }
  // One SGD step: the scales move a quarter as far, the weights as far.
  EXPECT_TRUE(at::allclose(moves[2], moves[0] * 0.25, 1e-4, 1e-9)) << moves[2] << moves[0];
  EXPECT_TRUE(at::allclose(moves[3], moves[1], 1e-5, 1e-8));
  auto m = calibrated(linearClassifier(), data, lsqBackend());
  algos::QatConfig adam;
  adam.optimizer = algos::QatOptimizer::Adam;
  adam.quantizer_lr_scale = 0.5;
  EXPECT_THROW(algos::QatTrainer(*m, adam), Error);
}

TEST(Qat, AugmentationShiftsAndFlipsEachSampleWithinRangeAndRepeatsForASeed) {
  at::manual_seed(21);
  const at::Tensor images = at::randn({16, 2, 5, 7});
  EXPECT_TRUE(at::equal(algos::augmentImages(images, 0, false, 3), images));
  const at::Tensor out = algos::augmentImages(images, 2, true, 3);
  EXPECT_TRUE(at::equal(out, algos::augmentImages(images, 2, true, 3)));
  EXPECT_FALSE(at::equal(out, algos::augmentImages(images, 2, true, 4)));
  // Every sample is its image moved by some (dy, dx) in [-2, 2]^2 with zeros shifted in,
  // flipped or not; closed form: pad, crop, flip.
  const at::Tensor padded = at::constant_pad_nd(images, {2, 2, 2, 2}, 0);
  int flipped = 0, moved = 0;
  for (int64_t i = 0; i < 16; ++i) {
    bool found = false;
    for (int64_t dy = 0; dy <= 4 && !found; ++dy) {
      for (int64_t dx = 0; dx <= 4 && !found; ++dx) {
        const at::Tensor crop = padded[i].narrow(1, dy, 5).narrow(2, dx, 7);
        for (bool flip : {false, true}) {
          if (at::equal(out[i], flip ? crop.flip({2}) : crop)) {
            found = true;
            flipped += flip;
            moved += dy != 2 || dx != 2;
            break;
          }
        }
      }
    }
    EXPECT_TRUE(found) << "sample " << i;
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 16);
  EXPECT_GT(moved, 8);
  EXPECT_THROW(algos::augmentImages(at::zeros({4, 3}), 1, false, 0), Error);
}

TEST(Qat, ABatchNormReadingTheGraphInputTrainsWithoutAProducer) {
  // x -> BatchNormalization -> Gemm: no layer before the BN to fold it into.
  at::manual_seed(9);
  Graph g;
  Value* x = g.addValue("x");
  setBatchedShape(x, {4});
  g.addInput(x);
  Node* bn = g.addNode(
      "BatchNormalization",
      {x, g.addInitializer("gamma", at::ones({4})), g.addInitializer("beta", at::zeros({4})),
       g.addInitializer("mean", at::zeros({4})), g.addInitializer("var", at::ones({4}))},
      {"n"}, "input_bn");
  Node* fc = g.addNode("Gemm",
                       {bn->output(0), g.addInitializer("w", at::randn({3, 4})),
                        g.addInitializer("b", at::zeros({3}))},
                       {"y"}, "fc");
  fc->attributes.set(Attribute::makeInt("transB", 1));
  setBatchedShape(fc->output(0), {3});
  g.addOutput(fc->output(0));
  auto data = linearData(32);
  auto m = calibrated(std::move(g), data, lsqBackend());
  algos::QatConfig c;
  c.batch_size = 16;
  algos::QatTrainer trainer(*m, c);
  EXPECT_EQ(trainer.train(data, {}).steps_run, 2);
}

TEST(Qat, CosineScheduleEndsNearZeroAndStepScheduleDecaysPerEpoch) {
  auto data = imageData(32);
  for (auto schedule : {algos::QatSchedule::Cosine, algos::QatSchedule::Step}) {
    auto m = calibrated(convBnClassifier(7), data, lsqBackend());
    algos::QatConfig c;
    c.epochs = 2;
    c.batch_size = 16;
    c.lr = 0.1;
    c.schedule = schedule;
    c.step_gamma = 0.5;
    std::vector<double> lrs;
    algos::QatTrainer trainer(*m, c);
    trainer.train(data, {}, [&](const algos::QatStepInfo& s) { lrs.push_back(s.lr); });
    ASSERT_EQ(lrs.size(), 4u);
    if (schedule == algos::QatSchedule::Cosine) {
      // lr * (1 + cos(pi t / T)) / 2 at t = 0..3 of T = 4.
      for (int t = 0; t < 4; ++t)
        EXPECT_NEAR(lrs[t], 0.05 * (1 + std::cos(M_PI * t / 4)), 1e-12);
    } else {
      EXPECT_DOUBLE_EQ(lrs[1], 0.1);
      EXPECT_DOUBLE_EQ(lrs[2], 0.05);
    }
  }
}

}  // namespace
}  // namespace qforge::testing
