#include "ir/onnx_import.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/shape_inference/implementation.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/utf8.h"
#include "ir/captured_values.h"
#include "ir/model_limits.h"
#include "ir/onnx_export.h"
#include "ir/onnx_tensor.h"
#include "ir/shape_inference_guard.h"
#include "ir/verifier.h"

namespace qforge {

namespace {

TensorType typeFromProto(const onnx::TypeProto& type) {
  TensorType result;
  if (!type.has_tensor_type()) return result;
  const auto& tensor = type.tensor_type();
  result.dtype = static_cast<DType>(tensor.elem_type());
  if (tensor.has_shape()) {
    std::vector<Dim> dims;
    for (const auto& d : tensor.shape().dim()) {
      if (d.has_dim_value()) {
        dims.push_back(Dim::known(d.dim_value()));
      } else {
        dims.push_back(Dim::symbolic(d.has_dim_param() ? d.dim_param() : ""));
      }
    }
    result.shape = std::move(dims);
  }
  return result;
}

Attribute attributeFromProto(const onnx::AttributeProto& proto, const std::string& base_dir,
                             const std::string& where) {
  Attribute a;
  a.name = proto.name();
  a.doc_string = proto.doc_string();
  a.ref_attr_name = proto.ref_attr_name();
  const std::string what = where + ", attribute '" + proto.name() + "'";
  switch (proto.type()) {
    case onnx::AttributeProto::FLOAT:
      a.kind = AttributeKind::Float;
      a.f = proto.f();
      break;
    case onnx::AttributeProto::INT:
      a.kind = AttributeKind::Int;
      a.i = proto.i();
      break;
    case onnx::AttributeProto::STRING:
      a.kind = AttributeKind::String;
      a.s = proto.s();
      break;
    case onnx::AttributeProto::TENSOR:
      a.kind = AttributeKind::Tensor;
      a.t = tensorFromProto(proto.t(), base_dir, what);
      break;
    case onnx::AttributeProto::FLOATS:
      a.kind = AttributeKind::Floats;
      a.floats.assign(proto.floats().begin(), proto.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      a.kind = AttributeKind::Ints;
      a.ints.assign(proto.ints().begin(), proto.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      a.kind = AttributeKind::Strings;
      a.strings.assign(proto.strings().begin(), proto.strings().end());
      break;
    case onnx::AttributeProto::TENSORS:
      a.kind = AttributeKind::Tensors;
      for (const auto& t : proto.tensors())
        a.tensors.push_back(tensorFromProto(t, base_dir, what));
      break;
    default:
      a.kind = AttributeKind::Opaque;
      a.opaque_proto = proto.SerializeAsString();
      break;
  }
  return a;
}

std::vector<std::pair<std::string, std::string>> propsFrom(
    const google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto>& entries) {
  std::vector<std::pair<std::string, std::string>> result;
  for (const auto& e : entries)
    result.emplace_back(e.key(), e.value());
  return result;
}

// Names are printed and written into JSON reports, which need UTF-8: a name that is not UTF-8
// text is refused when the model is read, shown escaped, rather than failing in a report after
// calibration.
void requireUtf8(const std::string& text, const std::string& what) {
  const size_t bad = invalidUtf8Offset(text);
  if (bad == std::string::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text[bad]));
  throw Error(what + " '" + printable(text) + "' is not UTF-8 text (byte " + byte + " at offset " +
              std::to_string(bad) + "); ONNX names are UTF-8: fix the name or re-export the model");
}

// Symbolic dimensions ("N", "batch") are printed in shapes and reports like names.
void requireUtf8DimParams(const onnx::ValueInfoProto& info, const std::string& what) {
  if (!info.type().has_tensor_type() || !info.type().tensor_type().has_shape()) return;
  for (const auto& d : info.type().tensor_type().shape().dim()) {
    if (d.has_dim_param())
      requireUtf8(d.dim_param(), what + " '" + info.name() + "' has a dimension whose name");
  }
}

void requireUtf8Names(const onnx::GraphProto& g) {
  requireUtf8(g.name(), "the graph name");
  for (const auto& init : g.initializer())
    requireUtf8(init.name(), "an initializer name");
  for (const auto& in : g.input()) {
    requireUtf8(in.name(), "a graph input name");
    requireUtf8DimParams(in, "graph input");
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const std::string which = "node " + std::to_string(i);
    requireUtf8(n.name(), which + "'s name");
    const std::string node = which + " ('" + n.name() + "')";
    requireUtf8(n.op_type(), node + "'s op type");
    requireUtf8(n.domain(), node + "'s domain");
    for (const std::string& in : n.input())
      requireUtf8(in, node + " reads a value whose name");
    for (const std::string& out : n.output())
      requireUtf8(out, node + " writes a value whose name");
    for (const auto& attribute : n.attribute())
      requireUtf8(attribute.name(), node + " has an attribute whose name");
  }
  // After the nodes: shape inference copies their output names into value_info.
  for (const auto& out : g.output()) {
    requireUtf8(out.name(), "a graph output name");
    requireUtf8DimParams(out, "graph output");
  }
  for (const auto& info : g.value_info()) {
    requireUtf8(info.name(), "a value_info name");
    requireUtf8DimParams(info, "value_info");
  }
}

// "ai.onnx" is another name of the default domain "": one spelling from import on, so that every
// later `domain().empty()` test holds (a Conv in "ai.onnx" is quantized like one in "").
std::string normalDomain(const std::string& domain) {
  return domain == "ai.onnx" ? "" : domain;
}

void importModelInfo(const onnx::ModelProto& model, ModelInfo& info) {
  requireUtf8(model.producer_name(), "the producer name");
  requireUtf8(model.producer_version(), "the producer version");
  for (const auto& op : model.opset_import())
    requireUtf8(op.domain(), "an opset import's domain");
  info.ir_version = model.ir_version();
  info.opset_imports.clear();
  // An import of "" wins over one of "ai.onnx", as ModelInfo::opsetFor had it.
  for (const auto& op : model.opset_import()) {
    if (!op.domain().empty()) info.opset_imports[normalDomain(op.domain())] = op.version();
  }
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty()) info.opset_imports[""] = op.version();
  }
  info.producer_name = model.producer_name();
  info.producer_version = model.producer_version();
  info.domain = model.domain();
  info.model_version = model.model_version();
  info.doc_string = model.doc_string();
  info.metadata_props = propsFrom(model.metadata_props());
  info.graph_name = model.graph().name();
  info.graph_doc_string = model.graph().doc_string();

