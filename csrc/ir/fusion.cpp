#include "ir/fusion.h"

#include "ir/op_kind.h"
#include "support/error.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace braze {
namespace {
thread_local Fusion* current_fusion = nullptr;
}  // namespace

FusionGuard::FusionGuard(Fusion* fusion) : previous_(current_fusion) { current_fusion = fusion; }
FusionGuard::~FusionGuard() { current_fusion = previous_; }

Fusion* FusionGuard::current() {
  BRAZE_CHECK(current_fusion != nullptr, "no fusion is being defined (use a FusionGuard or `with FusionDefinition() as fd`)");
  return current_fusion;
}

Fusion::Fusion(const Fusion& other) : std::enable_shared_from_this<Fusion>() { *this = other; }

Fusion& Fusion::operator=(const Fusion& other) {
  if (this == &other) return *this;
  evaluation_order_.store(nullptr);
  vals_.clear();
  exprs_.clear();
  inputs_.clear();
  outputs_.clear();
  output_aliases_.clear();
  std::unordered_map<const Val*, Val*> map;
  for (const auto& val : other.vals_) {
    Val* copy = nullptr;
    if (val->isTensor()) {
      const TensorView* tv = val->asTensor();
      copy = new TensorView(this, tv->id(), tv->dtype(), tv->domain(), tv->layout(), tv->isCpu());
    } else {
      const Scalar* s = val->asScalar();
      auto* scalar = new Scalar(this, s->id(), s->dtype(), s->value());
      scalar->written_as_ = s->writtenAs();
      copy = scalar;
    }
    vals_.emplace_back(copy);
    map[val.get()] = copy;
  }
  auto mapAll = [&](const std::vector<Val*>& vals) {
    std::vector<Val*> mapped;
    for (Val* v : vals) mapped.push_back(map.at(v));
    return mapped;
  };
  for (const auto& expr : other.exprs_) {
    auto* copy = new Expr(expr->id(), expr->kind(), mapAll(expr->inputs()), mapAll(expr->outputs()), expr->attrs());
    exprs_.emplace_back(copy);
    for (Val* out : copy->outputs_) out->definition_ = copy;
    for (Val* in : copy->inputs_) {  // one use per expr, as newExpr records it, even for mul(x, x)
      if (in->uses_.empty() || in->uses_.back() != copy) in->uses_.push_back(copy);
    }
  }
  inputs_ = mapAll(other.inputs_);
  outputs_ = mapAll(other.outputs_);
  for (const auto& [out, in] : other.output_aliases_) output_aliases_[map.at(out)] = map.at(in);
  next_id_ = other.next_id_;
  next_expr_id_ = other.next_expr_id_;
  return *this;
}

Fusion::Fusion(Fusion&& other) noexcept : std::enable_shared_from_this<Fusion>() { *this = std::move(other); }

Fusion& Fusion::operator=(Fusion&& other) noexcept {
  evaluation_order_.store(other.evaluation_order_.exchange(nullptr));
  vals_ = std::move(other.vals_);
  exprs_ = std::move(other.exprs_);
  inputs_ = std::move(other.inputs_);
  outputs_ = std::move(other.outputs_);
  output_aliases_ = std::move(other.output_aliases_);
  next_id_ = other.next_id_;
  next_expr_id_ = other.next_expr_id_;
  adoptNodes();
  return *this;
}

void Fusion::adoptNodes() {
  for (auto& val : vals_) val->fusion_ = this;
}

TensorView* Fusion::newTensor(DataType dtype, std::vector<IterDomain> domain, TensorLayout layout, bool is_cpu) {
  BRAZE_ASSERT(dtype != DataType::Null, "a tensor needs a dtype");
  auto* tv = new TensorView(this, nextId(), dtype, std::move(domain), std::move(layout), is_cpu);
  vals_.emplace_back(tv);
  return tv;
}

Scalar* Fusion::newScalar(DataType dtype, std::optional<ScalarValue> value) {
  BRAZE_ASSERT(dtype != DataType::Null, "a scalar needs a dtype");
  auto* s = new Scalar(this, nextId(), dtype, std::move(value));
  vals_.emplace_back(s);
  return s;
}

Scalar* Fusion::constant(ScalarValue value, DataType dtype) {
  if (dtype == DataType::Null) {
    dtype = std::holds_alternative<bool>(value)      ? DataType::Bool
            : std::holds_alternative<int64_t>(value) ? DataType::Int64
                                                     : DataType::Double;
  }
  // The value a `dtype` holds, as a kernel holds it (printing is faithful to it too): the reference and
  // every kernel then compute with the same value.
  return newScalar(dtype, valueOfType(value, dtype));
}

