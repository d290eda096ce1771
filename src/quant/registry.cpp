#include "quant/registry.h"

#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "quant/fake_quantizers/adaround.h"
#include "quant/fake_quantizers/dorefa.h"
#include "quant/fake_quantizers/dsq.h"
#include "quant/fake_quantizers/fixed.h"
#include "quant/fake_quantizers/lsq.h"
#include "quant/fake_quantizers/nnie.h"
#include "quant/fake_quantizers/pact.h"
#include "quant/fake_quantizers/qdrop.h"
#include "quant/fake_quantizers/tqt.h"
#include "quant/observers/clip_std.h"
#include "quant/observers/kl.h"
#include "quant/observers/lsq_init.h"
#include "quant/observers/minmax.h"
#include "quant/observers/mse.h"
#include "quant/observers/percentile.h"
#include "quant/observers/power_of_two.h"

namespace qforge {
namespace quant {

namespace {

template <typename Map>
std::string knownKinds(const Map& factories) {
  std::vector<std::string> kinds;
  for (const auto& [kind, factory] : factories)
    kinds.push_back(kind);
  return join(kinds);
}

}  // namespace

QuantOptions::QuantOptions(std::string kind, std::map<std::string, double> values)
    : kind_(std::move(kind)), values_(std::move(values)) {}

double QuantOptions::get(const std::string& key, double fallback) {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_[key] = true;
  return it->second;
}

int64_t QuantOptions::getInt(const std::string& key, int64_t fallback) {
  const double v = get(key, static_cast<double>(fallback));
  require(v == std::floor(v),
          kind_ + ": option '" + key + "' must be an integer, got " + std::to_string(v));
  return static_cast<int64_t>(v);
}

bool QuantOptions::getBool(const std::string& key, bool fallback) {
  const double v = get(key, fallback ? 1.0 : 0.0);
  require(v == 0.0 || v == 1.0, kind_ + ": option '" + key + "' must be 0 or 1");
  return v == 1.0;
}

void QuantOptions::finish() const {
  for (const auto& [key, value] : values_) {
    (void)value;
    require(used_.count(key) > 0, kind_ + ": unknown option '" + key + "'");
  }
}

void ObserverRegistry::add(const std::string& kind, Factory factory) {
  require(factories_.count(kind) == 0, "observer kind '" + kind + "' is registered twice");
  factories_[kind] = std::move(factory);
}

std::unique_ptr<Observer> ObserverRegistry::create(
    const std::string& kind, const std::string& tensor_name, const QScheme& scheme,
    const std::map<std::string, double>& options) const {
  // "none": a fake quantizer that needs no range (DoReFa's weights) or gets its parameters set.
  if (kind == "none") {
    require(options.empty(), "observer 'none' takes no options");
    return nullptr;
  }
  auto it = factories_.find(kind);
  require(it != factories_.end(),
          "unknown observer '" + kind + "'; known: none, " + knownKinds(factories_));
  QuantOptions reader(kind + " observer", options);
  std::unique_ptr<Observer> observer = it->second(tensor_name, scheme, reader);
  reader.finish();
  return observer;
}

std::vector<std::string> ObserverRegistry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, factory] : factories_)
    out.push_back(kind);
  return out;
}

void FakeQuantizerRegistry::add(const std::string& kind, Factory factory) {
  require(factories_.count(kind) == 0, "fake quantizer kind '" + kind + "' is registered twice");
  factories_[kind] = std::move(factory);
}

std::unique_ptr<FakeQuantizer> FakeQuantizerRegistry::create(
    const std::string& kind, const std::string& name, const QScheme& scheme,
    std::unique_ptr<Observer> observer, const std::map<std::string, double>& options) const {
  auto it = factories_.find(kind);
  require(it != factories_.end(),
          "unknown fake quantizer '" + kind + "'; known: " + knownKinds(factories_));
  QuantOptions reader(kind + " fake quantizer", options);
  const double drop = reader.get("drop_probability", 0.0);
  std::unique_ptr<FakeQuantizer> quantizer = it->second(name, scheme, std::move(observer), reader);
  reader.finish();
  if (drop > 0.0) return std::make_unique<QDropFakeQuantizer>(std::move(quantizer), drop);
  return quantizer;
}

std::vector<std::string> FakeQuantizerRegistry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [kind, factory] : factories_)
    out.push_back(kind);
  return out;
}

