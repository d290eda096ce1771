// Data-parallel calibration: observers that fold every rank's batch summaries in global order end
// exactly where one observer seeing every batch ends (ranks simulated in one process through the
// wire format, for every built-in observer, per tensor and per channel); two real ranks on
// loopback calibrate a model to the qparams of one process, bit for bit, with uneven shares.
#include <gtest/gtest.h>

#include "algos/calibrate.h"
#include "algos/calibration_sync.h"
#include "algos/distributed.h"
#include "backends/backend_config.h"
#include "quant/registry.h"
#include "support/checks.h"
#include "support/classifier_graphs.h"
#include "support/quant_graphs.h"
#include "support/rank_processes.h"
#include "support/tensor_dataset.h"

namespace qforge::testing {
namespace {

// Batches with growing and shrinking spread, an outlier and a constant one: EMA, histogram and
// moment states all depend on what came before.
std::vector<at::Tensor> batchesOfChannels(int64_t count) {
  at::manual_seed(7);
  std::vector<at::Tensor> batches;
  for (int64_t b = 0; b < count; ++b) {
    at::Tensor x = at::randn({6, 4, 5}) * (0.5 + 0.4 * static_cast<double>(b % 4)) + 0.1 * b;
    if (b == 3) x[2][1][0] = 40.0f;
    if (b == 5) x.fill_(0.25f);
    batches.push_back(x);
  }
  return batches;
}

std::unique_ptr<quant::Observer> makeObserver(const std::string& kind, const quant::QScheme& s) {
  static const quant::ObserverRegistry registry = [] {
    quant::ObserverRegistry r;
    quant::registerBuiltinObservers(r);
    return r;
  }();
  return registry.create(kind, "x", s);
}

// Rounds of `world` ranks: rank r observes batches r, r + world, ...; after each round every
// rank's held observations travel through the wire format and fold into every rank's observer.
std::vector<std::unique_ptr<quant::Observer>> simulatedRanks(const std::string& kind,
                                                             const quant::QScheme& scheme,
                                                             const std::vector<at::Tensor>& batches,
                                                             int world) {
  std::vector<std::unique_ptr<quant::Observer>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(makeObserver(kind, scheme));
    ranks.back()->holdObservations(true);
  }
  for (size_t first = 0; first < batches.size(); first += world) {
    std::vector<at::Tensor> packed;
    for (int r = 0; r < world; ++r) {
      if (first + r < batches.size()) ranks[r]->observe(batches[first + r]);
      packed.push_back(algos::packObservations({ranks[r]->takeHeld()}));
    }
    for (int r = 0; r < world; ++r) {
      for (const at::Tensor& p : packed)
        ranks[r]->fold(algos::unpackObservations(p, 1).front());
    }
  }
  return ranks;
}

void expectSameQParams(const quant::Observer& a, const quant::Observer& b,
                       const std::string& what) {
  EXPECT_TRUE(at::equal(a.qparams().scale, b.qparams().scale))
      << what << ": " << a.qparams().scale << " vs " << b.qparams().scale;
  EXPECT_TRUE(at::equal(a.qparams().zero_point, b.qparams().zero_point)) << what;
  EXPECT_TRUE(at::equal(a.range().first, b.range().first)) << what;
  EXPECT_TRUE(at::equal(a.range().second, b.range().second)) << what;
  EXPECT_EQ(a.batches(), b.batches()) << what;
}

TEST(CalibrationSync, RanksFoldingInGlobalOrderEqualOneObserverForEveryBuiltinRule) {
  const std::vector<at::Tensor> batches = batchesOfChannels(7);
  quant::QScheme per_channel = quant::QScheme::int8Symmetric();
  per_channel.axis = 1;
  const std::vector<std::string> kinds = {"MinMax", "EmaMinMax", "Percentile", "EmaQuantile",
                                          "Mse",    "EmaMse",    "ClipStd",    "LsqInit",
                                          "Kl",     "PowerOfTwo"};
  for (const std::string& kind : kinds) {
    for (const quant::QScheme& scheme : {quant::QScheme::uint8Asymmetric(), per_channel}) {
      std::unique_ptr<quant::Observer> one = makeObserver(kind, quant::QScheme::int8Symmetric());
      try {
        one = makeObserver(kind, scheme);
      } catch (const Error&) {
        continue;  // a per-tensor rule
      }
      for (const at::Tensor& b : batches)
        one->observe(b);
      for (int world : {2, 3}) {
        const auto ranks = simulatedRanks(kind, scheme, batches, world);
        for (int r = 0; r < world; ++r) {
          expectSameQParams(*ranks[r], *one,
                            kind + (scheme.perChannel() ? " per channel" : " per tensor") + ", " +
                                std::to_string(world) + " ranks, rank " + std::to_string(r));
        }
      }
    }
  }
}

TEST(CalibrationSync, PackedObservationsRoundTripAndRefuseMismatchedModels) {
  quant::HeldObservations held;
  held.batches = 3;
  held.empty_tensors = 1;
  held.channels = 4;
  held.summaries.push_back({at::tensor({1.5f, -2.0f}), at::full({2, 2}, 0.125, at::kDouble)});
  held.summaries.push_back({at::full({1}, int64_t{-7}, at::kLong)});
  const at::Tensor packed = algos::packObservations({held, quant::HeldObservations{}});
  const auto back = algos::unpackObservations(packed, 2);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].batches, 3);
  EXPECT_EQ(back[0].empty_tensors, 1);
  EXPECT_EQ(back[0].channels, 4);
  ASSERT_EQ(back[0].summaries.size(), 2u);
  EXPECT_TRUE(at::equal(back[0].summaries[0][0], held.summaries[0][0]));
  EXPECT_TRUE(at::equal(back[0].summaries[0][1], held.summaries[0][1]));
  EXPECT_EQ(back[0].summaries[1][0].scalar_type(), at::kLong);
  EXPECT_EQ(back[0].summaries[1][0].item<int64_t>(), -7);
  EXPECT_TRUE(back[1].summaries.empty());
  EXPECT_NE(errorOf([&] {
              algos::unpackObservations(packed, 1);
            }).find("start every rank with the same model"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { algos::unpackObservations(packed, 3); }).find("truncated"),
            std::string::npos);
  quant::HeldObservations bad;
  bad.summaries.push_back({at::ones({2}, at::kInt)});
  EXPECT_NE(errorOf([&] { algos::packObservations({bad}); }).find("only float, double and int64"),
            std::string::npos);
}

