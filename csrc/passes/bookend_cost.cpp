#include "passes/bookend_cost.h"

namespace braze {

double accessEfficiency(int64_t access_bytes) {
  if (access_bytes >= 16) return 1.0;
  if (access_bytes >= 8) return 0.9;
  if (access_bytes >= 4) return 0.75;
  if (access_bytes >= 2) return 0.5;
  return 0.3;
}

double trafficNs(int64_t bytes, int64_t access_bytes) {
  return static_cast<double>(bytes) / (kAssumedBytesPerNs * accessEfficiency(access_bytes));
}

}  // namespace braze
