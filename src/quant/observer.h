// Observer: watches the tensors flowing through one quantization point during calibration and
// turns what it saw into a clipping range and quantization parameters. Subclasses implement one
// range-selection rule each (min/max, EMA, percentile, MSE, KL, ...).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "quant/qparams.h"
#include "quant/qscheme.h"
#include "quant/tensor_stats.h"

namespace qforge {
namespace quant {

class Observer {
 public:
  // `tensor_name` names the observed value in every error message. Throws qforge::Error when the
  // scheme is invalid or per-channel while the rule is per-tensor only.
  Observer(std::string kind, std::string tensor_name, QScheme scheme, bool supports_per_channel);
  virtual ~Observer() = default;
  Observer(const Observer&) = delete;
  Observer& operator=(const Observer&) = delete;

  // Records one batch (detached; any floating or integer dtype, any layout). Empty tensors are
  // ignored. Throws qforge::Error naming the tensor when the batch holds NaN or Inf, or when the
  // per-channel axis does not exist or the channel count changed.
  void observe(const at::Tensor& x);

  // Clipping range per channel ([C] or [1] float tensors). Throws when nothing was observed.
  std::pair<at::Tensor, at::Tensor> range() const;
  // Quantization parameters for the range. Throws when nothing was observed.
  QParams qparams() const;

  bool hasData() const { return batches_ > 0; }
  int64_t batches() const { return batches_; }
  // Tensors seen with no element (a detector's boxes when it found none): they set no range.
  int64_t emptyTensors() const { return empty_tensors_; }
  void reset();

  const std::string& kind() const { return kind_; }
  const std::string& tensorName() const { return tensor_name_; }
  const QScheme& scheme() const { return scheme_; }

 protected:
  // `x` is contiguous float32 and finite; `stats` is its per-tensor min/max.
  virtual void observeBatch(const at::Tensor& x, const MinMax& stats) = 0;
  virtual std::pair<at::Tensor, at::Tensor> computeRange() const = 0;
  // Default: qparamsFromMinMax(range). Observers that pick a scale directly override this.
  virtual QParams computeQParams() const;
  // True when observing a tensor a second time leaves the state as it was (a running min/max).
  // Such an observer skips the tensor it has just seen when it comes back unchanged: a weight,
  // which calibration feeds it on every batch, is then read once.
  virtual bool repeatIsNoOp() const { return false; }
  virtual void resetState() = 0;

  // Widens the running range [min, max] to include [lo, hi]; an undefined range takes [lo, hi].
  static void widenRange(at::Tensor& min, at::Tensor& max, const at::Tensor& lo,
                         const at::Tensor& hi);
  // Moves the running range toward [lo, hi] by exponential averaging (double precision):
  // range = range * ratio + batch * (1 - ratio); an undefined range takes [lo, hi].
  static void averageRange(at::Tensor& min, at::Tensor& max, const at::Tensor& lo,
                           const at::Tensor& hi, double ratio);
  // Fails unless `ratio` is a valid EMA ratio, in [0, 1).
  void checkEmaRatio(double ratio) const;
  // Throws qforge::Error "<kind> observer of tensor '<name>': <message>".
  [[noreturn]] void fail(const std::string& message) const;
  // Channel count of the per-channel axis, checked against earlier batches.
  int64_t channels() const { return channels_; }

  // Scalar range as [1] tensors.
  static std::pair<at::Tensor, at::Tensor> scalarRange(double lo, double hi);

 private:
  std::string kind_;
  std::string tensor_name_;
  QScheme scheme_;
  int64_t batches_ = 0;
  int64_t empty_tensors_ = 0;
  int64_t channels_ = 1;
  // The last tensor observed, for repeatIsNoOp observers: a weak reference (an activation must
  // stay the executor's alone, to be overwritten in place) and the version it had.
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> last_seen_{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  int64_t last_version_ = -1;
};

}  // namespace quant
}  // namespace qforge
