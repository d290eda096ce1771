// Quantization primitives benchmark.
//
// Default mode (Google Benchmark): fake-quantize throughput against a plain copy into a
// preallocated tensor of the same size, for 1M and 10M float32 elements, for the allocating
// autograd call, the out= variant and the in-place variant; prints each variant's speed as a
// fraction of copy speed measured in the same run.
//
// Stream mode: quant_bench --histogram-stream=FILE [--batch-size=N] [--repeats=R] [--json]
// times the KL (entropy) observer on the raw float32 batches in FILE (observe every batch, then
// compute qparams) and prints the best time and the chosen threshold, for
// bench/histogram_observer_vs_pytorch.py.
// It also times finiteMinMax, the scan every observer starts with, against ATen's aminmax.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/threads.h"
#include "quant/fake_quantize.h"
#include "quant/observers/kl.h"
#include "quant/tensor_stats.h"

namespace {

using qforge::quant::QParams;
using qforge::quant::QScheme;

QScheme benchScheme() {
  QScheme s = QScheme::int8Symmetric();
  s.division = qforge::quant::ScaleDivision::MultiplyByReciprocal;
  return s;
}

const QParams& benchParams() {
  static const QParams params = qforge::quant::makeQParams({0.02f}, {0});
  return params;
}

at::Tensor input(int64_t n) {
  at::manual_seed(0);
  return at::randn({n});
}

void BM_Copy(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  at::Tensor out = at::empty_like(x);
  for (auto _ : state) {
    out.copy_(x);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

// The same copy as two parallel memcpy calls: the memory-bandwidth bound any element-wise kernel
// is measured against (ATen's copy_ goes through TensorIterator and is much slower here).
void BM_Memcpy(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  at::Tensor out = at::empty_like(x);
  const float* src = x.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (auto _ : state) {
    at::parallel_for(0, x.numel(), 1 << 16, [&](int64_t b, int64_t e) {
      std::memcpy(dst + b, src + b, static_cast<size_t>(e - b) * sizeof(float));
    });
    benchmark::DoNotOptimize(dst);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

void BM_FakeQuantAllocating(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  for (auto _ : state) {
    at::Tensor y = qforge::quant::fakeQuantize(x, benchParams(), benchScheme());
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

void BM_FakeQuantOut(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  at::Tensor out = at::empty_like(x);
  for (auto _ : state) {
    qforge::quant::fakeQuantizeOut(x, benchParams(), benchScheme(), out);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

void BM_FakeQuantInPlace(benchmark::State& state) {
  at::Tensor x = input(state.range(0));
  for (auto _ : state) {
    // Re-quantizing already quantized values costs the same arithmetic and memory traffic.
    qforge::quant::fakeQuantizeInPlace(x, benchParams(), benchScheme());
    benchmark::DoNotOptimize(x.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

// ATen's own kernel on the same data, for reference.
void BM_AtenFakeQuant(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  for (auto _ : state) {
    at::Tensor y = at::fake_quantize_per_tensor_affine(x, 0.02, 0, -127, 127);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

// What every observer reads first: min, max and finiteness in one pass, against ATen's aminmax
// (min and max only) on the same data. 12,544 floats: a batch-1 activation (16 x 28 x 28).
void BM_FiniteMinMax(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  for (auto _ : state)
    benchmark::DoNotOptimize(qforge::quant::finiteMinMax(x));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

void BM_AtenAminmax(benchmark::State& state) {
  const at::Tensor x = input(state.range(0));
  for (auto _ : state) {
    auto [lo, hi] = at::aminmax(x);
    benchmark::DoNotOptimize(lo.data_ptr());
    benchmark::DoNotOptimize(hi.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

#define QFORGE_SCAN_SIZES ->Arg(12544)->Arg(1000000)->Unit(benchmark::kMicrosecond)->UseRealTime()
BENCHMARK(BM_FiniteMinMax) QFORGE_SCAN_SIZES;
BENCHMARK(BM_AtenAminmax) QFORGE_SCAN_SIZES;

#define QFORGE_SIZES ->Arg(1000000)->Arg(10000000)->Unit(benchmark::kMillisecond)->UseRealTime()
BENCHMARK(BM_Copy) QFORGE_SIZES;
BENCHMARK(BM_Memcpy) QFORGE_SIZES;
BENCHMARK(BM_FakeQuantAllocating) QFORGE_SIZES;
BENCHMARK(BM_FakeQuantOut) QFORGE_SIZES;
BENCHMARK(BM_FakeQuantInPlace) QFORGE_SIZES;
BENCHMARK(BM_AtenFakeQuant) QFORGE_SIZES;

// Prints the usual console table and remembers each run's time for the ratio summary.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_type != Run::RT_Iteration) continue;
      times_[run.benchmark_name()] = run.GetAdjustedRealTime();
    }
  }

  // Speed relative to the faster of the two copies (copy time / variant time).
  void printRatios() const {
    std::printf(
        "\nSpeed as a fraction of a plain copy into a preallocated tensor of the same size"
        " (faster of ATen copy_ and parallel memcpy; >= 0.5 wanted for in-place):\n");
    for (const char* size : {"1000000", "10000000"}) {
      auto copy = times_.find(std::string("BM_Copy/") + size + "/real_time");
      auto memcpy = times_.find(std::string("BM_Memcpy/") + size + "/real_time");
      if (copy == times_.end() || memcpy == times_.end()) continue;
      const double baseline = std::min(copy->second, memcpy->second);
      std::printf("  baseline copy            n=%-9s %.3f ms\n", size, baseline);
      for (const char* variant : {"BM_FakeQuantAllocating", "BM_FakeQuantOut",
                                  "BM_FakeQuantInPlace", "BM_AtenFakeQuant"}) {
        auto it = times_.find(std::string(variant) + "/" + size + "/real_time");
        if (it == times_.end()) continue;
        std::printf("  %-24s n=%-9s %.2f\n", variant + 3, size, baseline / it->second);
      }
    }
    std::printf("\nfiniteMinMax speed against ATen's aminmax on the same data (>1: faster):\n");
    for (const char* size : {"12544", "1000000"}) {
      auto ours = times_.find(std::string("BM_FiniteMinMax/") + size + "/real_time");
      auto aten = times_.find(std::string("BM_AtenAminmax/") + size + "/real_time");
      if (ours == times_.end() || aten == times_.end()) continue;
      std::printf("  n=%-9s %.2f\n", size, aten->second / ours->second);
    }
  }

 private:
  std::map<std::string, double> times_;
};

// ---- stream mode -------------------------------------------------------------------------

bool takeFlag(int& argc, char** argv, const char* name, std::string* value) {
  const size_t len = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, len) == 0 && (argv[i][len] == '=' || argv[i][len] == '\0')) {
      if (value != nullptr) *value = argv[i][len] == '=' ? std::string(argv[i] + len + 1) : "";
      for (int j = i; j + 1 < argc; ++j)
        argv[j] = argv[j + 1];
      --argc;
      return true;
    }
  }
  return false;
}

int runHistogramStream(const std::string& path, int64_t batch_size, int repeats, bool json) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) {
    std::fprintf(stderr, "quant_bench: cannot open %s\n", path.c_str());
    return 2;
  }
  const int64_t count = static_cast<int64_t>(file.tellg()) / 4;
  const int64_t batches = count / batch_size;
  if (batches == 0) {
    std::fprintf(stderr, "quant_bench: %s holds fewer than %lld floats\n", path.c_str(),
                 static_cast<long long>(batch_size));
    return 2;
  }
  file.seekg(0);
  std::vector<at::Tensor> stream;
  for (int64_t b = 0; b < batches; ++b) {
    at::Tensor t = at::empty({batch_size}, at::kFloat);
    file.read(reinterpret_cast<char*>(t.data_ptr<float>()), batch_size * 4);
    stream.push_back(t);
  }
  double best = 1e30;
  QParams params;
  qforge::quant::EntropyCalibration calibration;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    qforge::quant::KlObserver observer("stream", QScheme::int8Symmetric());
    for (const at::Tensor& batch : stream)
      observer.observe(batch);
    params = observer.qparams();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    calibration = observer.calibration();
    best = std::min(best, seconds);
  }
  if (json) {
    std::printf(
        "{\"seconds\": %.6f, \"threshold\": %.9g, \"scale\": %.9g, \"zero_point\": %lld, "
        "\"kept_bins\": %lld, \"kl\": %.9g, \"batches\": %lld, \"threads\": %d}\n",
        best, calibration.threshold, params.scaleValue(),
        static_cast<long long>(params.zeroPointValue()),
        static_cast<long long>(calibration.kept_bins), calibration.divergence,
        static_cast<long long>(batches), at::get_num_threads());
  } else {
    std::printf("KL observer: %lld batches in %.4f s, threshold %.6g (scale %.6g)\n",
                static_cast<long long>(batches), best, calibration.threshold, params.scaleValue());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  qforge::configureThreads();
  std::string stream_path, batch_size = "1000000", repeats = "3";
  if (takeFlag(argc, argv, "--histogram-stream", &stream_path)) {
    takeFlag(argc, argv, "--batch-size", &batch_size);
    takeFlag(argc, argv, "--repeats", &repeats);
    const bool json = takeFlag(argc, argv, "--json", nullptr);
    return runHistogramStream(stream_path, std::stoll(batch_size), std::stoi(repeats), json);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("threads: %d\n", at::get_num_threads());
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.printRatios();
  benchmark::Shutdown();
  return 0;
}
