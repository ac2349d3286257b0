// Drops scalar lets nothing reads. Lowering binds values it may not use in the end (a float rounded to
// a bf16 output that the store rounds itself, a negation replaced by one in bf16); NVRTC would warn of
// each unused variable, and the corpus test holds kernels to compiling without warnings.
#include "scheduler/lowering_context.h"

#include <vector>

namespace braze::scheduler {
namespace {

// The vars read by the statements, counting a let's value only when its var is in `live`.
class Reads {
 public:
  Reads(const Kernel& k, const std::vector<char>& live)
      : k_(k), live_(live), read(k.vars.size(), 0), seen_(k.exprs.size(), 0) {}

  void stmts(const std::vector<Stmt>& list) {
    for (const Stmt& s : list) {
      if (s.kind == SKind::Let && !live_[s.var]) continue;
      if (s.kind != SKind::Let && s.var >= 0) read[s.var] = 1;  // assigned, reduced, a loop's: kept
      for (ExprId x : {s.a, s.b, s.c, s.d}) expr(x);
      stmts(s.body);
      stmts(s.orelse);
    }
  }

 private:
  void expr(ExprId id) {
    if (id < 0 || seen_[id]) return;
    seen_[id] = 1;
    const KExpr& e = k_.exprs[id];
    if (e.kind == EKind::VarRef) read[e.ref] = 1;
    for (ExprId a : e.args) expr(a);
  }

  const Kernel& k_;
  const std::vector<char>& live_;

 public:
  std::vector<char> read;

 private:
  std::vector<char> seen_;
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
  // Grows the live set from what the other statements read, through the values of live lets.
  std::vector<char> live(k.vars.size(), 0);
  while (true) {
    Reads reads(k, live);
    reads.stmts(k.body);
    if (reads.read == live) break;
    live = std::move(reads.read);
  }
  erase(k.body, live);
}

}  // namespace braze::scheduler
