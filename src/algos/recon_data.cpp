#include "algos/recon_data.h"

#include "algos/calibrate.h"
#include "core/error.h"

namespace qforge::algos {
namespace {

int64_t rowBytes(const at::Tensor& t) {
  return t.size(0) == 0 ? 0 : t.numel() / t.size(0) * static_cast<int64_t>(t.element_size());
}

// Cached rows, batches and the loss all index samples on axis 0, so a unit's entry and exit must
// hold one row per sample there; says which value does not, instead of slicing the wrong axis.
void requireRowPerSample(const at::Tensor& t, int64_t samples, const ReconUnit& unit,
                         const std::string& value) {
  if (t.dim() >= 1 && t.size(0) == samples) return;
  throw Error("reconstruction unit '" + unit.name + "': value '" + value + "' has shape " +
              c10::str(t.sizes()) + ", not one row per sample (" + std::to_string(samples) +
              ") on axis 0, where reconstruction compares samples; try the other granularity "
              "(pattern: layer or block)");
}

at::Tensor catOrUndefined(const std::vector<at::Tensor>& parts) {
  if (parts.empty() || !parts.front().defined()) return {};
  return at::cat(parts);
}

}  // namespace

UnitData::UnitData(passes::PreparedModel& model, Executor& executor, const at::Tensor& images,
                   const ReconUnit& unit, const std::map<std::string, at::Tensor>& rounded,
                   bool keep_float_input, int64_t byte_budget, int64_t chunk)
    : model_(model),
      executor_(executor),
      images_(images),
      unit_(unit),
      rounded_(rounded),
      input_name_(dataInput(model.graph()).name()),
      keep_float_input_(keep_float_input) {
  require(images.dim() >= 1 && images.size(0) > 0, "reconstruction needs calibration samples");
  require(chunk > 0, "the caching batch must hold at least one sample");
  std::vector<at::Tensor> quant_in, float_in, float_out;
  for (int64_t start = 0; start < images.size(0); start += chunk) {
    const UnitBatch b = compute(images.narrow(0, start, std::min(chunk, images.size(0) - start)));
    const int64_t bytes_per_sample = rowBytes(b.quant_input) + rowBytes(b.float_output) +
                                     (b.float_input.defined() ? rowBytes(b.float_input) : 0);
    const int64_t room = bytes_per_sample == 0 ? b.quant_input.size(0)
                                               : (byte_budget - cached_bytes_) / bytes_per_sample;
    const int64_t take = std::min<int64_t>(room, b.quant_input.size(0));
    if (take <= 0) break;
    quant_in.push_back(b.quant_input.narrow(0, 0, take).clone());
    float_out.push_back(b.float_output.narrow(0, 0, take).clone());
    if (b.float_input.defined()) float_in.push_back(b.float_input.narrow(0, 0, take).clone());
    cached_ += take;
    cached_bytes_ += take * bytes_per_sample;
    if (take < b.quant_input.size(0)) break;
  }
  cache_ = UnitBatch{catOrUndefined(quant_in), catOrUndefined(float_in), catOrUndefined(float_out)};
}

UnitBatch UnitData::compute(const at::Tensor& images) {
  at::NoGradGuard no_grad;
  model_.setMode(quant::FakeQuantMode::Float);
  TensorMap fp = executor_.run({{input_name_, images}}, {unit_.entry, unit_.exit});
  TensorMap feeds(rounded_.begin(), rounded_.end());
  feeds[input_name_] = images;
  model_.setMode(quant::FakeQuantMode::Quantization);
  TensorMap q = executor_.run(feeds, {unit_.entry});
  const int64_t n = images.size(0);
  requireRowPerSample(q.at(unit_.entry), n, unit_, unit_.entry);
  requireRowPerSample(fp.at(unit_.exit), n, unit_, unit_.exit);
  UnitBatch b;
  b.quant_input = q.at(unit_.entry);
  b.float_output = fp.at(unit_.exit);
  if (keep_float_input_) b.float_input = fp.at(unit_.entry);
  return b;
}

UnitBatch UnitData::gather(const at::Tensor& indices) {
  const at::Tensor cached_mask = indices < cached_;
  const int64_t hits = cached_mask.sum().item<int64_t>();
  if (hits == indices.numel()) {
    return UnitBatch{cache_.quant_input.index_select(0, indices),
                     keep_float_input_ ? cache_.float_input.index_select(0, indices) : at::Tensor(),
                     cache_.float_output.index_select(0, indices)};
  }
  // Misses run through the model now, then every row goes back to its place in the batch.
  const at::Tensor missed = indices.masked_select(~cached_mask);
  recomputed_ += missed.numel();
  const UnitBatch fresh = compute(images_.index_select(0, missed));
  auto assemble = [&](const at::Tensor& cached, const at::Tensor& computed) {
    std::vector<int64_t> shape = computed.sizes().vec();
    shape[0] = indices.numel();
    at::Tensor out = at::empty(shape, computed.options());
    if (hits > 0) {
      out.index_copy_(0, cached_mask.nonzero().reshape(-1),
                      cached.index_select(0, indices.masked_select(cached_mask)));
    }
    out.index_copy_(0, (~cached_mask).nonzero().reshape(-1), computed);
    return out;
  };
  return UnitBatch{
      assemble(cache_.quant_input, fresh.quant_input),
      keep_float_input_ ? assemble(cache_.float_input, fresh.float_input) : at::Tensor(),
      assemble(cache_.float_output, fresh.float_output)};
}

}  // namespace qforge::algos
