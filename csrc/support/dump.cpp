#include "support/dump.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace braze {

namespace {

const std::vector<std::string>& enabledItems() {
  static const std::vector<std::string> enabled = [] {
    std::vector<std::string> items;
    const char* env = std::getenv("BRAZE_DUMP");
    std::string text = env != nullptr ? env : "";
    size_t start = 0;
    while (start <= text.size()) {
      const size_t end = std::min(text.find(',', start), text.size());
      if (end > start) items.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return items;
  }();
  return enabled;
}

}  // namespace

bool dumpEnabled(std::string_view what) {
  for (const std::string& item : enabledItems()) {
    if (item == what || item == "all") return true;
  }
  return false;
}

bool dumpEnabledAfter(std::string_view step) {
  constexpr std::string_view kAfter = "after:";
  for (const std::string_view item : enabledItems()) {
    if (item == "all" || (item.size() == kAfter.size() + step.size() && item.substr(0, kAfter.size()) == kAfter &&
                          item.substr(kAfter.size()) == step)) {
      return true;
    }
  }
  return false;
}

}  // namespace braze
