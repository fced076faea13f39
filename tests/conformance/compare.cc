#include "tests/conformance/compare.h"

#include <cmath>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/core/dtype.h"

namespace ampc {
namespace {

template <typename T>
double AsDouble(T v) {
  return static_cast<double>(Compute<T>::Load(v));
}

}  // namespace

absl::Status Compare(const Tensor& expected, const Tensor& actual, const Tolerance& tolerance) {
  if (expected.dtype() != actual.dtype()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", expected.TypeString(), ", got ", actual.TypeString()));
  }
  if (expected.shape() != actual.shape()) {
    return absl::InvalidArgumentError(absl::StrCat("expected shape ", ShapeString(expected.shape()),
                                                   ", got ", ShapeString(actual.shape())));
  }
  int64_t mismatches = 0, first = -1;
  double first_expected = 0, first_actual = 0;
  const bool handled = Dispatch<AMPC_ALL_TYPES>(expected.dtype(), [&]<typename T>() {
    const T* e = expected.data<T>();
    const T* a = actual.data<T>();
    for (int64_t i = 0; i < expected.size(); ++i) {
      const double x = AsDouble(e[i]), y = AsDouble(a[i]);
      bool ok;
      if constexpr (!std::is_floating_point_v<typename Compute<T>::type>) {
        ok = e[i] == a[i];  // integers and bools exactly
      } else if (std::isnan(x) || std::isnan(y)) {
        ok = std::isnan(x) && std::isnan(y);
      } else if (std::isinf(x) || std::isinf(y)) {
        ok = x == y;
      } else {
        ok = std::abs(y - x) <= tolerance.atol + tolerance.rtol * std::abs(x);
      }
      if (!ok && mismatches++ == 0) {
        first = i;
        first_expected = x;
        first_actual = y;
      }
    }
  });
  if (!handled) return absl::UnimplementedError("cannot compare " + DTypeName(expected.dtype()));
  if (mismatches == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(mismatches, " of ", expected.size(), " elements differ; first at flat index ",
                   first, ": expected ", first_expected, ", got ", first_actual));
}

}  // namespace ampc
