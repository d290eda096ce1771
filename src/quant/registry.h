// Observers and fake quantizers by name, so backend configs (data, not code) can ask for
// "Kl" or "LSQ+" with numeric options. Registration is explicit: registerBuiltinObservers() /
// registerBuiltinFakeQuantizers() fill a registry; a new algorithm adds itself with add().
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "quant/fake_quantizer.h"
#include "quant/observer.h"

namespace qforge {
namespace quant {

// Numeric options of one observer or quantizer. Reading marks an option as used; finish() throws
// qforge::Error naming the kind when an option was never read (a typo in a config).
class QuantOptions {
 public:
  QuantOptions(std::string kind, std::map<std::string, double> values);
  double get(const std::string& key, double fallback);
  int64_t getInt(const std::string& key, int64_t fallback);
  bool getBool(const std::string& key, bool fallback);
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  void finish() const;

 private:
  std::string kind_;
  std::map<std::string, double> values_;
  std::map<std::string, bool> used_;
};

class ObserverRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Observer>(const std::string& tensor_name,
                                                          const QScheme& scheme, QuantOptions&)>;
  void add(const std::string& kind, Factory factory);
  // Throws qforge::Error for unknown kinds (listing the known ones) and unknown options.
  std::unique_ptr<Observer> create(const std::string& kind, const std::string& tensor_name,
                                   const QScheme& scheme,
                                   const std::map<std::string, double>& options = {}) const;
  std::vector<std::string> kinds() const;

 private:
  std::map<std::string, Factory> factories_;
};

class FakeQuantizerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<FakeQuantizer>(
      const std::string& name, const QScheme& scheme, std::unique_ptr<Observer> observer,
      QuantOptions&)>;
  void add(const std::string& kind, Factory factory);
  // `observer` may be null where the algorithm allows it. Throws like ObserverRegistry::create.
  std::unique_ptr<FakeQuantizer> create(const std::string& kind, const std::string& name,
                                        const QScheme& scheme, std::unique_ptr<Observer> observer,
                                        const std::map<std::string, double>& options = {}) const;
  std::vector<std::string> kinds() const;

 private:
  std::map<std::string, Factory> factories_;
};

// MinMax, EmaMinMax{ratio}, Percentile{percentile}, EmaQuantile{percentile, ratio, bins},
// Mse{p, steps, step}, EmaMse{p, steps, step, ratio}, ClipStd{std_scale}, LsqInit,
// Kl{bins, quantized_bins}, PowerOfTwo{search_steps, most_frequent, min_log2_scale}.
void registerBuiltinObservers(ObserverRegistry& registry);

// Fixed, LSQ{grad_scaling, grad_scale_per_channel}, LSQ+{same}, PACT{alpha}, DSQ{alpha,
// learn_alpha}, DoReFa, TQT, NNIE, AdaRound. Any of them wrapped in QDrop with the option
// drop_probability > 0.
void registerBuiltinFakeQuantizers(FakeQuantizerRegistry& registry);

// Registries holding just the built-ins, made once.
const ObserverRegistry& builtinObservers();
const FakeQuantizerRegistry& builtinFakeQuantizers();

}  // namespace quant
}  // namespace qforge
