#include "verify/quality_gap.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>

namespace qforge::verify {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

double sqnrDb(double signal, double noise) {
  if (noise == 0) return kInfinity;
  if (signal == 0) return -kInfinity;
  return 10.0 * std::log10(signal / noise);
}

// ORT's SQNR minus the simulation's over the same samples: the signal cancels.
double gapDb(double ort_noise, double simulation_noise) {
  if (ort_noise == simulation_noise) return 0;  // both exact too
  if (ort_noise == 0) return kInfinity;
  if (simulation_noise == 0) return -kInfinity;
  return 10.0 * std::log10(simulation_noise / ort_noise);
}

// Student's t at 95% (a two-sided 90% interval) for `df` degrees of freedom; a df between rows
// takes the row below it, the wider interval.
double studentT95(int64_t df) {
  static constexpr std::pair<int64_t, double> kRows[] = {
      {1, 6.314},  {2, 2.920},  {3, 2.353},  {4, 2.132},  {5, 2.015},  {6, 1.943},
      {7, 1.895},  {8, 1.860},  {9, 1.833},  {10, 1.812}, {12, 1.782}, {15, 1.753},
      {20, 1.725}, {30, 1.697}, {40, 1.684}, {60, 1.671}, {120, 1.658}};
  for (auto it = std::rbegin(kRows); it != std::rend(kRows); ++it) {
    if (df >= it->first) return it->second;
  }
  return kRows[0].second;
}

// The q-quantile of sorted values (nearest rank).
double quantile(const std::vector<double>& sorted, double q) {
  const auto rank = static_cast<size_t>(std::llround(q * static_cast<double>(sorted.size() - 1)));
  return sorted[std::min(rank, sorted.size() - 1)];
}

}  // namespace

double OutputQuality::supportedGapDb() const {
  if (gap_low_db <= 0 && gap_high_db >= 0) return 0;
  return std::min(std::fabs(gap_low_db), std::fabs(gap_high_db));
}

void QualityGap::add(const at::Tensor& ort, const at::Tensor& simulation,
                     const at::Tensor& reference, int64_t samples) {
  if (ort.sizes() != reference.sizes() || simulation.sizes() != reference.sizes()) return;
  const bool batched = reference.dim() > 0 && reference.size(0) == samples && samples > 0;
  const int64_t rows = batched ? samples : 1;
  const at::Tensor r = reference.to(at::kDouble).reshape({rows, -1});
  const at::Tensor signal = r.square().sum(1);
  const at::Tensor ort_noise = (ort.to(at::kDouble).reshape({rows, -1}) - r).square().sum(1);
  const at::Tensor sim_noise = (simulation.to(at::kDouble).reshape({rows, -1}) - r).square().sum(1);
  for (int64_t i = 0; i < rows; ++i) {
    units_.push_back(
        Unit{signal[i].item<double>(), ort_noise[i].item<double>(), sim_noise[i].item<double>()});
  }
}

OutputQuality QualityGap::finish() const {
  OutputQuality q;
  q.output = output_;
  q.samples = static_cast<int64_t>(units_.size());
  Unit total;
  for (const Unit& u : units_) {
    total.signal += u.signal;
    total.ort_noise += u.ort_noise;
    total.simulation_noise += u.simulation_noise;
  }
  q.ort_sqnr_db = sqnrDb(total.signal, total.ort_noise);
  q.simulation_sqnr_db = sqnrDb(total.signal, total.simulation_noise);
  q.gap_db = gapDb(total.ort_noise, total.simulation_noise);
  // One sample shows nothing of how the gap moves between samples: no gap is supported.
  q.gap_low_db = units_.size() == 1 ? -kInfinity : q.gap_db;
  q.gap_high_db = units_.size() == 1 ? kInfinity : q.gap_db;
  if (units_.size() < 2) return q;
  // Percentile bootstrap, seeded so that a verify run is repeatable.
  constexpr int kResamples = 2000;
  std::mt19937_64 random(0x9e3779b97f4a7c15ull);
  std::uniform_int_distribution<size_t> pick(0, units_.size() - 1);
  std::vector<double> gaps;
  gaps.reserve(kResamples);
  for (int k = 0; k < kResamples; ++k) {
    double ort_noise = 0, simulation_noise = 0;
    for (size_t i = 0; i < units_.size(); ++i) {
      const Unit& u = units_[pick(random)];
      ort_noise += u.ort_noise;
      simulation_noise += u.simulation_noise;
    }
    gaps.push_back(gapDb(ort_noise, simulation_noise));
  }
  std::sort(gaps.begin(), gaps.end());
  q.gap_low_db = quantile(gaps, 0.05);
  q.gap_high_db = quantile(gaps, 0.95);
  // A resample holds only the gaps the samples had, so on a few samples the bootstrap cannot show
  // the spread it did not see (two samples give just their own two gaps). Student's t interval of
  // the per-sample gaps widens it there; with many samples the two agree.
  std::vector<double> per_sample;
  for (const Unit& u : units_) {
    per_sample.push_back(gapDb(u.ort_noise, u.simulation_noise));
    if (!std::isfinite(per_sample.back())) return q;  // a run exact on a sample: no t interval
  }
  const double n = static_cast<double>(per_sample.size());
  double mean = 0, squares = 0;
  for (double g : per_sample)
    mean += g / n;
  for (double g : per_sample)
    squares += (g - mean) * (g - mean);
  const double spread = std::sqrt(squares / (n - 1));
  const double half = studentT95(static_cast<int64_t>(units_.size()) - 1) * spread / std::sqrt(n);
  q.gap_low_db = std::min(q.gap_low_db, mean - half);
  q.gap_high_db = std::max(q.gap_high_db, mean + half);
  return q;
}

}  // namespace qforge::verify