Expr* Fusion::newExpr(OpKind kind, std::vector<Val*> inputs, std::vector<Val*> outputs, Attributes attrs) {
  for (Val* v : inputs) BRAZE_ASSERT(v != nullptr && v->fusion() == this, "{}: operand from another fusion", opName(kind));
  auto* expr = new Expr(next_expr_id_++, kind, std::move(inputs), std::move(outputs), std::move(attrs));
  exprs_.emplace_back(expr);
  evaluation_order_.store(nullptr);
  for (Val* out : expr->outputs_) {
    BRAZE_ASSERT(out->definition_ == nullptr, "{} already has a definition", out->name());
    out->definition_ = expr;
  }
  for (Val* in : expr->inputs_) {
    if (std::find(in->uses_.begin(), in->uses_.end(), expr) == in->uses_.end()) in->uses_.push_back(expr);
  }
  return expr;
}

void Fusion::replaceInput(Expr* consumer, Val* original, Val* replacement) {
  bool found = false;
  for (Val*& in : consumer->inputs_) {
    if (in == original) {
      in = replacement;
      found = true;
    }
  }
  BRAZE_ASSERT(found, "{} is not an operand of {}", original->name(), consumer->name());
  evaluation_order_.store(nullptr);
  std::erase(original->uses_, consumer);
  if (std::find(replacement->uses_.begin(), replacement->uses_.end(), consumer) == replacement->uses_.end()) {
    replacement->uses_.push_back(consumer);
  }
}

void Fusion::addInput(Val* val) {
  BRAZE_CHECK(val->definition() == nullptr, "{} is computed by {} and cannot be a fusion input", val->name(),
              val->definition() ? val->definition()->name() : "");
  BRAZE_CHECK(!isInput(val), "{} is already a fusion input", val->name());
  inputs_.push_back(val);
}

void Fusion::addOutput(Val* val) {
  BRAZE_CHECK(val->fusion() == this, "add_output: {} belongs to another fusion", val->name());
  outputs_.push_back(val);
  evaluation_order_.store(nullptr);
}

void Fusion::aliasOutputToInput(Val* output, Val* input) {
  BRAZE_CHECK(isInput(input), "add_output(alias_input={}): {} is not a fusion input", input->name(), input->name());
  BRAZE_TYPE_CHECK(output->isTensor() && input->isTensor(), "add_output: only tensors can alias ({} -> {})",
                   output->name(), input->name());
  BRAZE_TYPE_CHECK(output->dtype() == input->dtype(),
                   "add_output: {} of dtype {} cannot alias input {} of dtype {} (dtypes must match)", output->name(),
                   braze::toString(output->dtype()), input->name(), braze::toString(input->dtype()));
  BRAZE_CHECK(output->asTensor()->rank() == input->asTensor()->rank(),
              "add_output: {} of rank {} cannot alias input {} of rank {} (ranks must match)", output->name(),
              output->asTensor()->rank(), input->name(), input->asTensor()->rank());
  for (const auto& [out, in] : output_aliases_) {
    BRAZE_CHECK(in != input, "add_output: input {} is already aliased by output {}", input->name(), out->name());
  }
  BRAZE_CHECK(output_aliases_.count(output) == 0, "add_output: {} is already written into input {}", output->name(),
              output_aliases_.count(output) != 0 ? output_aliases_.at(output)->name() : "");
  // The first entry of an aliased output is the update (not returned), later ones return the updated input.
  // An output already returned keeps its place among the returned ones, as nvFuser keeps it visible there.
  BRAZE_CHECK(output->fusion() == this, "add_output: {} belongs to another fusion", output->name());
  outputs_.insert(std::find(outputs_.begin(), outputs_.end(), output), output);
  output_aliases_[output] = input;
  evaluation_order_.store(nullptr);
}

Fusion::OutputUse Fusion::outputUse(size_t i) const {
  Val* out = outputs_.at(i);
  if (output_aliases_.count(out) == 0) return OutputUse::Returned;
  const bool first = std::find(outputs_.begin(), outputs_.end(), out) == outputs_.begin() + static_cast<int64_t>(i);
  return first ? OutputUse::WrittenIntoInput : OutputUse::UpdatedInput;
}

bool Fusion::isInput(const Val* val) const { return std::find(inputs_.begin(), inputs_.end(), val) != inputs_.end(); }
bool Fusion::isOutput(const Val* val) const { return std::find(outputs_.begin(), outputs_.end(), val) != outputs_.end(); }

Val* Fusion::valById(int64_t id) const {
  for (const auto& v : vals_) {
    if (v->id() == id) return v.get();
  }
  return nullptr;
}