void registerBuiltinObservers(ObserverRegistry& r) {
  r.add("MinMax", [](const std::string& t, const QScheme& s, QuantOptions&) {
    return std::make_unique<MinMaxObserver>(t, s);
  });
  r.add("EmaMinMax", [](const std::string& t, const QScheme& s, QuantOptions& o) {
    return std::make_unique<EmaMinMaxObserver>(t, s, o.get("ratio", 0.9));
  });
  r.add("Percentile", [](const std::string& t, const QScheme& s, QuantOptions& o) {
    return std::make_unique<PercentileObserver>(t, s, o.get("percentile", 99.99));
  });
  r.add("EmaQuantile", [](const std::string& t, const QScheme& s, QuantOptions& o) {
    return std::make_unique<EmaQuantileObserver>(t, s, o.get("percentile", 99.999),
                                                 o.get("ratio", 0.9), o.getInt("bins", 2048));
  });
  auto mseSearch = [](QuantOptions& o) {
    MseSearch search;
    search.p = o.get("p", search.p);
    search.steps = o.getInt("steps", search.steps);
    search.step = o.get("step", search.step);
    return search;
  };
  r.add("Mse", [mseSearch](const std::string& t, const QScheme& s, QuantOptions& o) {
    return std::make_unique<MseObserver>(t, s, mseSearch(o));
  });
  r.add("EmaMse", [mseSearch](const std::string& t, const QScheme& s, QuantOptions& o) {
    const MseSearch search = mseSearch(o);
    return std::make_unique<EmaMseObserver>(t, s, search, o.get("ratio", 0.9));
  });
  r.add("ClipStd", [](const std::string& t, const QScheme& s, QuantOptions& o) {
    return std::make_unique<ClipStdObserver>(t, s, o.get("std_scale", 2.6));
  });
  r.add("LsqInit", [](const std::string& t, const QScheme& s, QuantOptions&) {
    return std::make_unique<LsqInitObserver>(t, s);
  });
  r.add("Kl", [](const std::string& t, const QScheme& s, QuantOptions& o) {
    return std::make_unique<KlObserver>(t, s, o.getInt("bins", 2048), o.getInt("quantized_bins", 0),
                                        o.getBool("keep_first_bin", false));
  });
  r.add("PowerOfTwo", [](const std::string& t, const QScheme& s, QuantOptions& o) {
    PowerOfTwoObserver::Options options;
    options.search_steps = o.getInt("search_steps", 1);
    options.selection = o.getBool("most_frequent", false)
                            ? PowerOfTwoObserver::Selection::MostFrequent
                            : PowerOfTwoObserver::Selection::LastBatch;
    if (o.has("min_log2_scale"))
      options.min_log2_scale = static_cast<int>(o.getInt("min_log2_scale", 0));
    return std::make_unique<PowerOfTwoObserver>(t, s, options);
  });
}

void registerBuiltinFakeQuantizers(FakeQuantizerRegistry& r) {
  using Obs = std::unique_ptr<Observer>;
  r.add("Fixed", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions&) {
    return std::make_unique<FixedFakeQuantizer>(n, s, std::move(obs));
  });
  // LSQ and LSQ+ differ only in whether the zero point learns.
  const auto lsq = [](bool learn_zero_point) {
    return [learn_zero_point](const std::string& n, const QScheme& s, Obs obs, QuantOptions& o) {
      LsqFakeQuantizer::Options options;
      options.learn_zero_point = learn_zero_point;
      options.grad_scaling = o.getBool("grad_scaling", true);
      options.grad_scale_per_channel = o.getBool("grad_scale_per_channel", true);
      return std::make_unique<LsqFakeQuantizer>(n, s, std::move(obs), options);
    };
  };
  r.add("LSQ", lsq(false));
  r.add("LSQ+", lsq(true));
  r.add("PACT", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions& o) {
    return std::make_unique<PactFakeQuantizer>(n, s, o.get("alpha", 10.0), std::move(obs));
  });
  r.add("DSQ", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions& o) {
    return std::make_unique<DsqFakeQuantizer>(n, s, std::move(obs), o.get("alpha", 0.4),
                                              o.getBool("learn_alpha", true));
  });
  r.add("DoReFa", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions&) {
    require(obs == nullptr, "DoReFa fake quantizer '" + n + "' takes no observer");
    return std::make_unique<DorefaFakeQuantizer>(n, s);
  });
  r.add("TQT", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions&) {
    return std::make_unique<TqtFakeQuantizer>(n, s, std::move(obs));
  });
  r.add("NNIE", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions&) {
    return std::make_unique<NnieFakeQuantizer>(n, s, std::move(obs));
  });
  r.add("AdaRound", [](const std::string& n, const QScheme& s, Obs obs, QuantOptions&) {
    return std::make_unique<AdaRoundFakeQuantizer>(n, s, std::move(obs));
  });
}

const ObserverRegistry& builtinObservers() {
  static const ObserverRegistry registry = [] {
    ObserverRegistry r;
    registerBuiltinObservers(r);
    return r;
  }();
  return registry;
}

const FakeQuantizerRegistry& builtinFakeQuantizers() {
  static const FakeQuantizerRegistry registry = [] {
    FakeQuantizerRegistry r;
    registerBuiltinFakeQuantizers(r);
    return r;
  }();
  return registry;
}

}  // namespace quant
}  // namespace qforge
