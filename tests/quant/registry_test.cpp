#include "quant/registry.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "quant/fake_quantizers/qdrop.h"
#include "quant/observers/kl.h"

namespace qforge::quant {
namespace {

void expectErrorContaining(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected a qforge::Error containing '" << part << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(RegistryTest, CreatesEveryBuiltinObserver) {
  ObserverRegistry registry;
  registerBuiltinObservers(registry);
  EXPECT_EQ(registry.kinds().size(), 10u);
  at::manual_seed(0);
  const at::Tensor x = at::randn({4096});
  for (const std::string& kind : registry.kinds()) {
    auto obs = registry.create(kind, "act", QScheme::int8Symmetric());
    obs->observe(x);
    EXPECT_EQ(obs->kind(), kind);
    EXPECT_GT(obs->qparams().scaleValue(), 0.0f) << kind;
  }
  // Options reach the observer: a 4-bit KL observer with 512 bins keeps >= 8 quantized bins.
  QScheme s4 = QScheme::int8Symmetric();
  s4.bits = 4;
  auto kl = registry.create("Kl", "act", s4, {{"bins", 512}});
  kl->observe(x);
  EXPECT_EQ(static_cast<KlObserver&>(*kl).calibrationHistogram().size(), 512u);
}

TEST(RegistryTest, RefusesUnknownKindsAndOptions) {
  ObserverRegistry registry;
  registerBuiltinObservers(registry);
  expectErrorContaining([&] { registry.create("Histogram", "x", QScheme{}); },
                        "unknown observer 'Histogram'; known: none, ClipStd, EmaMinMax");
  // "none": no observer, for quantizers that need no range (DoReFa weights).
  EXPECT_EQ(registry.create("none", "x", QScheme{}), nullptr);
  expectErrorContaining(
      [&] {
        registry.create("none", "x", QScheme{}, {{"ratio", 0.5}});
      },
      "observer 'none' takes no options");
  expectErrorContaining(
      [&] {
        registry.create("EmaMinMax", "x", QScheme{}, {{"ration", 0.5}});
      },
      "EmaMinMax observer: unknown option 'ration'");
  expectErrorContaining(
      [&] {
        registry.create("Kl", "x", QScheme{}, {{"bins", 100.5}});
      },
      "'bins' must be an integer");
  expectErrorContaining(
      [&] {
        registry.add("MinMax", [](const std::string&, const QScheme&, QuantOptions&) {
          return std::unique_ptr<Observer>();
        });
      },
      "registered twice");
}

TEST(RegistryTest, CreatesFakeQuantizersAndWrapsQDrop) {
  ObserverRegistry observers;
  registerBuiltinObservers(observers);
  FakeQuantizerRegistry quantizers;
  registerBuiltinFakeQuantizers(quantizers);
  EXPECT_EQ(quantizers.kinds().size(), 9u);
  const QScheme asym = QScheme::uint8Asymmetric();
  auto lsq_plus = quantizers.create("LSQ+", "act", asym, observers.create("MinMax", "act", asym));
  EXPECT_EQ(lsq_plus->kind(), "LSQ+");
  auto dropped = quantizers.create("Fixed", "act", asym, observers.create("MinMax", "act", asym),
                                   {{"drop_probability", 0.5}});
  ASSERT_NE(dynamic_cast<QDropFakeQuantizer*>(dropped.get()), nullptr);
  EXPECT_DOUBLE_EQ(static_cast<QDropFakeQuantizer&>(*dropped).dropProbability(), 0.5);
  expectErrorContaining([&] { quantizers.create("LSQ++", "w", asym, nullptr); },
                        "unknown fake quantizer 'LSQ++'");
  expectErrorContaining(
      [&] {
        quantizers.create("PACT", "w", asym, nullptr, {{"beta", 1.0}});
      },
      "PACT fake quantizer: unknown option 'beta'");
}

}  // namespace
}  // namespace qforge::quant
