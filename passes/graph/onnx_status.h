// The boundary between libonnx (which throws) and ampc (which returns absl::Status).
#pragma once

#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace ampc {

// libonnx messages can span lines (the error, then "==> Context: ..."); diagnostics are one line
// each. Joins the trimmed non-empty lines with "; ".
std::string OneLine(std::string_view text);

// Runs `fn`, converting any exception libonnx throws into InvalidArgument("<context()>: <what>"),
// the context built only then (for checks run per node). Running out of memory is not the
// model's fault: std::bad_alloc goes on to the CLI's handler.
template <typename Fn, typename Context>
absl::Status CatchOnnxIn(Context&& context, Fn&& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(context() + ": " + OneLine(e.what()));
  } catch (...) {
    return absl::InternalError(context() + ": unknown exception from libonnx");
  }
}

template <typename Fn>
absl::Status CatchOnnx(const std::string& context, Fn&& fn) {
  return CatchOnnxIn([&] { return context; }, std::forward<Fn>(fn));
}

}  // namespace ampc
