// Tables indexed by a dense id (a val's, an expr's, a kernel var's): planning keeps many such per-id
// facts, and a vector grown on demand costs a fraction of a hash map keyed by pointer.
#pragma once

#include <cstddef>
#include <vector>

namespace braze {

// The entry for `id`, the vector first grown (new entries `fill`) to hold it.
template <typename T>
T& entryAt(std::vector<T>& table, size_t id, const T& fill = T{}) {
  if (id >= table.size()) table.resize(id + 1, fill);
  return table[id];
}

// The entry for `id`, or `missing` where the vector does not reach it.
template <typename T>
T entryOr(const std::vector<T>& table, size_t id, const T& missing) {
  return id < table.size() ? table[id] : missing;
}

}  // namespace braze
