// The one dtype table (ir/data_type.cpp) that every binding reads: each dtype's array name (numpy,
// ml_dtypes, torch, JAX) and DLPack code round-trip, and the fp8 types (fnuz included) have DLPack codes
// of their own, so torch's fp8 tensors cross DLPack as what they are.
#include "ir/data_type.h"

#include <gtest/gtest.h>

namespace braze {
namespace {

TEST(DataTypeTable, ArrayNamesAndDlpackCodesRoundTrip) {
  for (DataType t : kAllDataTypes) {
    EXPECT_EQ(dataTypeFromArrayName(arrayTypeName(t)), t) << toString(t);
    EXPECT_EQ(dataTypeFromDlpack(dlpackCode(t), sizeOf(t) * 8), t) << toString(t);
  }
  EXPECT_EQ(arrayTypeName(DataType::BFloat16), "bfloat16");
  EXPECT_EQ(arrayTypeName(DataType::Float8_e4m3fnuz), "float8_e4m3fnuz");
  EXPECT_FALSE(numpyHasType(DataType::BFloat16));
  EXPECT_TRUE(numpyHasType(DataType::Half));
  EXPECT_EQ(dlpackCode(DataType::Float8_e5m2fnuz), 13);  // kDLFloat8_e5m2fnuz
  EXPECT_EQ(dataTypeFromDlpack(2, 16), DataType::Half);   // kDLFloat, 16 bits
  EXPECT_EQ(dataTypeFromDlpack(2, 128), std::nullopt);
  EXPECT_EQ(dataTypeFromArrayName("complex64"), std::nullopt);
}

}  // namespace
}  // namespace braze