// A held observer changes nothing until its observations are folded in.
TEST(CalibrationSync, HoldingDefersTheStateAndCountsUntilFolded) {
  auto observer = makeObserver("MinMax", quant::QScheme::int8Symmetric());
  observer->holdObservations(true);
  observer->observe(at::tensor({-1.0f, 3.0f}));
  observer->observe(at::empty({0}));
  EXPECT_FALSE(observer->hasData());
  quant::HeldObservations held = observer->takeHeld();
  EXPECT_EQ(held.batches, 1);
  EXPECT_EQ(held.empty_tensors, 1);
  EXPECT_EQ(observer->takeHeld().batches, 0);  // taken once
  observer->fold(held);
  EXPECT_EQ(observer->batches(), 1);
  EXPECT_EQ(observer->emptyTensors(), 1);
  EXPECT_FLOAT_EQ(observer->range().second.item<float>(), 3.0f);
}

// The classifier prepared for `backend`, calibrated on `batches` batches of 4 from 40 fixed
// samples, alone or as this rank of `group`.
std::unique_ptr<passes::PreparedModel> calibrated(const backends::BackendConfig& backend,
                                                  int64_t batches, algos::ProcessGroup* group,
                                                  algos::CalibrationResult* result) {
  auto model = passes::prepare(convBnClassifier(3), backend);
  at::manual_seed(11);
  const at::Tensor samples =
      at::randn({40, 1, 6, 6}) * at::linspace(0.2, 3.0, 40).view({40, 1, 1, 1});
  data::LoaderOptions options;
  options.batch_size = 4;
  data::BatchLoader loader(std::make_shared<TensorDataset>(samples, at::Tensor()), options);
  *result = algos::calibrate(*model, loader, batches, {}, group);
  return model;
}

TEST(CalibrationSync, TwoRanksOnLoopbackCalibrateToTheQParamsOfOneProcess) {
  const auto options = spawnedRankOptions();
  if (!options) return runThisTestAsRanks(2, std::chrono::seconds(60));
  algos::ProcessGroup group(*options);
  for (const std::string observer : {"EmaMinMax", "Kl", "Percentile", "MinMax"}) {
    const backends::BackendConfig backend = tinyBackend(
        {{"activation", {{"observer", observer}}}, {"weight", {{"observer", "MinMax"}}}});
    for (int64_t batches : {5, 10}) {  // 5: rank 0 runs three batches, rank 1 two
      algos::CalibrationResult alone, shared;
      auto one = calibrated(backend, batches, nullptr, &alone);
      auto ranked = calibrated(backend, batches, &group, &shared);
      EXPECT_EQ(shared.batches, batches);
      EXPECT_EQ(shared.samples, alone.samples);
      ASSERT_EQ(one->quantizers().size(), ranked->quantizers().size());
      for (size_t i = 0; i < one->quantizers().size(); ++i) {
        quant::FakeQuantizer& a = *one->quantizers()[i];
        quant::FakeQuantizer& b = *ranked->quantizers()[i];
        EXPECT_TRUE(at::equal(a.qparams().scale, b.qparams().scale))
            << observer << ", " << batches << " batches: " << a.name();
        EXPECT_TRUE(at::equal(a.qparams().zero_point, b.qparams().zero_point)) << a.name();
      }
    }
  }
}

}  // namespace
}  // namespace qforge::testing
