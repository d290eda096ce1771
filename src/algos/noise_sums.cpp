#include "algos/noise_sums.h"

#include <cmath>
#include <limits>

namespace qforge::algos {

at::Tensor NoiseSums::add(const at::Tensor& got, const at::Tensor& reference) {
  const at::Tensor g = got.detach().to(at::kDouble);
  const at::Tensor r = reference.detach().to(at::kDouble);
  const at::Tensor difference = g - r;
  signal += r.square().sum().item<double>();
  noise += difference.square().sum().item<double>();
  dot += (g * r).sum().item<double>();
  got_energy += g.square().sum().item<double>();
  return difference;
}

void NoiseSums::merge(const NoiseSums& other) {
  signal += other.signal;
  noise += other.noise;
  dot += other.dot;
  got_energy += other.got_energy;
}

double NoiseSums::sqnrDb() const {
  if (noise == 0) return std::numeric_limits<double>::infinity();
  return 10 * std::log10(signal / noise);
}

double NoiseSums::cosine() const {
  if (signal == 0 && got_energy == 0) return 1;
  if (signal == 0 || got_energy == 0) return 0;
  return dot / std::sqrt(signal * got_energy);
}

}  // namespace qforge::algos
