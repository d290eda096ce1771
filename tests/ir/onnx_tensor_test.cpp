// TensorProto -> at::Tensor on crafted tensors: sizes and external-data fields that a model file
// can make anything (issue #22's fuzzing found the overflow and the throw below).
#include "ir/onnx_tensor.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>

#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/scoped_limits.h"

namespace qforge::testing {
namespace {

TEST(OnnxTensorTest, AShapeWhoseSizeOverflowsIsRefused) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {int64_t{555801485732550144}, int64_t{3934}})
    t.add_dims(d);
  t.set_raw_data("abcd");
  // The size limit refuses it first, by its saturated byte count.
  EXPECT_EQ(errorOf([&] { tensorFromProto(t, ".", "initializer 'w'"); }).substr(0, 44),
            "initializer 'w' would take more than 8 EiB, ");
  // With no limit to speak of, the element count still cannot overflow.
  ResourceLimits unlimited;
  unlimited.max_tensor_bytes = std::numeric_limits<int64_t>::max();
  testing::ScopedLimits scope(unlimited);
  EXPECT_EQ(errorOf([&] { tensorFromProto(t, ".", "initializer 'w'"); }),
            "initializer 'w': tensor shape has more elements than any tensor can hold");
}

// No elements, but ATen's strides multiply the other dims: (0, 2^40, 2^40) overflowed them and
// ATen's reshape aborted (c10::Error from a fuzzed initializer, issue #22).
TEST(OnnxTensorTest, AnEmptyShapeWhoseStridesOverflowIsRefused) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {int64_t{0}, int64_t{1} << 40, int64_t{1} << 40})
    t.add_dims(d);
  EXPECT_EQ(errorOf([&] { tensorFromProto(t, ".", "initializer 'w'"); }),
            "initializer 'w': tensor shape has more elements than any tensor can hold");
  t.set_dims(1, 3);
  t.set_dims(2, 4);
  EXPECT_EQ(tensorFromProto(t, ".", "initializer 'w'").sizes(), (std::vector<int64_t>{0, 3, 4}));
}

TEST(OnnxTensorTest, ExternalDataFieldsMustBeIntegersInRange) {
  const std::string dir = makeTempDir("ext");
  std::ofstream(dir + "/w.bin", std::ios::binary).write("abcdefgh", 8);
  const auto tensor = [](const std::string& offset, const std::string& length) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_dims(1);
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", "w.bin"},
                                     {"offset", offset},
                                     {"length", length}}) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    return t;
  };
  EXPECT_EQ(errorOf([&] { tensorFromProto(tensor("4x", "4"), dir, "initializer 'w'"); }),
            "initializer 'w': external data 'offset' is not an integer");
  EXPECT_EQ(errorOf([&] { tensorFromProto(tensor("4", "99999999999999999999"), dir, "w"); }),
            "w: external data 'length' is not an integer");
  EXPECT_NE(errorOf([&] {
              tensorFromProto(tensor("4", "9223372036854775807"), dir, "w");
            }).find("is past the end"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              tensorFromProto(tensor("-9223372036854775807", "-1"), dir, "w");
            }).find("is past the end"),
            std::string::npos);
  EXPECT_EQ(tensorFromProto(tensor("4", "4"), dir, "w").numel(), 1);
}

}  // namespace
}  // namespace qforge::testing
