#include "kernel/index_errors.h"

#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace braze::kernel {
namespace {

constexpr int kValueBits = 64 - kIndexErrorSiteBits;

struct Sites {
  std::mutex mutex;
  std::map<int64_t, std::vector<std::string>> messages;  // a code two messages hash to names both
};

Sites& sites() {
  static Sites* s = new Sites();  // never destroyed: kernels may report while the process exits
  return *s;
}

}  // namespace

int64_t indexCheckSite(const std::string& message) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : message) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  const auto site = static_cast<int64_t>((h >> (64 - kIndexErrorSiteBits)) | 1);  // never 0: the word is then too
  Sites& s = sites();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<std::string>& known = s.messages[site];
  if (std::find(known.begin(), known.end(), message) == known.end()) known.push_back(message);
  return site;
}

int64_t packIndexError(int64_t site, int64_t value) {
  const int64_t v = std::clamp(value, -kIndexErrorValueLimit, kIndexErrorValueLimit);
  const uint64_t low = static_cast<uint64_t>(v) & ((uint64_t{1} << kValueBits) - 1);
  return static_cast<int64_t>(static_cast<uint64_t>(site) << kValueBits | low);
}

void recordIndexError(int64_t* record, int64_t site, int64_t value) {
  if (*record == 0) *record = packIndexError(site, value);
}

void raiseRecordedIndexError(volatile int64_t* record) {
  if (record == nullptr || *record == 0) return;
  Sites& s = sites();
  std::string where;
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const int64_t word = *record;
    if (word == 0) return;  // another thread reported it
    *record = 0;
    const auto site = static_cast<int64_t>(static_cast<uint64_t>(word) >> kValueBits);
    value = static_cast<int64_t>(static_cast<uint64_t>(word) << kIndexErrorSiteBits) >> kIndexErrorSiteBits;
    auto it = s.messages.find(site);
    where = it == s.messages.end() ? fmt::format("an index check (site {:#x})", site)
                                   : fmt::format("{}", fmt::join(it->second, " or "));
  }
  const std::string index = value == kIndexErrorValueLimit    ? fmt::format("{} or more", value)
                            : value == -kIndexErrorValueLimit ? fmt::format("{} or less", value)
                                                              : fmt::format("{}", value);
  BRAZE_INDEX_CHECK(false, "{}: index {} is out of bounds (reported by a kernel of an earlier or this execute on the "
                    "device; that execute's results are wrong)", where, index);
}

}  // namespace braze::kernel
