#include "support/op_test_helpers.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace qforge::testing {

namespace {
at::Tensor intTensor(const std::vector<int64_t>& values, at::IntArrayRef shape,
                     at::ScalarType type) {
  return at::tensor(values, at::kLong).reshape(shape).to(type);
}
}  // namespace

at::Tensor u8(const std::vector<int64_t>& values, at::IntArrayRef shape) {
  return intTensor(values, shape, at::kByte);
}
at::Tensor i8(const std::vector<int64_t>& values, at::IntArrayRef shape) {
  return intTensor(values, shape, at::kChar);
}
at::Tensor i32(const std::vector<int64_t>& values, at::IntArrayRef shape) {
  return intTensor(values, shape, at::kInt);
}
at::Tensor scalarF32(float v) {
  return at::scalar_tensor(v, at::kFloat);
}
at::Tensor scalarU8(int64_t v) {
  return at::scalar_tensor(v, at::kLong).to(at::kByte);
}
at::Tensor scalarI8(int64_t v) {
  return at::scalar_tensor(v, at::kLong).to(at::kChar);
}

at::Tensor f32(std::vector<float> values) {
  return at::tensor(values, at::kFloat);
}

at::Tensor f32(std::vector<float> values, at::IntArrayRef shape) {
  return at::tensor(values, at::kFloat).reshape(shape);
}

at::Tensor i64(std::vector<int64_t> values) {
  return at::tensor(values, at::kLong);
}

Attribute ints(const std::string& name, std::vector<int64_t> values) {
  return Attribute::makeInts(name, std::move(values));
}

at::Tensor run1(const SingleOp& op) {
  return runSingleOp(op).at(0);
}

void expectTensorEqual(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_EQ(actual.sizes(), expected.sizes()) << "actual:\n" << actual;
  EXPECT_TRUE(at::equal(actual, expected)) << "actual:\n" << actual << "\nexpected:\n" << expected;
}

void expectTensorNear(const at::Tensor& actual, const at::Tensor& expected, double rtol,
                      double atol) {
  if (!at::isFloatingType(expected.scalar_type())) {
    expectTensorEqual(actual, expected);
    return;
  }
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_EQ(actual.sizes(), expected.sizes()) << "actual:\n" << actual;
  EXPECT_TRUE(at::allclose(actual, expected, rtol, atol)) << "actual:\n"
                                                          << actual << "\nexpected:\n"
                                                          << expected;
}

void expectValuesNear(const at::Tensor& actual, std::vector<int64_t> shape,
                      std::vector<double> values, double tol) {
  ASSERT_TRUE(actual.defined());
  ASSERT_EQ(actual.sizes(), at::IntArrayRef(shape));
  at::Tensor a = actual.to(at::kDouble).contiguous().reshape({-1});
  ASSERT_EQ(a.numel(), static_cast<int64_t>(values.size()));
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_NEAR(a[i].item<double>(), values[i], tol) << "element " << i;
  }
}

void expectError(const SingleOp& op, const std::vector<std::string>& parts) {
  try {
    runSingleOp(op);
    ADD_FAILURE() << op.op_type << " did not throw a qforge::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message '" << message << "' lacks '" << part << "'";
    }
  }
}

void expectNodeError(const SingleOp& op, const std::string& what) {
  expectError(op, {"node 'op' (" + op.op_type + ")", what});
}

}  // namespace qforge::testing