std::vector<char> Fusion::computesNeededValues(const std::vector<Expr*>& evaluated) const {
  int64_t expr_ids = 0, val_ids = 0;
  for (const auto& e : exprs_) expr_ids = std::max(expr_ids, e->id() + 1);
  for (const auto& v : vals_) val_ids = std::max(val_ids, v->id() + 1);
  std::vector<char> needed_val(static_cast<size_t>(val_ids), 0);
  std::vector<char> computes(static_cast<size_t>(expr_ids), 0);
  for (const Val* out : outputs_) needed_val[out->id()] = 1;
  // Consumers come after their producers in `evaluated`: walked backwards, a val's every reader is seen
  // before its definition. Scalars are host math, always needed.
  for (auto it = evaluated.rbegin(); it != evaluated.rend(); ++it) {
    const Expr* e = *it;
    const bool values_needed = std::any_of(e->outputs().begin(), e->outputs().end(), [&](const Val* v) {
      return !v->isTensor() || needed_val[v->id()] != 0;
    });
    // Ops that check index operands (index_select, gather, scatter) run even so: a bad index is an error
    // the run reports, as the reference does.
    const OpCategory category = opInfo(e->kind()).category;
    computes[e->id()] = values_needed || category == OpCategory::Indexing || category == OpCategory::Scatter;
    if (computes[e->id()] == 0 || category == OpCategory::ScalarQuery) continue;
    for (const Val* in : e->inputs()) needed_val[in->id()] = 1;
  }
  return computes;
}

std::vector<Expr*> Fusion::exprsToEvaluate() const {
  // Kept until the graph changes: planning each new input signature binds shapes in this order.
  std::shared_ptr<const std::vector<Expr*>> order = evaluation_order_.load();
  if (order == nullptr) {
    order = std::make_shared<const std::vector<Expr*>>(evaluationOrder());
    evaluation_order_.store(order);
  }
  return *order;
}

std::vector<Expr*> Fusion::evaluationOrder() const {
  // The exprs the outputs need, in creation order wherever dependencies allow (Kahn's algorithm taking
  // the oldest ready expr first): the printout then follows the definition, and stays valid when a
  // pass inserts an expr after the exprs that consume it. Every plan runs this a few times, so the
  // bookkeeping is in vectors indexed by expr id rather than in hash maps.
  int64_t ids = 0;
  for (const auto& e : exprs_) ids = std::max(ids, e->id() + 1);
  std::vector<char> needed(static_cast<size_t>(ids), 0);
  size_t needed_count = 0;
  std::vector<Val*> stack(outputs_.begin(), outputs_.end());
  while (!stack.empty()) {
    Val* v = stack.back();
    stack.pop_back();
    Expr* def = v->definition();
    if (def == nullptr || needed[def->id()]) continue;
    needed[def->id()] = 1;
    ++needed_count;
    stack.insert(stack.end(), def->inputs().begin(), def->inputs().end());
  }
  auto isNeeded = [&](const Expr* e) { return e != nullptr && needed[e->id()] != 0; };
  std::vector<int> waiting(static_cast<size_t>(ids), 0);  // operands whose definition has not been emitted
  using Ready = std::pair<int64_t, Expr*>;                 // ordered by expr id
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (const auto& e : exprs_) {
    if (!isNeeded(e.get())) continue;
    int count = 0;
    for (Val* in : e->inputs()) count += isNeeded(in->definition()) ? 1 : 0;
    waiting[e->id()] = count;
    if (count == 0) ready.emplace(e->id(), e.get());
  }
  std::vector<Expr*> order;
  order.reserve(needed_count);
  while (!ready.empty()) {
    Expr* expr = ready.top().second;
    ready.pop();
    order.push_back(expr);
    for (Val* out : expr->outputs()) {
      for (Expr* use : out->uses()) {
        if (!isNeeded(use)) continue;
        // Counted per operand slot, so add(T3, T3) waits for T3 twice and is released once.
        for (Val* in : use->inputs()) {
          if (in == out && --waiting[use->id()] == 0) ready.emplace(use->id(), use);
        }
      }
    }
  }
  BRAZE_ASSERT(order.size() == needed_count, "the fusion graph has a cycle");
  return order;
}

const TensorView* cpuScalarInputOf(const Val* val) {
  while (val->isTensor() && val->definition() != nullptr && isMetaOp(val->definition()->kind())) {
    val = val->definition()->input(0);
  }
  if (!val->isTensor() || !val->isFusionInput() || !val->asTensor()->isCpu()) return nullptr;
  return val->asTensor();
}

}  // namespace braze
