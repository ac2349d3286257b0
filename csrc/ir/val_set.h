// A set of one fusion's vals, held as a flag per val id (ids are dense within a fusion): the schedulers'
// checks ask it for every operand of every expr of a group, and a hashed set made a node per insert.
#pragma once

#include "ir/val.h"
#include "support/by_id.h"
#include "support/error.h"

#include <vector>

namespace braze {

class ValSet {
 public:
  size_t count(const Val* v) const {
    checkFusion(v);
    return static_cast<size_t>(entryOr(flags_, index(v), char{0}));
  }
  // Whether `v` was not in the set before.
  bool insert(const Val* v) {
    if (fusion_ == nullptr) fusion_ = v->fusion();
    checkFusion(v);
    char& flag = entryAt(flags_, index(v), char{0});
    const bool added = flag == 0;
    flag = 1;
    size_ += added ? 1 : 0;
    return added;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  static size_t index(const Val* v) { return static_cast<size_t>(v->id()); }
  void checkFusion(const Val* v) const {
    BRAZE_ASSERT(fusion_ == nullptr || v->fusion() == fusion_, "{} is a val of another fusion than the set's",
                 v->name());
  }
  const Fusion* fusion_ = nullptr;  // the fusion of the first val inserted
  std::vector<char> flags_;
  size_t size_ = 0;
};

}  // namespace braze
