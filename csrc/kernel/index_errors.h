// Index values checked in kernels. Where index_select, gather or take_along_axis reads an index outside
// the dim it selects from, the kernel uses 0 instead (so no access leaves the tensor) and writes the
// index into its device's index-error record: one 64-bit word in memory the host reads without
// synchronizing (mapped host memory on a GPU). The host raises it as an IndexError naming the op and
// the index, at the next execute on that device or after a synchronize, as torch reports a device-side
// assert.
//
// The word packs the check's site (which op, tensor and dim) and the index, so that one aligned 64-bit
// store reports both: no atomics on host memory and no report torn between two threads. A thread
// writes it only while it reads 0, so later errors rarely overwrite the first (threads racing may: the
// report is then one of them, whole).
#pragma once

#include <cstdint>
#include <string>

namespace braze::kernel {

inline constexpr int kIndexErrorWords = 1;
// The word: the site code in the high kIndexErrorSiteBits, the index in the low 64 - kIndexErrorSiteBits
// (two's complement), saturated to +-kIndexErrorValueLimit.
inline constexpr int kIndexErrorSiteBits = 28;
inline constexpr int64_t kIndexErrorValueLimit = (int64_t{1} << (63 - kIndexErrorSiteBits)) - 1;

// The code a kernel writes for a check site (non-zero, kIndexErrorSiteBits wide): a hash of its message
// (the same in every process, so the kernel's source is too), remembered so the host can name the site.
int64_t indexCheckSite(const std::string& message);

// The word a kernel writes for `value` found out of range at `site`, as the emitted code packs it.
int64_t packIndexError(int64_t site, int64_t value);

// What a kernel does with the record on an index out of range (the simulator; the emitted code does the
// same): writes the packed word unless one is there already.
void recordIndexError(int64_t* record, int64_t site, int64_t value);

// Throws the IndexError a record holds, if it holds one, and clears the record first (so that the next
// error is reported too). `record`: the host's view of it.
void raiseRecordedIndexError(volatile int64_t* record);

}  // namespace braze::kernel
