// Early returns for absl::Status / absl::StatusOr, as in most Abseil-based codebases.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define AMPC_STATUS_CONCAT_INNER(a, b) a##b
#define AMPC_STATUS_CONCAT(a, b) AMPC_STATUS_CONCAT_INNER(a, b)

#define AMPC_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    if (absl::Status _status = (expr); !_status.ok()) { \
      return _status;                                   \
    }                                                   \
  } while (0)

// AMPC_ASSIGN_OR_RETURN(auto x, F()); declares or assigns x from a StatusOr, returning its status
// on error.
#define AMPC_ASSIGN_OR_RETURN(lhs, expr) \
  AMPC_ASSIGN_OR_RETURN_IMPL(AMPC_STATUS_CONCAT(_status_or_, __LINE__), lhs, expr)
#define AMPC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = *std::move(tmp)
