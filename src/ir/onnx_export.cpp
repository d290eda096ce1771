#include "ir/onnx_export.h"

#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/files.h"
#include "ir/captured_values.h"
#include "ir/onnx_tensor.h"

namespace qforge {

namespace {

void typeToProto(const TensorType& type, onnx::TypeProto* proto) {
  auto* tensor = proto->mutable_tensor_type();
  tensor->set_elem_type(static_cast<int32_t>(type.dtype));
  if (!type.shape) return;
  auto* shape = tensor->mutable_shape();
  for (const Dim& d : *type.shape) {
    auto* dim = shape->add_dim();
    if (d.isKnown()) {
      dim->set_dim_value(d.value);
    } else if (!d.param.empty()) {
      dim->set_dim_param(d.param);
    }
  }
}

void valueInfoToProto(const Value& v, onnx::ValueInfoProto* proto) {
  proto->set_name(v.name());
  if (!v.doc_string.empty()) proto->set_doc_string(v.doc_string);
  if (v.type.dtype != DType::Undefined) typeToProto(v.type, proto->mutable_type());
}

void attributeToProto(const Attribute& a, onnx::AttributeProto* proto) {
  if (a.kind == AttributeKind::Opaque) {
    proto->ParseFromString(a.opaque_proto);
    return;
  }
  proto->set_name(a.name);
  if (!a.doc_string.empty()) proto->set_doc_string(a.doc_string);
  if (!a.ref_attr_name.empty()) proto->set_ref_attr_name(a.ref_attr_name);
  switch (a.kind) {
    case AttributeKind::Float:
      proto->set_type(onnx::AttributeProto::FLOAT);
      proto->set_f(static_cast<float>(a.f));
      break;
    case AttributeKind::Int:
      proto->set_type(onnx::AttributeProto::INT);
      proto->set_i(a.i);
      break;
    case AttributeKind::String:
      proto->set_type(onnx::AttributeProto::STRING);
      proto->set_s(a.s);
      break;
    case AttributeKind::Tensor:
      proto->set_type(onnx::AttributeProto::TENSOR);
      tensorToProto(a.t, proto->mutable_t());
      break;
    case AttributeKind::Floats:
      proto->set_type(onnx::AttributeProto::FLOATS);
      for (double f : a.floats)
        proto->add_floats(static_cast<float>(f));
      break;
    case AttributeKind::Ints:
      proto->set_type(onnx::AttributeProto::INTS);
      for (int64_t i : a.ints)
        proto->add_ints(i);
      break;
    case AttributeKind::Strings:
      proto->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& s : a.strings)
        proto->add_strings(s);
      break;
    case AttributeKind::Tensors:
      proto->set_type(onnx::AttributeProto::TENSORS);
      for (const auto& t : a.tensors)
        tensorToProto(t, proto->add_tensors());
      break;
    case AttributeKind::Opaque:
      break;
  }
}

void propsToProto(const std::vector<std::pair<std::string, std::string>>& props,
                  google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto>* out) {
  for (const auto& [key, value] : props) {
    auto* entry = out->Add();
    entry->set_key(key);
    entry->set_value(value);
  }
}

// The outer values a node's bodies read whose names changed since import (a pass rewired the
// node's extra input): body name -> the name of the value the node now reads.
std::map<std::string, std::string> capturedRenames(const Node& node) {
  std::map<std::string, std::string> renames;
  const std::vector<std::string> captured = capturedNames(node);
  const size_t first = onnxInputCount(node);
  for (size_t k = 0; k < captured.size(); ++k) {
    const Value* v = node.input(first + k);
    if (v != nullptr && v->name() != captured[k]) renames[captured[k]] = v->name();
  }
  return renames;
}

void renameBodies(onnx::AttributeProto& proto, const std::map<std::string, std::string>& renames) {
  if (proto.has_g()) renameOuterReads(*proto.mutable_g(), renames);
  for (auto& g : *proto.mutable_graphs())
    renameOuterReads(g, renames);
}

int64_t totalInitializerBytes(const Graph& graph) {
  int64_t total = 0;
  for (const Value* v : graph.initializers())
    total += static_cast<int64_t>(v->initializer().nbytes());
  return total;
}

// Moves large initializers' bytes out of `model` into one data blob, recording location/offset.
std::string moveToExternalData(onnx::ModelProto& model, const std::string& location,
                               int64_t min_bytes) {
  std::string blob;
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    if (static_cast<int64_t>(init.raw_data().size()) < min_bytes) continue;
    // Align each tensor to 4 KiB so the runtime can map it directly.
    blob.resize((blob.size() + 4095) / 4096 * 4096, '\0');
    const size_t offset = blob.size();
    blob += init.raw_data();
    init.clear_raw_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const std::string& key, const std::string& value) {
      auto* e = init.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(blob.size() - offset));
  }
  return blob;
}

}  // namespace

