#include "ir/onnx_export.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "ir/dump.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

namespace fs = std::filesystem;
using testing::OnnxBuilder;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// A model that exercises what must survive a round trip: metadata, doc strings, every attribute
// kind, an opaque subgraph attribute, a function, an unnamed optional output.
OnnxBuilder richModel() {
  OnnxBuilder b(13);
  auto& m = b.model();
  m.set_producer_version("1.2");
  m.set_doc_string("model doc");
  m.set_domain("ai.qforge.test");
  m.set_model_version(7);
  auto* prop = m.add_metadata_props();
  prop->set_key("author");
  prop->set_value("tests");
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  m.mutable_graph()->set_doc_string("graph doc");
  b.input("x", kFloat, {-1, 3})
      .output("y", kFloat, {-1, 3})
      .output("flag", onnx::TensorProto::BOOL, {});
  b.initializer("w", at::linspace(-1, 1, 9).reshape({3, 3}));
  b.initializer("cond", at::ones({}, at::kBool));
  auto& mm = b.node("MatMul", {"x", "w"}, {"h"}, "mm");
  mm.set_doc_string("node doc");
  auto& drop = b.node("Dropout", {"h"}, {"y", ""}, "drop");
  auto* f = drop.add_attribute();
  f->set_name("note_floats");
  f->set_type(onnx::AttributeProto::FLOATS);
  f->add_floats(0.25f);
  testing::addIntsAttribute(drop, "note_ints", {1, -2});
  auto& iff = b.node("If", {"cond"}, {"flag"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff.add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(branch);
    auto* n = g->add_node();
    n->set_op_type("Identity");
    n->add_input("cond");
    n->add_output(std::string(branch) + "_out");
    auto* o = g->add_output();
    o->set_name(std::string(branch) + "_out");
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  }
  auto* fn = m.add_functions();
  fn->set_name("MyFn");
  fn->set_domain("ai.qforge.test");
  return b;
}

TEST(OnnxExportTest, ImportExportImportIsLossless) {
  onnx::ModelProto original = richModel().model();
  Graph first = importOnnxModel(original, "");
  onnx::ModelProto exported = exportOnnxModel(first);
  Graph second = importOnnxModel(exported, "");
  EXPECT_EQ(dumpGraph(first), dumpGraph(second));

  // Exporting again must give the same message: nothing is lost or invented on the way.
  onnx::ModelProto again = exportOnnxModel(second);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(exported, again)) << diff;

  EXPECT_EQ(exported.producer_version(), "1.2");
  EXPECT_EQ(exported.doc_string(), "model doc");
  EXPECT_EQ(exported.model_version(), 7);
  EXPECT_EQ(exported.metadata_props(0).value(), "tests");
  EXPECT_EQ(exported.functions_size(), 1);
  EXPECT_EQ(exported.graph().doc_string(), "graph doc");
  EXPECT_EQ(exported.opset_import_size(), 2);
}

TEST(OnnxExportTest, KeepsAttributesSubgraphsAndUnnamedOutputs) {
  onnx::ModelProto original = richModel().model();
  Graph g = importOnnxModel(original, "");
  // A pass may type the unnamed mask output; it must still be written as "" with no value_info.
  g.findNode("drop")->output(1)->type.dtype = DType::Bool;
  onnx::ModelProto exported = exportOnnxModel(g);
  const onnx::GraphProto& graph = exported.graph();
  const onnx::NodeProto* drop = nullptr;
  const onnx::NodeProto* iff = nullptr;
  for (const auto& n : graph.node()) {
    if (n.name() == "drop") drop = &n;
    if (n.name() == "if") iff = &n;
    if (n.name() == "mm") {
      EXPECT_EQ(n.doc_string(), "node doc");
    }
  }
  ASSERT_NE(drop, nullptr);
  ASSERT_NE(iff, nullptr);
  EXPECT_EQ(drop->output(1), "");
  for (const auto& info : graph.value_info()) {
    EXPECT_EQ(info.name().find("unnamed_output"), std::string::npos) << info.name();
  }
  EXPECT_EQ(drop->attribute(0).floats(0), 0.25f);
  EXPECT_EQ(drop->attribute(1).ints(1), -2);
  ASSERT_EQ(iff->attribute_size(), 2);
  EXPECT_EQ(iff->attribute(0).g().node(0).op_type(), "Identity");
  EXPECT_EQ(iff->attribute(1).name(), "else_branch");
}

TEST(OnnxExportTest, ExternalDataRoundTripsAndStaysInsideTheDirectory) {
  onnx::ModelProto original = richModel().model();
  Graph g = importOnnxModel(original, "");
  g.addInitializer("big", at::arange(4096, at::kFloat));
  const std::string dir = testing::makeTempDir("extexport");
  ExportOptions options;
  options.force_external_data = true;
  EXPECT_TRUE(exportOnnxFile(g, dir + "/m.onnx", options));
  EXPECT_TRUE(fs::exists(dir + "/m.onnx.data"));
  EXPECT_GE(fs::file_size(dir + "/m.onnx.data"), 4096u * 4u);
  Graph back = importOnnxFile(dir + "/m.onnx");
  EXPECT_TRUE(at::equal(back.value("big")->initializer(), at::arange(4096, at::kFloat)));
  EXPECT_TRUE(at::equal(back.value("w")->initializer(), g.value("w")->initializer()));
}

TEST(OnnxExportTest, LargeModelsSwitchToExternalDataByThreshold) {
  Graph g;
  Value* w = g.addInitializer("w", at::ones({1000}));
  g.addOutput(w);
  const std::string dir = testing::makeTempDir("threshold");
  ExportOptions small;
  small.external_data_threshold = 100;  // bytes: 4000 of weights exceed it
  EXPECT_TRUE(exportOnnxFile(g, dir + "/a.onnx", small));
  EXPECT_FALSE(exportOnnxFile(g, dir + "/b.onnx"));
  EXPECT_FALSE(fs::exists(dir + "/b.onnx.data"));
  EXPECT_TRUE(
      at::equal(importOnnxFile(dir + "/a.onnx").value("w")->initializer(), at::ones({1000})));
}

TEST(OnnxExportTest, WritesAtomicallyWithoutLeftovers) {
  Graph g;
  g.addOutput(g.addInitializer("w", at::ones({2})));
  const std::string dir = testing::makeTempDir("atomic");
  exportOnnxFile(g, dir + "/m.onnx");
  exportOnnxFile(g, dir + "/m.onnx");  // overwrite in place
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "m.onnx");
  }
  EXPECT_EQ(files, 1u);
}

TEST(OnnxExportTest, UnwritableDestinationIsAClearError) {
  Graph g;
  g.addOutput(g.addInitializer("w", at::ones({2})));
  try {
    exportOnnxFile(g, "/nonexistent-dir/m.onnx");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/m.onnx"), std::string::npos);
  }
}

}  // namespace
}  // namespace qforge