  // Fields qforge does not model travel as an opaque ModelProto.
  onnx::ModelProto opaque;
  *opaque.mutable_functions() = model.functions();
  *opaque.mutable_training_info() = model.training_info();
  *opaque.mutable_graph()->mutable_sparse_initializer() = model.graph().sparse_initializer();
  *opaque.mutable_graph()->mutable_quantization_annotation() =
      model.graph().quantization_annotation();
  info.opaque_model_fields = opaque.ByteSizeLong() > 0 ? opaque.SerializeAsString() : "";
}

// Reads `g`'s initializers, inputs, nodes, outputs and value_info into `graph`. `outer` names the
// values a body reads from the graph around it: they become graph inputs after the formal ones.
void importGraphBody(const onnx::GraphProto& g, Graph& graph, const std::string& base_dir,
                     const std::vector<std::string>& outer) {
  requireUtf8Names(g);
  for (const auto& init : g.initializer()) {
    require(!init.name().empty(), "an initializer has no name");
    require(graph.findValue(init.name()) == nullptr,
            "initializer '" + init.name() + "' is defined more than once");
    Value* v = graph.addValue(init.name());
    v->doc_string = init.doc_string();
    v->setInitializer(tensorFromProto(init, base_dir, "initializer '" + init.name() + "'"));
  }
  for (const auto& in : g.input()) {
    Value* v = graph.findValue(in.name());
    if (v == nullptr) {
      v = graph.addValue(in.name());
    } else {
      require(!graph.isGraphInput(v), "graph input '" + in.name() + "' is listed twice");
    }
    TensorType declared = typeFromProto(in.type());
    if (!v->isInitializer()) v->type = declared;
    if (v->doc_string.empty()) v->doc_string = in.doc_string();
    graph.addInput(v);
  }
  for (const auto& name : outer)
    graph.addInput(graph.addValue(name));

  // Two passes so that a node may read a value produced later in the file: that is how a cycle
  // or an unsorted graph reaches the verifier instead of a "missing value" error.
  std::vector<Node*> nodes;
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    std::vector<std::string> outs(n.output().begin(), n.output().end());
    const std::string label = "node '" + n.name() + "' (" + n.op_type() + ")";
    for (const auto& out : outs) {
      require(graph.findValue(out) == nullptr,
              label + " defines value '" + out + "', which is already defined; value names must " +
                  "be unique");
    }
    // Empty output names mark unused optional outputs; give them private names.
    std::vector<bool> anonymous(outs.size(), false);
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!outs[k].empty()) continue;
      anonymous[k] = true;
      outs[k] = graph.uniqueName(n.name() + "_unnamed_output");
    }
    Node* node = graph.addNode(n.op_type(), {}, outs, n.name(), normalDomain(n.domain()));
    for (size_t k = 0; k < outs.size(); ++k)
      node->output(k)->anonymous = anonymous[k];
    node->doc_string = n.doc_string();
    for (const auto& attr : n.attribute()) {
      node->attributes.set(attributeFromProto(attr, base_dir, node->describe()));
    }
    const std::vector<std::string> captured = outerReads(node->attributes.all());
    if (!captured.empty()) {
      node->attributes.set(Attribute::makeStrings(kCapturedInputsAttribute, captured));
    }
    nodes.push_back(node);
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    Node* node = nodes[static_cast<size_t>(i)];
    std::vector<std::string> reads(n.input().begin(), n.input().end());
    for (const std::string& name : capturedNames(*node))
      reads.push_back(name);
    for (size_t j = 0; j < reads.size(); ++j) {
      const std::string& name = reads[j];
      Value* v = nullptr;
      if (!name.empty()) {
        v = graph.findValue(name);
        require(v != nullptr, node->describe() + " reads '" + name +
                                  "', which no node, graph input or initializer defines (a "
                                  "missing initializer?); re-export the model");
      }
      graph.setInput(node, j, v);
    }
  }

  for (const auto& out : g.output()) {
    Value* v = graph.findValue(out.name());
    require(v != nullptr, "graph output '" + out.name() + "' is not produced by any node");
    TensorType declared = typeFromProto(out.type());
    if (declared.dtype != DType::Undefined) v->type = declared;
    graph.addOutput(v);
  }
  for (const auto& info : g.value_info()) {
    Value* v = graph.findValue(info.name());
    if (v != nullptr && !v->isInitializer()) v->type = typeFromProto(info.type());
  }
}

}  // namespace

