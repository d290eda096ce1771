// Resource limits (core/resource_limits.h) set for one test and put back after it.
#pragma once

#include "core/resource_limits.h"

namespace qforge::testing {

class ScopedLimits {
 public:
  explicit ScopedLimits(const ResourceLimits& limits) : saved_(resourceLimits()) {
    setResourceLimits(limits);
  }
  ~ScopedLimits() { setResourceLimits(saved_); }
  ScopedLimits(const ScopedLimits&) = delete;
  ScopedLimits& operator=(const ScopedLimits&) = delete;

 private:
  ResourceLimits saved_;
};

}  // namespace qforge::testing
