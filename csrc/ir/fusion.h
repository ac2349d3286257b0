// A Fusion owns a graph of values and exprs, its inputs and outputs, and the outputs that the user
// declared to alias (be written into) an input. Builders in ops.h add to the current fusion, set by
// FusionGuard (thread-local), as nvFuser's frontend does.
#pragma once

#include "ir/expr.h"
#include "ir/val.h"

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace braze {

// Shared (enable_shared_from_this) where a plan can read it as defined: planning copies a fusion only
// when a pass edits it.
class Fusion : public std::enable_shared_from_this<Fusion> {
 public:
  Fusion() = default;
  Fusion(const Fusion& other);  // deep copy: same ids, same names, same printout
  Fusion& operator=(const Fusion& other);
  Fusion(Fusion&& other) noexcept;
  Fusion& operator=(Fusion&& other) noexcept;
  ~Fusion() = default;

  // Creating nodes.
  TensorView* newTensor(DataType dtype, std::vector<IterDomain> domain, TensorLayout layout = {}, bool is_cpu = false);
  Scalar* newScalar(DataType dtype, std::optional<ScalarValue> value = std::nullopt);
  Scalar* constant(ScalarValue value, DataType dtype = DataType::Null);  // Null: Bool/Int64/Double by value
  Expr* newExpr(OpKind kind, std::vector<Val*> inputs, std::vector<Val*> outputs, Attributes attrs = {});

  // For deserialization (ir/json.cpp) only: the next val and expr created get these ids, so a restored
  // fusion keeps its names. The caller keeps ids unique, and ends by setting them past the largest.
  void restoreNextIds(int64_t next_val_id, int64_t next_expr_id) {
    next_id_ = next_val_id;
    next_expr_id_ = next_expr_id;
  }

  // Graph edits used by passes: make `consumer` read `replacement` where it read `original`.
  void replaceInput(Expr* consumer, Val* original, Val* replacement);

  // Inputs and outputs.
  void addInput(Val* val);
  void addOutput(Val* val);
  // The output is written into the input's memory (in-place update); the output must match it.
  void aliasOutputToInput(Val* output, Val* input);
  const std::vector<Val*>& inputs() const { return inputs_; }
  const std::vector<Val*>& outputs() const { return outputs_; }
  // Output -> input it aliases, for outputs declared with add_output(t, alias_input=...).
  const std::map<Val*, Val*>& outputAliases() const { return output_aliases_; }
  bool isInput(const Val* val) const;
  bool isOutput(const Val* val) const;
  // What execute does with output i, as nvFuser does: returns it; writes it into the input it aliases
  // and returns nothing (the first occurrence of an alias_input= output); or returns that input itself
  // after the update (the same value added again as a plain output).
  enum class OutputUse { Returned, WrittenIntoInput, UpdatedInput };
  OutputUse outputUse(size_t i) const;

  // Every node, in creation order.
  const std::vector<std::unique_ptr<Val>>& vals() const { return vals_; }
  const std::vector<std::unique_ptr<Expr>>& allExprs() const { return exprs_; }
  Val* valById(int64_t id) const;
  // The exprs the outputs depend on, each after its operands' definitions: the order to evaluate.
  std::vector<Expr*> exprsToEvaluate() const;
  // Whether an expr of `evaluated` (exprsToEvaluate()) has to run: it makes values an output needs, or
  // it checks index operands (index_select, gather, scatter...), whose errors a run reports. Not one
  // whose tensor is read only for its shape (fd.ops.size, a randn_like's extents), which shape inference
  // gives without computing it. Indexed by expr id.
  std::vector<char> computesNeededValues(const std::vector<Expr*>& evaluated) const;

  // Readable IR, one line per expr (like nvFuser's fusion_ir), and a runnable Python definition.
  std::string toString() const;
  // `drawn_inputs`: positions of scalar inputs each execute draws (a random op's seed and offset given
  // by neither the caller nor the definition), left out of the script as the definition left them out.
  std::string toPython(const std::vector<size_t>& drawn_inputs = {}) const;

 private:
  int64_t nextId() { return next_id_++; }
  std::vector<Expr*> evaluationOrder() const;  // exprsToEvaluate's, computed
  void adoptNodes();  // after a move: point every Val back at this fusion

  std::vector<std::unique_ptr<Val>> vals_;
  std::vector<std::unique_ptr<Expr>> exprs_;
  std::vector<Val*> inputs_;
  std::vector<Val*> outputs_;
  std::map<Val*, Val*> output_aliases_;
  int64_t next_id_ = 0;
  int64_t next_expr_id_ = 0;
  // exprsToEvaluate's order, computed once; cleared by every edit that can change it (a new expr, a
  // replaced operand, a new output or aliased output, a copy or move). Atomic: plans on several threads
  // read one fusion.
  mutable std::atomic<std::shared_ptr<const std::vector<Expr*>>> evaluation_order_;
};

// The CPU scalar input (a 0-d define_tensor(is_cpu=True)) whose value every element of `val` is: the
// input itself or a view of it made by meta ops; null for anything else. Kernels take its value as a
// launch argument, never its host address.
const TensorView* cpuScalarInputOf(const Val* val);

// Sets the fusion that op builders add to, for the lifetime of the guard.
class FusionGuard {
 public:
  explicit FusionGuard(Fusion* fusion);
  ~FusionGuard();
  FusionGuard(const FusionGuard&) = delete;
  FusionGuard& operator=(const FusionGuard&) = delete;
  static Fusion* current();  // throws if there is none

 private:
  Fusion* previous_;
};

}  // namespace braze
