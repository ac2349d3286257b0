// erfinv and erfcinv of the reference (which the simulator shares) against values computed with mpmath
// at 400 digits: within 2 ulp everywhere, near 0 (where 1 - |y| would drop y's low bits), in the tails
// (where erf rounds to 1), and for erfcinv near 0, 1 and 2 (where 1 - z would round).
#include "reference/pointwise_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace braze::reference {
namespace {

struct Known {
  double input;
  double inverse;
};

// The distance from `got` to `want` in units of want's last place.
double ulps(double got, double want) {
  return std::abs(got - want) / (std::nextafter(std::abs(want), INFINITY) - std::abs(want));
}

TEST(InverseErrorFunction, ErfinvIsWithinTwoUlpNearZeroAndInTheTails) {
  const Known known[] = {
      {2.5e-310, 2.2155673136319e-310},         {1e-300, 8.86226925452758e-301},
      {1e-12, 8.86226925452758e-13},             {3.909822466025165e-11, 3.464989943131602e-11},
      {1e-6, 8.8622692545299e-07},               {1e-3, 0.0008862271574665521},
      {-0.25, -0.2253120550121781},              {0.5, 0.4769362762044699},
      {0.7, 0.7328690779592167},                 {0.999999, 3.458910737275499},
      {0.9999999999999999, 5.8635847487551676},
  };
  for (const Known& k : known) {
    const double got = unaryFloat(OpKind::Erfinv, k.input, DataType::Double);
    EXPECT_LE(ulps(got, k.inverse), 2.0) << "erfinv(" << k.input << ") = " << got << ", want " << k.inverse;
  }
}

TEST(InverseErrorFunction, ErfcinvIsWithinTwoUlpNearZeroOneAndTwo) {
  const Known known[] = {
      {1e-300, 26.209469960516124},   {0x1p-60, 6.258604289958784},      {1e-20, 6.601580622355143},
      {0.05, 1.385903824349678},      {0.1, 1.163087153676674},          {0.3, 0.7328690779592169},
      {0.99999, 8.862269254719262e-06}, {1.5, -0.4769362762044699},      {1.9999999, -3.7665625814958155},
  };
  for (const Known& k : known) {
    const double got = unaryFloat(OpKind::Erfcinv, k.input, DataType::Double);
    EXPECT_LE(ulps(got, k.inverse), 2.0) << "erfcinv(" << k.input << ") = " << got << ", want " << k.inverse;
  }
}

TEST(InverseErrorFunction, EdgesAreInfiniteZeroOrNaN) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(unaryFloat(OpKind::Erfinv, 1.0, DataType::Double), inf);
  EXPECT_EQ(unaryFloat(OpKind::Erfinv, -1.0, DataType::Double), -inf);
  EXPECT_EQ(unaryFloat(OpKind::Erfinv, 0.0, DataType::Double), 0.0);
  EXPECT_TRUE(std::signbit(unaryFloat(OpKind::Erfinv, -0.0, DataType::Double)));
  EXPECT_TRUE(std::isnan(unaryFloat(OpKind::Erfinv, 1.5, DataType::Double)));
  EXPECT_EQ(unaryFloat(OpKind::Erfcinv, 0.0, DataType::Double), inf);
  EXPECT_EQ(unaryFloat(OpKind::Erfcinv, 2.0, DataType::Double), -inf);
  EXPECT_EQ(unaryFloat(OpKind::Erfcinv, 1.0, DataType::Double), 0.0);
  EXPECT_TRUE(std::isnan(unaryFloat(OpKind::Erfcinv, -0.5, DataType::Double)));
  EXPECT_TRUE(std::isnan(unaryFloat(OpKind::Erfcinv, std::nan(""), DataType::Double)));
}

}  // namespace
}  // namespace braze::reference
