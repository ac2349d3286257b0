#include "kernel/index_errors.h"

#include "support/error.h"

#include <mutex>
#include <unordered_map>

namespace braze::kernel {
namespace {

struct Sites {
  std::mutex mutex;
  std::unordered_map<int64_t, std::string> messages;
};

Sites& sites() {
  static Sites* s = new Sites();  // never destroyed: kernels may report while the process exits
  return *s;
}

}  // namespace

int64_t indexCheckSite(const std::string& message) {
  // FNV-1a, kept positive and non-zero (a record's site word is 0 until a kernel writes it).
  uint64_t h = 1469598103934665603ull;
  for (char c : message) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  const auto site = static_cast<int64_t>(h >> 2) | 1;
  Sites& s = sites();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.messages.emplace(site, message);
  return site;
}

void recordIndexError(int64_t* record, int64_t site, int64_t value) {
  if (record[kIndexErrorClaimed] != 0) return;
  record[kIndexErrorClaimed] = 1;
  record[kIndexErrorSite] = site;
  record[kIndexErrorValue] = value;
  record[kIndexErrorReady] = 1;
}

void raiseRecordedIndexError(volatile int64_t* record) {
  if (record == nullptr || record[kIndexErrorReady] == 0) return;
  Sites& s = sites();
  std::string message;
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (record[kIndexErrorReady] == 0) return;  // another thread reported it
    const int64_t site = record[kIndexErrorSite];
    value = record[kIndexErrorValue];
    auto it = s.messages.find(site);
    message = it != s.messages.end() ? it->second : fmt::format("an index check (site {:#x})", site);
    record[kIndexErrorReady] = 0;
    record[kIndexErrorSite] = 0;
    record[kIndexErrorValue] = 0;
    record[kIndexErrorClaimed] = 0;  // last: a kernel may claim the record again from here on
  }
  BRAZE_INDEX_CHECK(false, "{}: index {} is out of bounds (reported by a kernel of an earlier or this execute on the "
                    "device; that execute's results are wrong)", message, value);
}

}  // namespace braze::kernel
