// What Resize and GridSample share (resample_kernels.cc): attribute strings mapped to enums, Keys'
// cubic kernel, and a floor that any coordinate survives.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/core/kernel.h"

namespace ampc::resample {

// An attribute's string values and what each means.
template <typename E>
struct Named {
  const char* name;
  E value;
};

template <typename E, size_t N>
absl::StatusOr<E> Lookup(const KernelContext& context, const Named<E> (&table)[N],
                         absl::string_view attribute, const std::string& value) {
  for (const Named<E>& entry : table) {
    if (value == entry.name) return entry.value;
  }
  return NodeError(context, absl::StrCat(attribute, " '", value, "' is not supported"));
}

// Keys' cubic convolution kernel with parameter a.
inline double CubicWeight(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// floor(x) as an integer for any double: far-out coordinates are only ever clamped or dropped.
inline int64_t FloorIndex(double x) {
  constexpr double kFar = 1e15;
  return static_cast<int64_t>(std::floor(std::isnan(x) ? 0 : std::clamp(x, -kFar, kFar)));
}

}  // namespace ampc::resample
