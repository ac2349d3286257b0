// Drops scalar lets nothing reads. Lowering binds values it may not use in the end (a float rounded to
// a bf16 output that the store rounds itself, a negation replaced by one in bf16); NVRTC would warn of
// each unused variable, and the corpus test holds kernels to compiling without warnings.
#include "scheduler/lowering_context.h"

#include <algorithm>
#include <vector>

namespace braze::scheduler {
namespace {

// One walk over the statements: the vars other statements keep (assigned, reduced, a loop's, or read by
// their operands) and, per let var, the expressions of its value. A let's value counts only once its
// var is live, so liveness then spreads from the kept vars through those values by a worklist.
class LiveLets {
 public:
  explicit LiveLets(const Kernel& k)
      : live(k.vars.size(), 0), k_(k), let_values_(k.vars.size()), seen_(k.exprs.size(), 0), checks_(k.exprs.size(), -1) {}

  void run() {
    stmts(k_.body);
    while (!pending_.empty()) {
      const VarId v = pending_.back();
      pending_.pop_back();
      for (ExprId x : let_values_[v]) expr(x);
    }
  }

  std::vector<char> live;

 private:
  void stmts(const std::vector<Stmt>& list) {
    for (const Stmt& s : list) {
      if (s.kind == SKind::Let) {
        for (ExprId x : {s.a, s.b, s.c, s.d, s.e}) {
          if (x >= 0) let_values_[s.var].push_back(x);
          // An index checked against its dim reports an out-of-range value even where the load it feeds
          // ignores it (a size-1 or expanded dim): the check is kept.
          if (x >= 0 && checks(x)) markLive(s.var);
        }
      } else {
        if (s.var >= 0) markLive(s.var);
        for (ExprId x : {s.a, s.b, s.c, s.d, s.e}) expr(x);
      }
      stmts(s.body);
      stmts(s.orelse);
    }
  }

  bool checks(ExprId id) {
    if (checks_[id] < 0) {
      const KExpr& e = k_.exprs[id];
      checks_[id] = e.kind == EKind::CheckedIndex ||
                    std::any_of(e.args.begin(), e.args.end(), [&](ExprId a) { return a >= 0 && checks(a); });
    }
    return checks_[id] != 0;
  }

  void markLive(VarId v) {
    if (live[v]) return;
    live[v] = 1;
    pending_.push_back(v);
  }

  void expr(ExprId id) {
    if (id < 0 || seen_[id]) return;
    seen_[id] = 1;
    const KExpr& e = k_.exprs[id];
    if (e.kind == EKind::VarRef) markLive(e.ref);
    for (ExprId a : e.args) expr(a);
  }

  const Kernel& k_;
  std::vector<std::vector<ExprId>> let_values_;
  std::vector<char> seen_;
  std::vector<signed char> checks_;  // per expr: whether it holds an index check (-1: not known yet)
  std::vector<VarId> pending_;  // live vars whose let values are not walked yet
};

void erase(std::vector<Stmt>& list, const std::vector<char>& live) {
  std::erase_if(list, [&](const Stmt& s) { return s.kind == SKind::Let && !live[s.var]; });
  for (Stmt& s : list) {
    erase(s.body, live);
    erase(s.orelse, live);
  }
}

}  // namespace

void removeDeadLets(Kernel& k) {
  LiveLets lets(k);
  lets.run();
  erase(k.body.mut(), lets.live);
}

}  // namespace braze::scheduler
