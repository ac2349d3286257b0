#include "support/dump.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace braze {

bool dumpEnabled(std::string_view what) {
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
  for (const std::string& item : enabled) {
    if (item == what || item == "all") return true;
  }
  return false;
}

}  // namespace braze
