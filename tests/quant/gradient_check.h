// Central finite differences for gradient tests, in double precision.
#pragma once

#include <functional>

namespace qforge::quant::testing {

// d f / d theta at theta0 by central differences.
inline double centralDifference(const std::function<double(double)>& f, double theta0,
                                double h = 1e-6) {
  return (f(theta0 + h) - f(theta0 - h)) / (2.0 * h);
}

}  // namespace qforge::quant::testing
