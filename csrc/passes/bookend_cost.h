// The bookending cost model: estimated time of the memory traffic a chain decides, with and without
// the chain as an alias segment. Rough on purpose: it ranks alternatives, it does not predict.
#pragma once

#include <cstdint>

namespace braze {

// HBM bandwidth the estimates assume (an H100's measured copy rate, bytes per ns), and the host
// time one alias segment adds to an execute (building views: a few hundred ns).
inline constexpr double kAssumedBytesPerNs = 3000.0;
inline constexpr double kAliasSegmentHostNs = 300.0;

// Fraction of bandwidth reached with accesses `access_bytes` wide (16-byte vectors reach it all;
// scalar 2-byte accesses about half).
double accessEfficiency(int64_t access_bytes);

// Time to move `bytes` with `access_bytes`-wide accesses.
double trafficNs(int64_t bytes, int64_t access_bytes);

}  // namespace braze
