// What the autocast pass may do with each op: the precision policy as data (docs/autocast.md).
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ampc {

enum class Category {
  kLower,   // compute in the low dtype; float inputs are cast down
  kFp32,    // compute in FP32; low inputs are cast up
  kFollow,  // compute in the widest dtype of the non-constant float inputs
  kKeep,    // keep exactly the dtypes of the input model (listed with a reason, or unknown)
};

absl::string_view CategoryName(Category category);  // "LOWER", "FP32", "FOLLOW", "KEEP"
absl::StatusOr<Category> ParseCategory(absl::string_view name);

class AutocastPolicy {
 public:
  // The default tables of docs/autocast.md for `low_dtype` (onnx FLOAT16 or BFLOAT16).
  static AutocastPolicy Defaults(int low_dtype);

  // Ops of the default domain are keyed by op type, others by "domain.OpType".
  Category Lookup(absl::string_view domain, absl::string_view op_type) const;
  // Where the entry came from: "default table" or the override ("--policy FILE", "--block-op").
  // For a KEEP entry of the default tables, the reason the op is left alone.
  const std::string& Source(absl::string_view domain, absl::string_view op_type) const;
  // Whether the op has an entry (a KEEP without one is an op the policy does not know).
  bool Has(absl::string_view domain, absl::string_view op_type) const;
  void Set(const std::string& key, Category category, const std::string& source);

 private:
  struct Entry {
    Category category;
    std::string source;
  };
  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace ampc