onnx::ModelProto exportOnnxModel(const Graph& graph) {
  onnx::ModelProto model;
  const ModelInfo& info = graph.model;
  if (!info.opaque_model_fields.empty()) model.ParseFromString(info.opaque_model_fields);
  model.set_ir_version(info.ir_version);
  for (const auto& [domain, version] : info.opset_imports) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  if (!info.producer_name.empty()) model.set_producer_name(info.producer_name);
  if (!info.producer_version.empty()) model.set_producer_version(info.producer_version);
  if (!info.domain.empty()) model.set_domain(info.domain);
  if (info.model_version != 0) model.set_model_version(info.model_version);
  if (!info.doc_string.empty()) model.set_doc_string(info.doc_string);
  propsToProto(info.metadata_props, model.mutable_metadata_props());

  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(info.graph_name);
  if (!info.graph_doc_string.empty()) g->set_doc_string(info.graph_doc_string);

  for (const Value* v : graph.initializers()) {
    auto* t = g->add_initializer();
    tensorToProto(v->initializer(), t);
    t->set_name(v->name());
    if (!v->doc_string.empty()) t->set_doc_string(v->doc_string);
  }
  for (const Value* v : graph.inputs())
    valueInfoToProto(*v, g->add_input());
  for (const Node* n : graph.topologicalOrder()) {
    auto* node = g->add_node();
    node->set_op_type(n->opType());
    if (!n->domain().empty()) node->set_domain(n->domain());
    if (!n->name().empty()) node->set_name(n->name());
    if (!n->doc_string.empty()) node->set_doc_string(n->doc_string);
    const size_t onnx_inputs = onnxInputCount(*n);
    for (size_t i = 0; i < onnx_inputs; ++i)
      node->add_input(n->input(i) ? n->input(i)->name() : "");
    for (const Value* out : n->outputs()) {
      // Unused optional outputs were given private names on import; ONNX writes them as "".
      const bool unnamed = out->anonymous && out->uses().empty() && !graph.isGraphOutput(out);
      node->add_output(unnamed ? "" : out->name());
    }
    const std::map<std::string, std::string> renames = capturedRenames(*n);
    for (const Attribute& a : n->attributes.all()) {
      if (a.name == kCapturedInputsAttribute) continue;
      auto* proto = node->add_attribute();
      attributeToProto(a, proto);
      if (!renames.empty()) renameBodies(*proto, renames);
    }
    for (const Value* out : n->outputs()) {
      const bool written_unnamed = out->anonymous && out->uses().empty();
      if (!graph.isGraphOutput(out) && !written_unnamed && out->type.dtype != DType::Undefined) {
        valueInfoToProto(*out, g->add_value_info());
      }
    }
  }
  for (const Value* v : graph.outputs())
    valueInfoToProto(*v, g->add_output());
  return model;
}

bool exportOnnxFile(const Graph& graph, const std::string& path, const ExportOptions& options) {
  onnx::ModelProto model = exportOnnxModel(graph);
  const bool external =
      options.force_external_data || totalInitializerBytes(graph) > options.external_data_threshold;
  if (external) {
    const std::string location = std::filesystem::path(path).filename().string() + ".data";
    const std::string blob = moveToExternalData(model, location, options.external_min_tensor_bytes);
    const std::string data_path = (std::filesystem::path(path).parent_path() / location).string();
    writeFileAtomically(data_path, blob);
  }
  std::string bytes;
  require(model.SerializeToString(&bytes), "cannot serialize the model for '" + path +
                                               "': it is larger than protobuf's 2 GiB "
                                               "limit; lower the external-data threshold");
  writeFileAtomically(path, bytes);
  return external;
}

}  // namespace qforge