Graph importOnnxModel(onnx::ModelProto& model, const std::string& base_dir,
                      const ImportOptions& options) {
  require(model.has_graph(), "the model has no graph; it is not an ONNX model");
  require(model.ir_version() > 0, "the model has no ir_version; it is not an ONNX model");
  checkModelLimits(model.graph());  // before shape inference walks it
  if (options.infer_shapes) {
    // Shape inference is advisory: a model it cannot type is still a model we can run.
    const ShapeInferenceGuard guard(model);  // libonnx's convolution bugs (issue #22)
    try {
      if (guard.inferenceIsSafe()) onnx::shape_inference::InferShapes(model);
    } catch (const std::exception&) {
    }
  }
  Graph graph;
  importModelInfo(model, graph.model);
  importGraphBody(model.graph(), graph, base_dir, {});
  if (options.verify) verifyGraph(graph);
  return graph;
}

Subgraph importSubgraph(const onnx::GraphProto& body, const ModelInfo& outer) {
  Subgraph sub;
  sub.graph.model.opset_imports = outer.opset_imports;
  sub.graph.model.ir_version = outer.ir_version;
  sub.graph.model.graph_name = body.name();
  for (const auto& in : body.input())
    sub.formal_inputs.push_back(in.name());
  sub.captured = outerReads(body);
  importGraphBody(body, sub.graph, "", sub.captured);
  verifyGraph(sub.graph);
  return sub;
}

Graph importOnnxFile(const std::string& path, const ImportOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require(fs::exists(path, ec), "'" + path + "': no such file");
  require(!fs::is_directory(path, ec), "'" + path + "' is a directory; give the .onnx file");
  int fd = ::open(path.c_str(), O_RDONLY);
  require(fd >= 0, "cannot open '" + path + "': " + std::strerror(errno));
  onnx::ModelProto model;
  bool parsed = false;
  {
    google::protobuf::io::FileInputStream raw(fd);
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    parsed = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  ::close(fd);
  require(parsed, "'" + path +
                      "' is not a valid ONNX model: protobuf parsing failed (the file "
                      "is truncated or not ONNX); re-export or re-download it");
  try {
    return importOnnxModel(model, fs::path(path).parent_path().string(), options);
  } catch (const Error& e) {
    throw e.within("'" + path + "'");
  }
}

Graph copyGraph(const Graph& graph) {
  onnx::ModelProto proto = exportOnnxModel(graph);
  return importOnnxModel(proto, "");
}

}  // namespace qforge
