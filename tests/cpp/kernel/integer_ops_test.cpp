// codegen/integer_ops.inc, the integer math every kernel's preamble embeds, compiled here for the host:
// each function intBinary, intUnary and the conversions call must give what the reference's binaryInt,
// unaryInt, wrapToType and floatToInt give, for every integer width, on its edge values (the smallest and
// largest, -1, 0, 1, shifts by the width and past it, INT64_MIN / -1) and on random ones. The simulator
// runs the kernel IR with the reference's functions, so only this test and a GPU see these.
#include "ir/numerics.h"
#include "reference/pointwise_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace braze::kernel {
namespace {

// The device functions the text calls, as the host spells them.
#define __device__
#define __forceinline__ inline
using std::isnan;
using std::trunc;
#include "codegen/integer_ops.inc"
#undef __device__
#undef __forceinline__

using numerics::floatToInt;
using numerics::wrapToType;

const std::vector<DataType> kIntegerTypes = {DataType::Int8, DataType::UInt8, DataType::Int16, DataType::Int32,
                                             DataType::Int64};

// The bounds codegen passes to braze_float_to_int.
int64_t lowest(DataType dtype) { return integerMin(dtype); }
int64_t highest(DataType dtype) { return integerMax(dtype); }

// What a kernel stores into `dtype`: codegen's toResult wraps an integer held in long long.
long long wrapped(long long v, DataType dtype) {
  switch (dtype) {
    case DataType::Int8: return braze_wrap_i8(v);
    case DataType::UInt8: return braze_wrap_u8(v);
    case DataType::Int16: return braze_wrap_i16(v);
    case DataType::Int32: return braze_wrap_i32(v);
    default: return v;
  }
}

// Operands of `dtype`: its edge values, small ones, and random ones across its range.
std::vector<int64_t> operands(DataType dtype) {
  const int64_t lo = lowest(dtype), hi = highest(dtype);
  std::vector<int64_t> values = {lo, lo + 1, hi - 1, hi, 0, 1, 2, 3, 7, 8};
  if (lo < 0) values.insert(values.end(), {-1, -2, -3, -7, -8, lo / 2, lo / 3});
  values.push_back(hi / 2);
  values.push_back(hi / 3);
  std::mt19937_64 rng(static_cast<uint64_t>(hi));
  std::uniform_int_distribution<int64_t> any(lo, hi);
  for (int i = 0; i < 12; ++i) values.push_back(any(rng));
  return values;
}

// Shift amounts: within the width, at it, past it, negative.
std::vector<int64_t> shifts(DataType dtype) {
  const int64_t width = static_cast<int64_t>(sizeOf(dtype) * 8);
  return {0, 1, 2, width - 1, width, width + 1, 63, 64, 65, -1, -64};
}

struct Binary {
  OpKind kind;
  long long (*kernel)(long long, long long, int width, bool is_signed);
  bool shift;  // the second operand is a shift amount
};

const std::vector<Binary> kBinaries = {
    {OpKind::Add, [](long long a, long long b, int, bool) { return braze_add_i(a, b); }, false},
    {OpKind::Sub, [](long long a, long long b, int, bool) { return braze_sub_i(a, b); }, false},
    {OpKind::Mul, [](long long a, long long b, int, bool) { return braze_mul_i(a, b); }, false},
    {OpKind::Div, [](long long a, long long b, int, bool) { return braze_div_i(a, b); }, false},
    {OpKind::Fmod, [](long long a, long long b, int, bool) { return braze_fmod_i(a, b); }, false},
    {OpKind::Mod, [](long long a, long long b, int, bool) { return braze_fmod_i(a, b); }, false},
    {OpKind::Remainder, [](long long a, long long b, int, bool) { return braze_remainder_i(a, b); }, false},
    {OpKind::Pow, [](long long a, long long b, int, bool) { return braze_pow_i(a, b); }, false},
    {OpKind::BitwiseLeftShift, [](long long a, long long b, int w, bool) { return braze_shl_i(a, b, w); }, true},
    {OpKind::BitwiseRightShift, [](long long a, long long b, int w, bool s) { return braze_shr_i(a, b, w, s); }, true},
    {OpKind::LogicalRightShift, [](long long a, long long b, int w, bool) { return braze_lshr_i(a, b, w); }, true},
    {OpKind::Gcd, [](long long a, long long b, int, bool) { return braze_gcd_i(a, b); }, false},
};

TEST(IntegerOps, BinaryFunctionsComputeAsTheReferenceInEveryWidth) {
  int64_t checked = 0;
  for (DataType dtype : kIntegerTypes) {
    const int width = static_cast<int>(sizeOf(dtype) * 8);
    for (const Binary& op : kBinaries) {
      const std::vector<int64_t> lhs = operands(dtype);
      const std::vector<int64_t> rhs = op.shift ? shifts(dtype) : operands(dtype);
      for (int64_t a : lhs) {
        for (int64_t b : rhs) {
          const bool divides = op.kind == OpKind::Div || op.kind == OpKind::Fmod || op.kind == OpKind::Mod ||
                               op.kind == OpKind::Remainder;
          if (divides && b == 0) continue;  // the reference rejects it
          if (op.kind == OpKind::Pow && (b < 0 ? (a == 0) : b > 70)) continue;  // 0 ** -n rejected; big exponents slow
          constexpr int64_t kSmallest = std::numeric_limits<int64_t>::min();
          if (op.kind == OpKind::Gcd && (a == kSmallest || b == kSmallest)) continue;  // |INT64_MIN|: std::gcd's UB
          // The value held in long long, before the store wraps it: the same 64 bits as the reference's.
          const int64_t want = reference::binaryInt(op.kind, a, b, dtype);
          const long long got = op.kernel(a, b, width, isSigned(dtype));
          ASSERT_EQ(got, want) << opName(op.kind) << "(" << a << ", " << b << ") in " << toString(dtype);
          ASSERT_EQ(wrapped(got, dtype), wrapToType(want, dtype));
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(IntegerOps, DivisionOfTheSmallestBy_1WrapsAsTheReference) {
  const int64_t smallest = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(braze_div_i(smallest, -1), reference::binaryInt(OpKind::Div, smallest, -1, DataType::Int64));
  EXPECT_EQ(braze_fmod_i(smallest, -1), 0);
  EXPECT_EQ(braze_remainder_i(smallest, -1), 0);
  EXPECT_EQ(braze_wrap_i32(braze_div_i(std::numeric_limits<int32_t>::min(), -1)),
            wrapToType(reference::binaryInt(OpKind::Div, std::numeric_limits<int32_t>::min(), -1, DataType::Int32),
                       DataType::Int32));
}

TEST(IntegerOps, UnaryFunctionsComputeAsTheReference) {
  for (DataType dtype : kIntegerTypes) {
    for (int64_t x : operands(dtype)) {
      EXPECT_EQ(wrapped(braze_neg_i(x), dtype), wrapToType(reference::unaryInt(OpKind::Neg, x, dtype), dtype)) << x;
      EXPECT_EQ(wrapped(braze_abs_i(x), dtype), wrapToType(reference::unaryInt(OpKind::Abs, x, dtype), dtype)) << x;
      EXPECT_EQ(braze_sign_i(x), reference::unaryInt(OpKind::Sign, x, dtype)) << x;
      EXPECT_EQ(braze_relu_i(x), reference::unaryInt(OpKind::Relu, x, dtype)) << x;
    }
  }
}

TEST(IntegerOps, TernaryFunctionsComputeAsTheReference) {
  for (DataType dtype : kIntegerTypes) {
    const std::vector<int64_t> values = operands(dtype);
    for (size_t i = 0; i < values.size(); ++i) {
      const int64_t x = values[i], t = values[(i * 7 + 3) % values.size()], v = values[(i * 5 + 1) % values.size()];
      const std::vector<int64_t> threshold{x, t, v};
      EXPECT_EQ(braze_threshold_i(x, t, v), reference::elementwiseInt(OpKind::Threshold, threshold, dtype)) << x;
      // addcmul(x, t1, t2, value): x + value * t1 * t2, wrapping.
      const std::vector<int64_t> addcmul{x, t, v, values[(i * 3 + 2) % values.size()]};
      EXPECT_EQ(braze_addcmul_i(addcmul[0], addcmul[1], addcmul[2], addcmul[3]),
                reference::elementwiseInt(OpKind::Addcmul, addcmul, dtype))
          << x << " " << t << " " << v << " " << addcmul[3];
    }
  }
}

TEST(IntegerOps, WrapsToEachWidthAsTheReference) {
  const std::vector<int64_t> values = {0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, -32769, 65535,
                                       2147483647, 2147483648LL, -2147483649LL, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max(), 0x123456789abcdefLL};
  for (DataType dtype : kIntegerTypes) {
    for (int64_t v : values) EXPECT_EQ(wrapped(v, dtype), wrapToType(v, dtype)) << v << " to " << toString(dtype);
  }
}

TEST(IntegerOps, FloatToIntTruncatesSaturatesAndTakesNaNToZeroAsTheReference) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::vector<double> values = {0.0,     -0.0,   0.5,     -0.5,    1.5,    -1.5,  2.999, -2.999, 127.5, 128.0,
                                      -128.5,  -129.0, 255.9,   256.0,   1e10,   -1e10, 1e30,  -1e30,  kInf,  -kInf,
                                      std::nan(""), 9.2233720368547758e18, -9.2233720368547758e18, 2147483647.5,
                                      -2147483648.5};
  for (DataType dtype : kIntegerTypes) {
    for (double x : values) {
      EXPECT_EQ(braze_float_to_int(x, lowest(dtype), highest(dtype)), floatToInt(x, dtype))
          << x << " to " << toString(dtype);
    }
  }
}

}  // namespace
}  // namespace braze::kernel
