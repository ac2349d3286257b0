#include "ir/expr.h"

#include "support/error.h"
#include "ir/val.h"

#include <algorithm>

namespace braze {

std::string toString(const AttrValue& value) {
  struct Printer {
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(int64_t i) const { return fmt::format("{}", i); }
    std::string operator()(double d) const { return braze::toString(ScalarValue{d}); }
    std::string operator()(DataType t) const { return fmt::format("DataType.{}", braze::toString(t)); }
    std::string operator()(const std::vector<int64_t>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
    std::string operator()(const std::string& s) const { return fmt::format("'{}'", s); }
  };
  return std::visit(Printer{}, value);
}

void Attributes::set(std::string name, AttrValue value) {
  for (auto& [key, existing] : entries_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(name), std::move(value));
}

bool Attributes::has(std::string_view name) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == name; });
}

const AttrValue& Attributes::get(std::string_view name) const {
  for (const auto& [key, value] : entries_) {
    if (key == name) return value;
  }
  BRAZE_UNREACHABLE("attribute '{}' is missing", name);
}

template <typename T>
const T& Attributes::getAs(std::string_view name) const {
  const AttrValue& value = get(name);
  const T* typed = std::get_if<T>(&value);
  BRAZE_ASSERT(typed != nullptr, "attribute '{}' has another type ({})", name, toString(value));
  return *typed;
}

template const bool& Attributes::getAs<bool>(std::string_view) const;
template const int64_t& Attributes::getAs<int64_t>(std::string_view) const;
template const double& Attributes::getAs<double>(std::string_view) const;
template const DataType& Attributes::getAs<DataType>(std::string_view) const;
template const std::vector<int64_t>& Attributes::getAs<std::vector<int64_t>>(std::string_view) const;
template const std::string& Attributes::getAs<std::string>(std::string_view) const;

}  // namespace braze
