#include "algos/calibration_sync.h"

#include "algos/distributed.h"
#include "core/error.h"

namespace qforge::algos {

namespace {

// Dtypes a summary may hold, by their code on the wire; each value travels as a double, exactly.
const std::vector<at::ScalarType> kWireTypes = {at::kFloat, at::kDouble, at::kLong};

double wireCode(at::ScalarType type) {
  for (size_t i = 0; i < kWireTypes.size(); ++i) {
    if (kWireTypes[i] == type) return static_cast<double>(i);
  }
  throw Error("calibration sync: an observer summary holds " + std::string(at::toString(type)) +
              " values; only float, double and int64 travel between ranks");
}

// Reads the packed vector front to back.
class Reader {
 public:
  explicit Reader(const at::Tensor& packed)
      : data_(packed.data_ptr<double>()), size_(packed.numel()) {}
  double next() {
    require(position_ < size_, "calibration sync: a rank sent truncated observations");
    return data_[position_++];
  }
  int64_t nextCount() { return static_cast<int64_t>(next()); }
  at::Tensor nextValues(std::vector<int64_t> sizes, at::ScalarType type) {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    require(position_ + n <= size_, "calibration sync: a rank sent truncated observations");
    at::Tensor values =
        at::from_blob(const_cast<double*>(data_ + position_), {n}, at::kDouble).to(type);
    position_ += n;
    return values.view(sizes);
  }
  bool done() const { return position_ == size_; }

 private:
  const double* data_;
  int64_t size_;
  int64_t position_ = 0;
};

}  // namespace

at::Tensor packObservations(const std::vector<quant::HeldObservations>& held) {
  std::vector<double> out;
  for (const quant::HeldObservations& h : held) {
    out.insert(out.end(),
               {static_cast<double>(h.batches), static_cast<double>(h.empty_tensors),
                static_cast<double>(h.channels), static_cast<double>(h.summaries.size())});
    for (const quant::BatchSummary& summary : h.summaries) {
      out.push_back(static_cast<double>(summary.size()));
      for (const at::Tensor& t : summary) {
        out.push_back(wireCode(t.scalar_type()));
        out.push_back(static_cast<double>(t.dim()));
        for (int64_t s : t.sizes())
          out.push_back(static_cast<double>(s));
        const at::Tensor values = t.to(at::kDouble).contiguous();
        out.insert(out.end(), values.data_ptr<double>(),
                   values.data_ptr<double>() + values.numel());
      }
    }
  }
  return at::tensor(out, at::kDouble);
}

std::vector<quant::HeldObservations> unpackObservations(const at::Tensor& packed,
                                                        size_t observers) {
  Reader in(packed.contiguous());
  std::vector<quant::HeldObservations> held(observers);
  for (quant::HeldObservations& h : held) {
    h.batches = in.nextCount();
    h.empty_tensors = in.nextCount();
    h.channels = in.nextCount();
    const int64_t summaries = in.nextCount();
    for (int64_t s = 0; s < summaries; ++s) {
      quant::BatchSummary summary(static_cast<size_t>(in.nextCount()));
      for (at::Tensor& t : summary) {
        const int64_t code = in.nextCount();
        require(code >= 0 && code < static_cast<int64_t>(kWireTypes.size()),
                "calibration sync: a rank sent an unknown dtype code");
        std::vector<int64_t> sizes(static_cast<size_t>(in.nextCount()));
        for (int64_t& size : sizes)
          size = in.nextCount();
        t = in.nextValues(sizes, kWireTypes[static_cast<size_t>(code)]);
      }
      h.summaries.push_back(std::move(summary));
    }
  }
  require(in.done(),
          "calibration sync: a rank sent observations for more observers than this "
          "rank has; start every rank with the same model, backend and config");
  return held;
}

void holdObservations(const std::vector<quant::Observer*>& observers, bool hold) {
  for (quant::Observer* o : observers)
    o->holdObservations(hold);
}

void foldObservationsOfAllRanks(ProcessGroup* group,
                                const std::vector<quant::Observer*>& observers) {
  std::vector<quant::HeldObservations> mine;
  for (quant::Observer* o : observers)
    mine.push_back(o->takeHeld());
  if (!group || group->worldSize() == 1) {
    for (size_t i = 0; i < observers.size(); ++i)
      observers[i]->fold(mine[i]);
    return;
  }
  const std::vector<at::Tensor> ranks = group->allGather(packObservations(mine));
  std::vector<std::vector<quant::HeldObservations>> unpacked;
  for (const at::Tensor& packed : ranks)
    unpacked.push_back(unpackObservations(packed, observers.size()));
  for (size_t i = 0; i < observers.size(); ++i) {
    for (const auto& rank : unpacked)
      observers[i]->fold(rank[i]);
  }
}

}  // namespace qforge::algos
