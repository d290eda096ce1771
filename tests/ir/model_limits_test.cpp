// The limits a model file is held to on import: each checked before anything is allocated or
// inferred, each naming the initializer or node, and a model within every limit imports.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/resource_limits.h"
#include "ir/model_limits.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/scoped_limits.h"

namespace qforge {
namespace {

using testing::ScopedLimits;

// The message of the ResourceLimitError `f` throws; other errors are marked, no error is "".
std::string limitErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ResourceLimitError& e) {
    return e.what();
  } catch (const Error& e) {
    return std::string("not a limit: ") + e.what();
  }
  return "";
}

// y = x + w0 + w1 + ... with `count` float initializers of `size` elements.
testing::OnnxBuilder addChain(int count, int64_t size) {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {size}).output("y", onnx::TensorProto::FLOAT, {size});
  std::string prev = "x";
  for (int i = 0; i < count; ++i) {
    const std::string w = "w" + std::to_string(i);
    const std::string out = i + 1 == count ? "y" : "t" + std::to_string(i);
    b.initializer(w, at::ones({size}));
    b.node("Add", {prev, w}, {out}, "add" + std::to_string(i));
    prev = out;
  }
  return b;
}

// An If whose then-branch holds another If, `depth` bodies deep; each body passes x through.
onnx::GraphProto nestedBody(int depth) {
  testing::OnnxBuilder b;
  b.output("y", onnx::TensorProto::FLOAT, {2});
  if (depth == 0) {
    b.node("Identity", {"x"}, {"y"}, "leaf");
  } else {
    b.initializer("c" + std::to_string(depth), at::ones({1}, at::kBool));
    onnx::NodeProto& n =
        b.node("If", {"c" + std::to_string(depth)}, {"y"}, "if" + std::to_string(depth));
    testing::addGraphAttribute(n, "then_branch", nestedBody(depth - 1));
    testing::addGraphAttribute(n, "else_branch", nestedBody(0));
  }
  return b.model().graph();
}

testing::OnnxBuilder nestedIfs(int depth) {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
  b.initializer("c", at::ones({1}, at::kBool));
  onnx::NodeProto& n = b.node("If", {"c"}, {"y"}, "top");
  testing::addGraphAttribute(n, "then_branch", nestedBody(depth - 1));
  testing::addGraphAttribute(n, "else_branch", nestedBody(0));
  return b;
}

TEST(ModelLimits, AModelWithinEveryLimitImports) {
  ResourceLimits l;
  l.max_tensor_bytes = 64;
  l.max_model_bytes = 3 * 64;
  l.max_nodes = 7;  // nestedIfs(3) has 7
  l.max_subgraph_depth = 3;
  ScopedLimits scope(l);
  testing::OnnxBuilder chain = addChain(3, 16);  // three 64-byte initializers, three nodes
  EXPECT_EQ(limitErrorOf([&] { importOnnxModel(chain.model(), ""); }), "");
  testing::OnnxBuilder ifs = nestedIfs(3);
  EXPECT_EQ(limitErrorOf([&] { checkModelLimits(ifs.model().graph()); }), "");
}

TEST(ModelLimits, AHugeDeclaredInitializerIsRefusedBeforeItIsRead) {
  testing::OnnxBuilder b = addChain(1, 4);
  // Declares 2^62 floats (2^64 bytes, past int64) and holds 16 bytes.
  onnx::TensorProto* w = b.model().mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  w->add_dims(int64_t{1} << 31);
  w->add_dims(int64_t{1} << 31);
  const std::string e = limitErrorOf([&] { importOnnxModel(b.model(), ""); });
  EXPECT_EQ(e.rfind("initializer 'w0' would take more than 8 EiB, above the limit of 8.0 GiB", 0),
            0u)
      << e;
}

TEST(ModelLimits, InitializersAddingUpPastTheModelLimitAreRefused) {
  ResourceLimits l;
  l.max_model_bytes = 100;
  ScopedLimits scope(l);
  testing::OnnxBuilder b = addChain(4, 8);  // 32 bytes each: the fourth passes 100
  EXPECT_EQ(limitErrorOf([&] { importOnnxModel(b.model(), ""); }),
            "the initializers add up to more than 100 bytes (the limit for a model) at "
            "initializer 'w3'; if the model really is that large, raise the limit with "
            "--max-model-bytes (or QFORGE_MAX_MODEL_BYTES)");
}

TEST(ModelLimits, TooManyNodesAreRefused) {
  ResourceLimits l;
  l.max_nodes = 4;
  ScopedLimits scope(l);
  testing::OnnxBuilder b = addChain(5, 2);
  EXPECT_EQ(limitErrorOf([&] { importOnnxModel(b.model(), ""); }),
            "the model has more than 4 nodes (the limit, subgraphs included); if it really is "
            "that large, raise the limit with --max-nodes (or QFORGE_MAX_NODES)");
  // Nodes inside bodies count: 4 Ifs nested give 1 + (1 + 1) + (1 + 1) + (1 + 1) + ... > 4.
  testing::OnnxBuilder ifs = nestedIfs(4);
  EXPECT_NE(limitErrorOf([&] { checkModelLimits(ifs.model().graph()); }).find("more than 4 nodes"),
            std::string::npos);
}

TEST(ModelLimits, BodiesNestedTooDeepAreRefusedNamingTheNode) {
  ResourceLimits l;
  l.max_subgraph_depth = 3;
  ScopedLimits scope(l);
  testing::OnnxBuilder b = nestedIfs(4);
  EXPECT_EQ(limitErrorOf([&] { checkModelLimits(b.model().graph()); }),
            "node 'if1' (If): its body 'then_branch' is nested 4 deep, above the limit of 3; "
            "raise it with --max-subgraph-depth (or QFORGE_MAX_SUBGRAPH_DEPTH)");
  // The default holds 32: a thousand deep (what a fuzzer or a hostile file builds) is refused
  // without walking it all.
  setResourceLimits(ResourceLimits{});
  testing::OnnxBuilder deep = nestedIfs(40);
  EXPECT_NE(limitErrorOf([&] { checkModelLimits(deep.model().graph()); }).find("is nested 33 deep"),
            std::string::npos);
}

}  // namespace
}  // namespace qforge
