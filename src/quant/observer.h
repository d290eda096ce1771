// Observer: watches the tensors flowing through one quantization point during calibration and
// turns what it saw into a clipping range and quantization parameters. Subclasses implement one
// range-selection rule each (min/max, EMA, percentile, MSE, KL, ...).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "quant/qparams.h"
#include "quant/qscheme.h"
#include "quant/tensor_stats.h"

namespace qforge {
namespace quant {

// One batch's contribution to an observer's state (a batch's range, or its histogram, or its
// moments): what data-parallel ranks exchange (algos/calibration_sync.h). Folding every batch's
// summary in order gives the state of one process that observed them all.
using BatchSummary = std::vector<at::Tensor>;

// What an observer saw since it last handed its summaries over.
struct HeldObservations {
  int64_t batches = 0;        // observations with data, repeats of an unchanged tensor included
  int64_t empty_tensors = 0;  // observations of tensors without elements
  int64_t channels = 0;       // the per-channel axis's size; 0 when per-tensor or nothing seen
  std::vector<BatchSummary> summaries;
};

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

  // Data-parallel calibration: while holding, observe() keeps each batch's summary instead of
  // folding it into the state; takeHeld() hands them over (and empties the hold), and fold()
  // applies observations, this rank's and the other ranks', in global batch order.
  void holdObservations(bool hold) { holding_ = hold; }
  HeldObservations takeHeld();
  void fold(const HeldObservations& observed);

  bool hasData() const { return batches_ > 0; }
  int64_t batches() const { return batches_; }
  // Tensors seen with no element (a detector's boxes when it found none): they set no range.
  int64_t emptyTensors() const { return empty_tensors_; }
  void reset();

  const std::string& kind() const { return kind_; }
  const std::string& tensorName() const { return tensor_name_; }
  const QScheme& scheme() const { return scheme_; }

  // Scalar range as [1] float tensors (what per-tensor observers summarize a batch by).
  static std::pair<at::Tensor, at::Tensor> scalarRange(double lo, double hi);

 protected:
  // The batch's contribution; `x` is contiguous float32 and finite, `stats` its per-tensor
  // min/max. Reads no state, except where a rule's per-batch choice depends on what came before
  // (the power-of-two search); then N ranks approximate one.
  virtual BatchSummary summarizeBatch(const at::Tensor& x, const MinMax& stats) = 0;
  // Adds one batch's summary to the state.
  virtual void foldBatch(const BatchSummary& summary) = 0;
  virtual std::pair<at::Tensor, at::Tensor> computeRange() const = 0;
  // Default: qparamsFromMinMax(range). Observers that pick a scale directly override this.
  virtual QParams computeQParams() const;
  // True when observing a tensor a second time leaves the state as it was (a running min/max).
  // Such an observer skips the tensor it has just seen when it comes back unchanged: a weight,
  // which calibration feeds it on every batch, is then read once.
  virtual bool repeatIsNoOp() const { return false; }
  // Per-tensor observers whose batch summary is the batch's range alone fold [lo, hi] here and
  // return true: the summary's two tensors and the state's update through ATen cost more than
  // scanning a batch-1 activation. False (the default) sends the batch through summarizeBatch.
  virtual bool foldRange(double /*lo*/, double /*hi*/) { return false; }
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
  // True once a batch's summary was folded into the state (false for the first one).
  bool hasFolded() const { return folded_ > 0; }

 private:
  // One batch's summary, kept while holding and folded into the state otherwise.
  void holdOrFold(const at::Tensor& data, const MinMax& stats, int64_t channels);

  std::string kind_;
  std::string tensor_name_;
  QScheme scheme_;
  int64_t batches_ = 0;
  int64_t empty_tensors_ = 0;
  int64_t channels_ = 1;
  int64_t folded_ = 0;
  bool holding_ = false;
  HeldObservations held_;
  // The last tensor observed, for repeatIsNoOp observers: a weak reference (an activation must
  // stay the executor's alone, to be overwritten in place) and the version it had.
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> last_seen_{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  int64_t last_version_ = -1;
};

}  // namespace quant
}  // namespace qforge
