#include "ir/onnx_import.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <onnx/checker.h>

#include <map>

#include "core/error.h"
#include "ir/onnx_export.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using testing::OnnxBuilder;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// x[N,4] -> MatMul(w) -> Add(b) -> Relu -> y
OnnxBuilder smallMlp() {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 4}).output("y", kFloat, {-1, 3});
  b.initializer("w", at::arange(12, at::kFloat).reshape({4, 3}));
  b.initializer("b", at::tensor({0.5f, -1.f, 2.f}));
  b.node("MatMul", {"x", "w"}, {"xw"}, "matmul");
  b.node("Add", {"xw", "b"}, {"h"}, "add");
  b.node("Relu", {"h"}, {"y"}, "relu");
  return b;
}

std::string importError(const std::string& path) {
  try {
    importOnnxFile(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string saved(const OnnxBuilder& b, const std::string& tag) {
  const std::string path = testing::makeTempDir(tag) + "/model.onnx";
  b.save(path);
  return path;
}

TEST(OnnxImportTest, ImportsStructureTypesAndInitializers) {
  Graph g = importOnnxFile(saved(smallMlp(), "mlp"));
  ASSERT_EQ(g.nodeCount(), 3u);
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0]->type.str(), "float32[N,4]");
  EXPECT_TRUE(at::equal(g.value("w")->initializer(), at::arange(12, at::kFloat).reshape({4, 3})));
  EXPECT_EQ(g.value("xw")->producer()->opType(), "MatMul");
  EXPECT_EQ(g.model.opsetFor(""), 13);
  EXPECT_EQ(g.model.producer_name, "qforge-tests");
}

// "ai.onnx" is another spelling of the default domain: the import writes "" for nodes and opset
// imports, so later `domain().empty()` tests hold, and the exported model is valid ONNX.
TEST(OnnxImportTest, AiOnnxDomainBecomesTheDefaultDomain) {
  OnnxBuilder b = smallMlp();
  b.model().mutable_opset_import(0)->set_domain("ai.onnx");
  for (onnx::NodeProto& n : *b.model().mutable_graph()->mutable_node())
    n.set_domain("ai.onnx");
  b.model().mutable_graph()->mutable_node(2)->set_domain("");  // spellings may mix
  Graph g = importOnnxFile(saved(b, "ai_onnx"));
  ASSERT_EQ(g.nodeCount(), 3u);
  for (const Node* n : g.nodes())
    EXPECT_EQ(n->domain(), "") << n->describe();
  EXPECT_EQ(g.model.opset_imports, (std::map<std::string, int64_t>{{"", 13}}));

  onnx::ModelProto exported = exportOnnxModel(g);
  EXPECT_NO_THROW(onnx::checker::check_model(exported));
  ASSERT_EQ(exported.opset_import_size(), 1);
  EXPECT_EQ(exported.opset_import(0).domain(), "");
  for (const onnx::NodeProto& n : exported.graph().node())
    EXPECT_EQ(n.domain(), "") << n.name();
}

TEST(OnnxImportTest, DefaultDomainImportWinsOverAiOnnx) {
  OnnxBuilder b = smallMlp();  // imports "" at 13
  auto* alias = b.model().add_opset_import();
  alias->set_domain("ai.onnx");
  alias->set_version(11);
  auto* other = b.model().add_opset_import();
  other->set_domain("com.microsoft");
  other->set_version(1);
  Graph g = importOnnxFile(saved(b, "ai_onnx_twice"));
  EXPECT_EQ(g.model.opset_imports,
            (std::map<std::string, int64_t>{{"", 13}, {"com.microsoft", 1}}));
}

TEST(OnnxImportTest, ShapeInferenceTypesIntermediateValues) {
  Graph g = importOnnxFile(saved(smallMlp(), "infer"));
  EXPECT_EQ(g.value("xw")->type.str(), "float32[N,3]");
}

TEST(OnnxImportTest, ReadsTypedDataFieldsAsWellAsRawData) {
  OnnxBuilder b;
  b.output("c", kFloat, {3});
  auto* t = b.model().mutable_graph()->add_initializer();
  t->set_name("c");
  t->set_data_type(kFloat);
  t->add_dims(3);
  for (float v : {1.5f, -2.f, 3.25f})
    t->add_float_data(v);
  auto* i = b.model().mutable_graph()->add_initializer();
  i->set_name("i8");
  i->set_data_type(onnx::TensorProto::INT8);
  i->add_dims(2);
  i->add_int32_data(-128);
  i->add_int32_data(127);
  Graph g = importOnnxFile(saved(b, "typed"));
  EXPECT_TRUE(at::equal(g.value("c")->initializer(), at::tensor({1.5f, -2.f, 3.25f})));
  EXPECT_TRUE(at::equal(g.value("i8")->initializer(), at::tensor({-128, 127}, at::kChar)));
}

TEST(OnnxImportTest, TruncatedFileGivesOneClearLine) {
  const std::string bytes = smallMlp().bytes();
  const std::string path = testing::makeTempDir("trunc") + "/model.onnx";
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  const std::string m = importError(path);
  EXPECT_NE(m.find(path), std::string::npos) << m;
  EXPECT_NE(m.find("truncated or not ONNX"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
}

TEST(OnnxImportTest, NonOnnxBytesAreRefused) {
  const std::string path = testing::makeTempDir("junk") + "/model.onnx";
  std::ofstream(path) << "this is a text file, not a model\n";
  EXPECT_NE(importError(path).find("not"), std::string::npos);
}

TEST(OnnxImportTest, EmptyFileIsNotAModel) {
  const std::string path = testing::makeTempDir("empty") + "/model.onnx";
  std::ofstream(path).close();
  EXPECT_NE(importError(path).find("not an ONNX model"), std::string::npos);
}

TEST(OnnxImportTest, MissingFileAndDirectoryAreNamed) {
  EXPECT_NE(importError("/nonexistent/model.onnx").find("no such file"), std::string::npos);
  EXPECT_NE(importError(testing::makeTempDir("dir")).find("is a directory"), std::string::npos);
}

TEST(OnnxImportTest, MissingInitializerNamesNodeAndValue) {
  OnnxBuilder b = smallMlp();
  b.model().mutable_graph()->mutable_initializer()->RemoveLast();  // drop "b"
  const std::string m = importError(saved(b, "missing"));
  EXPECT_NE(m.find("node 'add' (Add) reads 'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("missing initializer"), std::string::npos) << m;
}

TEST(OnnxImportTest, NamesThatAreNotUtf8AreRefusedAndShownEscaped) {
  OnnxBuilder node_name = smallMlp();
  node_name.model().mutable_graph()->mutable_node(1)->set_name("a\xFF\x1B[2Jdd");
  EXPECT_NE(importError(saved(node_name, "utf8_node"))
                .find("node 1's name 'a\\xFF\\x1B[2Jdd' is not UTF-8 text (byte 0xFF at offset "
                      "1); ONNX names are UTF-8: fix the name or re-export the model"),
            std::string::npos);
  OnnxBuilder value = smallMlp();
  value.model().mutable_graph()->mutable_node(0)->set_output(0, "xw\xC0\xAF");
  EXPECT_NE(importError(saved(value, "utf8_value"))
                .find("node 0 ('matmul') writes a value whose name 'xw\\xC0\\xAF' is not UTF-8"),
            std::string::npos);
  OnnxBuilder producer = smallMlp();
  producer.model().set_producer_name("exp\xED\xA0\x80rter");
  EXPECT_NE(importError(saved(producer, "utf8_producer")).find("the producer name 'exp\\xED"),
            std::string::npos);
  // UTF-8 that is not ASCII is a name like any other.
  OnnxBuilder accented = smallMlp();
  accented.model().mutable_graph()->mutable_node(2)->set_name("r\xC3\xA9lu");
  EXPECT_EQ(importOnnxFile(saved(accented, "utf8_ok")).nodes().back()->name(), "r\xC3\xA9lu");
}

// Symbolic dimensions are printed in shapes and JSON reports like names (`qforge inspect --json`
// threw nlohmann's type_error on a fuzzed one, issue #22).
TEST(OnnxImportTest, DimensionNamesThatAreNotUtf8AreRefused) {
  OnnxBuilder model = smallMlp();
  model.model()
      .mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("N\xDF");
  EXPECT_NE(importError(saved(model, "utf8_dim"))
                .find("graph input 'x' has a dimension whose name 'N\\xDF' is not UTF-8 text"),
            std::string::npos)
      << importError(saved(model, "utf8_dim"));
}

TEST(OnnxImportTest, CycleIsRefused) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("q", kFloat, {2});
  b.node("Add", {"x", "q"}, {"p"}, "p");
  b.node("Neg", {"p"}, {"q"}, "q");
  EXPECT_NE(importError(saved(b, "cycle")).find("cycle"), std::string::npos);
}

TEST(OnnxImportTest, DuplicateValueNamesAreRefused) {
  OnnxBuilder b = smallMlp();
  b.node("Neg", {"x"}, {"h"}, "dup");  // "h" is already Add's output
  const std::string m = importError(saved(b, "dup"));
  EXPECT_NE(m.find("'h'"), std::string::npos) << m;
  EXPECT_NE(m.find("already defined"), std::string::npos) << m;
}

TEST(OnnxImportTest, DuplicateInitializerIsRefused) {
  OnnxBuilder b = smallMlp();
  b.initializer("w", at::zeros({1}));
  EXPECT_NE(importError(saved(b, "dupinit")).find("more than once"), std::string::npos);
}

TEST(OnnxImportTest, UndefinedGraphOutputIsRefused) {
  OnnxBuilder b = smallMlp();
  b.output("ghost", kFloat, {1});
  EXPECT_NE(importError(saved(b, "ghost")).find("'ghost'"), std::string::npos);
}

TEST(OnnxImportTest, CorruptTensorSizeIsRefused) {
  OnnxBuilder b = smallMlp();
  b.model().mutable_graph()->mutable_initializer(0)->add_dims(2);  // shape no longer matches data
  const std::string m = importError(saved(b, "corrupt"));
  EXPECT_NE(m.find("initializer 'w'"), std::string::npos) << m;
}

onnx::StringStringEntryProto* externalEntry(onnx::TensorProto* t, const std::string& k,
                                            const std::string& v) {
  auto* e = t->add_external_data();
  e->set_key(k);
  e->set_value(v);
  return e;
}

OnnxBuilder externalModel(const std::string& location) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  auto* t = b.model().mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kFloat);
  t->add_dims(2);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  externalEntry(t, "location", location);
  externalEntry(t, "offset", "4");
  externalEntry(t, "length", "8");
  b.node("Mul", {"x", "w"}, {"y"}, "mul");
  return b;
}

TEST(OnnxImportTest, ReadsExternalDataAtItsOffset) {
  const std::string dir = testing::makeTempDir("ext");
  const float data[3] = {9.f, 1.25f, -4.f};
  std::ofstream(dir + "/weights.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), sizeof(data));
  externalModel("weights.bin").save(dir + "/model.onnx");
  Graph g = importOnnxFile(dir + "/model.onnx");
  EXPECT_TRUE(at::equal(g.value("w")->initializer(), at::tensor({1.25f, -4.f})));
}

TEST(OnnxImportTest, ExternalDataPathEscapeIsRefused) {
  const std::string dir = testing::makeTempDir("escape");
  std::filesystem::create_directories(dir + "/model");
  const float data[3] = {0, 0, 0};
  std::ofstream(dir + "/secret.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), sizeof(data));
  externalModel("../secret.bin").save(dir + "/model/model.onnx");
  const std::string m = importError(dir + "/model/model.onnx");
  EXPECT_NE(m.find("outside the model's directory"), std::string::npos) << m;
  externalModel(dir + "/secret.bin").save(dir + "/model/abs.onnx");
  EXPECT_NE(importError(dir + "/model/abs.onnx").find("outside the model's directory"),
            std::string::npos);
}

TEST(OnnxImportTest, TruncatedExternalDataIsRefused) {
  const std::string dir = testing::makeTempDir("extshort");
  std::ofstream(dir + "/weights.bin", std::ios::binary).write("abcd", 4);
  externalModel("weights.bin").save(dir + "/model.onnx");
  EXPECT_NE(importError(dir + "/model.onnx").find("past the end"), std::string::npos);
}

TEST(OnnxImportTest, UnnamedOptionalOutputsGetPrivateNames) {
  OnnxBuilder b;
  b.input("x", kFloat, {2, 2}).output("y", kFloat, {2, 2});
  b.node("Dropout", {"x"}, {"y", ""}, "drop");
  Graph g = importOnnxFile(saved(b, "unnamed"));
  const Node* n = g.findNode("drop");
  ASSERT_EQ(n->outputs().size(), 2u);
  EXPECT_TRUE(n->output(1)->anonymous);
  EXPECT_FALSE(n->output(0)->anonymous);
}

}  // namespace
}  // namespace qforge
