#include "exec/sample_inputs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"

namespace qforge {
namespace {

Graph twoInputs() {
  Graph g;
  Value* image = g.addValue("image");
  image->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3), Dim()}};
  g.addInput(image);
  Value* ids = g.addValue("ids");
  ids->type = TensorType{DType::Int64, std::vector<Dim>{Dim::known(2), Dim::known(5)}};
  g.addInput(ids);
  g.addInput(g.addInitializer("w", at::ones({1})));  // initializers need no sample
  return g;
}

TEST(SampleInputsTest, ShapesFollowDeclarationsAndBatch) {
  Graph g = twoInputs();
  TensorMap feeds = sampleInputs(g, 8, false, 0);
  ASSERT_EQ(feeds.size(), 2u);
  EXPECT_EQ(feeds.at("image").sizes(), (at::IntArrayRef{8, 3, 1}));
  EXPECT_EQ(feeds.at("ids").sizes(), (at::IntArrayRef{2, 5}));  // known leading dim kept
  EXPECT_EQ(feeds.at("ids").scalar_type(), at::kLong);
  EXPECT_EQ(sampleInputs(g, 8, true, 0).at("ids").size(0), 8);  // unless overridden
}

TEST(SampleInputsTest, DeterministicBySeed) {
  Graph g = twoInputs();
  EXPECT_TRUE(at::equal(sampleInputs(g, 2, false, 7).at("image"),
                        sampleInputs(g, 2, false, 7).at("image")));
  EXPECT_FALSE(at::equal(sampleInputs(g, 2, false, 7).at("image"),
                         sampleInputs(g, 2, false, 8).at("image")));
}

TEST(SampleInputsTest, GivenSampleShapesFillOpenDimsAndMustAgreeWithTheDeclaration) {
  Graph g = twoInputs();
  const std::vector<OpenInput> open = inputsWithOpenDims(g);
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].name, "image");
  EXPECT_EQ(open[0].declared, "[?,3,?]");
  TensorMap feeds = sampleInputs(g, 4, true, 0, 1, {{"image", {3, 48}}});
  EXPECT_EQ(feeds.at("image").sizes(), (at::IntArrayRef{4, 3, 48}));
  EXPECT_EQ(feeds.at("ids").sizes(), (at::IntArrayRef{4, 5}));
  auto message = [&](const SampleShapes& shapes) {
    try {
      sampleInputs(g, 1, true, 0, 1, shapes);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"image", {4, 48}}}).find("dim 1 is 4 but the model declares [?,3,?]"),
            std::string::npos);
  EXPECT_NE(message({{"image", {3, 48, 2}}}).find("give its 2 dims after the batch"),
            std::string::npos);
  EXPECT_NE(message({{"image", {3, 0}}}).find("must be positive"), std::string::npos);
  EXPECT_NE(message({{"w", {1}}}).find("'w', which is not an input"), std::string::npos);
  EXPECT_NE(message({{"nope", {1}}}).find("'nope', which is not an input"), std::string::npos);
}

TEST(SampleInputsTest, InputWithoutShapeIsAClearError) {
  Graph g;
  Value* x = g.addValue("x");
  x->type.dtype = DType::Float;
  g.addInput(x);
  EXPECT_THROW(sampleInputs(g, 1, false, 0), Error);
}

}  // namespace
}  // namespace qforge
