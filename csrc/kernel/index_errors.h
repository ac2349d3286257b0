// Index values checked in kernels. Where index_select, gather or take_along_axis reads an index outside
// the dim it selects from, the kernel uses 0 instead (so no access leaves the tensor) and writes the
// first such index into its device's index-error record: four 64-bit words in memory the host reads
// without synchronizing (mapped host memory on a GPU). The host raises it as an IndexError naming the
// op and the index, at the next execute on that device or after a synchronize, as torch reports a
// device-side assert. The record's words, in the order a kernel writes them: claimed (taken with a
// compare-and-swap, so one index wins), site, value, then ready; the host reads them once ready is set.
#pragma once

#include <cstdint>
#include <string>

namespace braze::kernel {

inline constexpr int kIndexErrorWords = 4;
enum IndexErrorWord : int { kIndexErrorClaimed = 0, kIndexErrorSite = 1, kIndexErrorValue = 2, kIndexErrorReady = 3 };

// The code a kernel writes for a check site: a hash of its message (the same in every process, so the
// kernel's source is too), remembered so the host can name the site.
int64_t indexCheckSite(const std::string& message);

// What a kernel records for an index out of range, as the simulator and the emitted code do it.
void recordIndexError(int64_t* record, int64_t site, int64_t value);

// Throws the IndexError a record holds, if it holds one, and clears the record first (so that the next
// error is reported too). `record`: the host's view of it.
void raiseRecordedIndexError(volatile int64_t* record);

}  // namespace braze::kernel
