// FakeQuantizer: one quantization point of a model (a weight or an activation), owning its scheme,
// an optional observer and the quantizer's own parameters. Subclasses implement one fake-quantize
// algorithm each (fixed affine, LSQ, PACT, ...). Modes switch per quantizer, or for a whole model
// with setMode(list, mode).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "quant/observer.h"
#include "quant/qparams.h"
#include "quant/qscheme.h"

namespace qforge {
namespace quant {

enum class FakeQuantMode {
  Float,                 // observer off, quantization off: the float model
  Calibration,           // observer on, quantization off (PTQ calibration)
  Quantization,          // observer off, quantization on (evaluation, QAT with learned params)
  CalibrateAndQuantize,  // both (QAT with observer-driven params, PyTorch's default)
};

const char* toString(FakeQuantMode mode);

class FakeQuantizer {
 public:
  // `observer` may be null for quantizers whose parameters are set or learned directly. A
  // quantizer with an observer starts in Calibration mode, one without in Quantization mode.
  FakeQuantizer(std::string kind, std::string name, QScheme scheme,
                std::unique_ptr<Observer> observer);
  virtual ~FakeQuantizer() = default;
  FakeQuantizer(const FakeQuantizer&) = delete;
  FakeQuantizer& operator=(const FakeQuantizer&) = delete;

  // Observes and/or fake-quantizes x according to the mode. Throws qforge::Error naming the
  // quantizer when quantization is on but no parameters were ever calibrated or loaded.
  virtual at::Tensor forward(const at::Tensor& x);

  virtual void setMode(FakeQuantMode mode);
  FakeQuantMode mode() const;
  void setObserverEnabled(bool enabled) { observer_enabled_ = enabled; }
  void setFakeQuantEnabled(bool enabled) { fake_quant_enabled_ = enabled; }
  bool observerEnabled() const { return observer_enabled_; }
  bool fakeQuantEnabled() const { return fake_quant_enabled_; }

  // Tensors an optimizer should update (empty for observer-driven quantizers).
  virtual std::vector<at::Tensor> parameters() const { return {}; }
  // The scale / zero point a deployment would use now (after pulling fresh observer results).
  QParams qparams();
  // False for grids no scale / zero point describes (NNIE's logarithmic one): qparams() throws,
  // and state() is what describes the quantizer.
  virtual bool affine() const { return true; }

  // Named tensors that fully describe the quantizer's learned or calibrated state, for
  // checkpoints. loadState() refuses missing names and mismatched shapes.
  virtual std::map<std::string, at::Tensor> state() const = 0;
  virtual void loadState(const std::map<std::string, at::Tensor>& state) = 0;

  const std::string& kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const QScheme& scheme() const { return scheme_; }
  Observer* observer() const { return observer_.get(); }

 protected:
  // Fake quantization with the current parameters.
  virtual at::Tensor quantize(const at::Tensor& x) = 0;
  // Takes the observer's results into the quantizer's parameters.
  virtual void initFromObserver() = 0;
  virtual bool hasParameters() const = 0;
  virtual QParams currentQParams() const = 0;

  [[noreturn]] void fail(const std::string& message) const;
  // Fetches a copy of state[key], or fails when it is missing or not 1-D with `numel` values
  // (numel < 0: any count).
  at::Tensor stateEntry(const std::map<std::string, at::Tensor>& state, const std::string& key,
                        int64_t numel = -1) const;
  // Pulls observer results if new data arrived since the last pull.
  void refreshFromObserver();

 private:
  std::string kind_;
  std::string name_;
  QScheme scheme_;
  std::unique_ptr<Observer> observer_;
  bool observer_enabled_ = false;
  bool fake_quant_enabled_ = true;
  int64_t pulled_batches_ = 0;
};

// Switches every quantizer of a model at once.
void setMode(const std::vector<FakeQuantizer*>& quantizers, FakeQuantMode mode);

}  // namespace quant
}  // namespace qforge
