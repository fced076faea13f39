// Removing elements from a protobuf repeated field in place.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

namespace ampc {

// Keeps the elements whose original position `remove` rejects, in order. SwapElements moves
// pointers, so the kept objects keep their addresses (the precision plan is keyed by them).
// `remove(i)` may read element i: positions from i on are not yet moved.
template <typename T, typename Predicate>
void RemoveIf(google::protobuf::RepeatedPtrField<T>& items, Predicate remove) {
  int kept = 0;
  for (int i = 0; i < items.size(); ++i) {
    if (remove(i)) continue;
    if (kept != i) items.SwapElements(kept, i);
    ++kept;
  }
  items.DeleteSubrange(kept, items.size() - kept);
}

}  // namespace ampc
