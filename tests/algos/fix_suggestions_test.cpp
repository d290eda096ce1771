// The fixes analyze suggests for a culprit: each rule fires on its own evidence and only with
// what the backend allows, float is always last, and quantizers no per-node override reaches get
// none.
#include "algos/fix_suggestions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "support/quant_graphs.h"

namespace qforge::algos {
namespace {

passes::QuantPoint pointOf(passes::PointKind kind, const backends::QuantSpec& spec,
                           const std::string& unit = "conv1") {
  passes::QuantPoint p;
  p.kind = kind;
  p.quantizer = "q";
  p.value = "v";
  p.unit = unit;
  p.spec = spec;
  return p;
}

QuantizerSensitivity withRange(double outlier_ratio, std::optional<double> channel_spread = {},
                               std::optional<double> clipped = 0.0) {
  QuantizerSensitivity s;
  RangeSummary r;
  r.elements = 100;
  r.outlier_ratio = outlier_ratio;
  r.channel_spread = channel_spread;
  r.clipped_fraction = clipped;
  s.range = r;
  return s;
}

std::vector<std::string> fixesOf(const std::vector<FixSuggestion>& fixes) {
  std::vector<std::string> names;
  for (const FixSuggestion& f : fixes)
    names.push_back(f.fix);
  return names;
}

backends::BackendConfig perTensorBackend(const nlohmann::json& alternatives) {
  return testing::tinyBackend(
      {{"weight", {{"per_channel", false}}}, {"alternatives", alternatives}});
}

TEST(FixSuggestions, OutliersUnderMinMaxSuggestTheMseObserver) {
  const backends::BackendConfig b = testing::tinyBackend();
  const auto fixes = suggestFixes(pointOf(passes::PointKind::Activation, b.activation),
                                  withRange(kOutlierRatio * 2), "Conv", b);
  ASSERT_EQ(fixesOf(fixes), (std::vector<std::string>{"observer", "float"}));
  EXPECT_EQ(fixes[0].override_entry,
            nlohmann::json({{"name", "conv1"}, {"activation", {{"observer", "Mse"}}}}));
  EXPECT_NE(fixes[0].why.find("6.0x"), std::string::npos);
  EXPECT_EQ(fixes[1].override_entry, nlohmann::json({{"name", "conv1"}, {"skip", true}}));
  // Below the threshold: no observer fix.
  EXPECT_EQ(fixesOf(suggestFixes(pointOf(passes::PointKind::Activation, b.activation),
                                 withRange(kOutlierRatio / 2), "Conv", b)),
            std::vector<std::string>{"float"});
}

TEST(FixSuggestions, ClippingUnderAClippingObserverSuggestsMinMax) {
  backends::BackendConfig b = testing::tinyBackend();
  b.activation.observer = "Percentile";
  const auto fixes = suggestFixes(pointOf(passes::PointKind::Activation, b.activation),
                                  withRange(1.5, {}, 0.01), "Conv", b);
  ASSERT_EQ(fixesOf(fixes), (std::vector<std::string>{"observer", "float"}));
  EXPECT_EQ(fixes[0].override_entry["activation"]["observer"], "MinMax");
}

TEST(FixSuggestions, UnevenChannelsSuggestPerChannelOnlyWhereTheBackendAllowsIt) {
  const backends::BackendConfig allows = perTensorBackend({{"per_channel_weights", true}});
  auto fixes = suggestFixes(pointOf(passes::PointKind::Weight, allows.weight),
                            withRange(1.2, kChannelSpread * 3), "Conv+Relu", allows);
  ASSERT_EQ(fixesOf(fixes), (std::vector<std::string>{"per-channel", "cle", "float"}));
  EXPECT_EQ(fixes[0].override_entry["weight"]["per_channel"], true);
  EXPECT_EQ(fixes[1].flag, "--cle");
  EXPECT_TRUE(fixes[1].override_entry.is_null());

  const backends::BackendConfig refuses = perTensorBackend(nlohmann::json::object());
  fixes = suggestFixes(pointOf(passes::PointKind::Weight, refuses.weight),
                       withRange(1.2, kChannelSpread * 3), "Gemm", refuses);
  EXPECT_EQ(fixesOf(fixes), std::vector<std::string>{"float"});  // Gemm: no CLE either
}

TEST(FixSuggestions, WiderWidthsComeFromTheBackendsAlternatives) {
  const backends::BackendConfig b =
      testing::tinyBackend({{"alternatives", {{"activation_bits", {16}}, {"weight_bits", {4}}}}});
  auto fixes =
      suggestFixes(pointOf(passes::PointKind::Activation, b.activation), withRange(1), "Conv", b);
  ASSERT_EQ(fixesOf(fixes), (std::vector<std::string>{"16-bit", "float"}));
  EXPECT_EQ(fixes[0].override_entry["activation"]["bits"], 16);
  // Weights are at 8 bits, and 4 is narrower: nothing wider to offer.
  EXPECT_EQ(
      fixesOf(suggestFixes(pointOf(passes::PointKind::Weight, b.weight), withRange(1), "Conv", b)),
      std::vector<std::string>{"float"});
  backends::QuantSpec four = b.weight;
  four.scheme.bits = 4;
  fixes = suggestFixes(pointOf(passes::PointKind::Weight, four), withRange(1), "Conv", b);
  ASSERT_EQ(fixesOf(fixes), (std::vector<std::string>{"wider", "float"}));
  EXPECT_EQ(fixes[0].override_entry["weight"]["bits"], 8);
}

TEST(FixSuggestions, NoOverrideReachesGraphIoQuantizersOrDerivedBiases) {
  const backends::BackendConfig b = testing::tinyBackend();
  EXPECT_TRUE(
      suggestFixes(pointOf(passes::PointKind::Activation, b.activation, ""), withRange(10), "", b)
          .empty());
  EXPECT_TRUE(
      suggestFixes(pointOf(passes::PointKind::Bias, b.weight), withRange(10), "Conv", b).empty());
  // A fixed output (Sigmoid's grid) has its range from the function: float only.
  EXPECT_EQ(fixesOf(suggestFixes(pointOf(passes::PointKind::FixedOutput, b.activation),
                                 withRange(10), "Sigmoid", b)),
            std::vector<std::string>{"float"});
}

TEST(BackendAlternatives, DefaultsToTheBackendsOwnWidthsAndRefusesBadOnes) {
  const backends::BackendConfig plain = testing::tinyBackend();
  EXPECT_EQ(plain.alternatives.weight_bits, std::vector<int>{8});
  EXPECT_EQ(plain.alternatives.activation_bits, std::vector<int>{8});
  EXPECT_TRUE(plain.alternatives.per_channel_weights);  // the tiny backend's weights are
  const backends::BackendConfig listed =
      testing::tinyBackend({{"alternatives", {{"weight_bits", {4, 2, 4}}}}});
  EXPECT_EQ(listed.alternatives.weight_bits, (std::vector<int>{2, 4, 8}));
  for (const nlohmann::json& bad :
       {nlohmann::json({{"weight_bits", {1}}}), nlohmann::json({{"activation_bits", "16"}}),
        nlohmann::json({{"bits", {8}}})}) {
    EXPECT_THROW(testing::tinyBackend({{"alternatives", bad}}), Error) << bad.dump();
  }
  EXPECT_EQ(backends::loadBackend("QNN").alternatives.activation_bits, (std::vector<int>{8, 16}));
  EXPECT_EQ(backends::loadBackend("TensorRT").alternatives.weight_bits, std::vector<int>{8});
}

}  // namespace
}  // namespace qforge::algos
