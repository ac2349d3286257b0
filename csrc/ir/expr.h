// An operation of the fusion graph: an OpKind, operand and result values, and named attributes
// (dims, keepdim, dtype...). Attributes are generic so that printing, JSON and cloning need no
// per-op code; typed accessors check the name and the type.
#pragma once

#include "ir/data_type.h"
#include "ir/op_kind.h"

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace braze {

class Val;
class Fusion;

using AttrValue = std::variant<bool, int64_t, double, DataType, std::vector<int64_t>, std::string>;
std::string toString(const AttrValue& value);

class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<std::string, AttrValue>> entries) : entries_(entries) {}

  void set(std::string name, AttrValue value);
  bool has(std::string_view name) const;
  const AttrValue& get(std::string_view name) const;
  bool getBool(std::string_view name) const { return getAs<bool>(name); }
  int64_t getInt(std::string_view name) const { return getAs<int64_t>(name); }
  double getDouble(std::string_view name) const { return getAs<double>(name); }
  DataType getDataType(std::string_view name) const { return getAs<DataType>(name); }
  const std::vector<int64_t>& getInts(std::string_view name) const { return getAs<std::vector<int64_t>>(name); }
  const std::string& getString(std::string_view name) const { return getAs<std::string>(name); }
  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }
  bool operator==(const Attributes&) const = default;

 private:
  template <typename T>
  const T& getAs(std::string_view name) const;
  std::vector<std::pair<std::string, AttrValue>> entries_;  // in insertion order: prints stably
};

class Expr {
 public:
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;

  OpKind kind() const { return kind_; }
  std::string_view name() const { return opName(kind_); }
  const std::vector<Val*>& inputs() const { return inputs_; }
  const std::vector<Val*>& outputs() const { return outputs_; }
  Val* input(size_t i) const { return inputs_.at(i); }
  Val* output(size_t i) const { return outputs_.at(i); }
  const Attributes& attrs() const { return attrs_; }
  int64_t id() const { return id_; }

 private:
  friend class Fusion;
  Expr(int64_t id, OpKind kind, std::vector<Val*> inputs, std::vector<Val*> outputs, Attributes attrs)
      : id_(id), kind_(kind), inputs_(std::move(inputs)), outputs_(std::move(outputs)), attrs_(std::move(attrs)) {}
  int64_t id_;
  OpKind kind_;
  std::vector<Val*> inputs_;
  std::vector<Val*> outputs_;
  Attributes attrs_;
};

}  // namespace braze
