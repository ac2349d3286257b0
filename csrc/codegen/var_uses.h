// What the emitter's rewrites need to know of a kernel's vars, from one walk of its statements and
// expressions: which scalars a single Let defines (their expression may be looked through), which 8-bit
// integer arrays are read as floats (they get a float copy filled straight from their vector loads),
// which narrow-float scalars only stores of their own type read (they may hold the value unrounded), and
// which mma fragments may stay as the registers ldmatrix loads, and which 8-bit arrays may stay as the words
// their vector loads read.
#pragma once

#include "kernel/kernel_ir.h"

#include <vector>

namespace braze::codegen {

using kernel::ExprId;
using kernel::Kernel;
using kernel::Stmt;
using kernel::VarId;

class VarUses {
 public:
  explicit VarUses(const Kernel& kernel);

  // Whether a statement uses expression `e` (kernel::reachedExpressions): what the source names.
  bool reached(ExprId e) const { return reached_[e]; }

  // A scalar that one Let, and no other statement, writes; definition() is that Let's expression.
  bool singleLet(VarId v) const { return writes_[v] == 1 && definition_[v] >= 0; }
  ExprId definition(VarId v) const { return definition_[v]; }
  // An Int8 or UInt8 local array that only vector loads write and some conversion to float reads.
  bool floatCopy(VarId v) const { return float_copy_[v]; }
  // Such an array that nothing else reads: it needs no integer copy.
  bool onlyAsFloat(VarId v) const { return only_as_float_[v]; }
  // A bf16, half, e4m3fn or e5m2 scalar of a single Let that only stores into its own type read (as the
  // stored value: a store rounds to its type).
  bool storedOnly(VarId v) const { return stored_only_[v]; }
  // An mma operand fragment that only ldmatrix or vector loads of its own type write (at whole registers)
  // and only mma statements read (B at a whole register): it may be held as the 32-bit registers
  // themselves, which the mma takes as they are (an operand held as values is packed at the mma).
  bool packedFragment(VarId v) const { return packed_[v]; }
  // An Int8 or UInt8 local array that only vector loads of whole words write (at word offsets) and that
  // only stores into a shared tile of its own type read, as the stored value: it may be held as the loaded
  // 32-bit words (a row-major 8-bit B staged k-major then takes each byte out of its word where it is
  // stored, instead of sign-extending every byte at the load).
  bool byteWords(VarId v) const { return byte_words_[v]; }
  // A wgmma's accumulator array: an Int32 one is held as ints (the s32 registers wgmma writes), not the
  // 64-bit integers a kernel computes integers in.
  bool wgmmaAccumulator(VarId v) const { return wgmma_accumulator_[v]; }
  // The values of `dtype` one 32-bit fragment register holds.
  static int64_t valuesPerRegister(DataType dtype) { return 4 / sizeOf(dtype); }

 private:
  void walk(const std::vector<Stmt>& stmts);
  // A vector load of a tensor of the array's type into whole registers of it.
  bool wholeRegisters(const Stmt& load) const;

  const Kernel& k_;
  std::vector<int> writes_;
  std::vector<ExprId> definition_;
  std::vector<bool> float_copy_, only_as_float_, stored_only_, packed_, byte_words_, wgmma_accumulator_;
  std::vector<bool> reached_;  // per expression
  std::vector<const Stmt*> mmas_;
};

}  // namespace braze::codegen
