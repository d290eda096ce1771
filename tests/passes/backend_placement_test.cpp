// Placement of fake quantizers in the zoo's ResNet and MobileNetV2 for every built-in backend.
// The expected lists are written by hand from each backend's rules (backends/*.json, the "Expected
// placement" section of backends/README.md) and the models' structure (tools/zoo/zoo.py), not
// from qforge's output: a change in placement must show up here as a change of rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"
#include "passes/prepare.h"

namespace qforge::testing {
namespace {

using passes::PointKind;
using Names = std::set<std::string>;

Names operator+(Names a, const Names& b) {
  a.insert(b.begin(), b.end());
  return a;
}

Names operator-(Names a, const Names& b) {
  for (const auto& n : b)
    a.erase(n);
  return a;
}

// ------------------------------------------------------------------------------------------------
// The two models, as the exporter named their nodes and tensors. BN is folded into the Conv before
// it (the Conv's output keeps its name) except where a backend keeps BN (Academic).

// A Conv or Gemm node, and whether what it reads is >= 0 (a ReLU or ReLU6 output, or a pooled
// and flattened one), which decides OpenVINO's unsigned activation grid.
struct Layer {
  std::string node;
  bool reads_non_negative;
};

const std::string kImage = "image";
const std::string kPool = "/pool/GlobalAveragePool_output_0";
const std::string kFlat = "/Flatten_output_0";
const std::string kLogits = "logits";
const Layer kFc{"/fc/Gemm", true};  // reads Flatten(GlobalAveragePool(ReLU or ReLU6))

// ResNet: stem conv-bn-relu; layer1..3 BasicBlocks; layers 1 and 2 have a conv shortcut.
namespace resnet {

const std::string kStem = "/stem/stem.2/Relu_output_0";
std::string block(int n) {
  return "/layer" + std::to_string(n);
}
std::string innerRelu(int n) {
  return block(n) + "/Relu_output_0";
}
std::string conv2Out(int n) {
  return block(n) + "/conv2/Conv_output_0";
}
std::string shortcutOut(int n) {
  return block(n) + "/shortcut/shortcut.0/Conv_output_0";
}
std::string addOut(int n) {
  return block(n) + "/Add_output_0";
}
std::string blockOut(int n) {
  return block(n) + "/Relu_1_output_0";
}

std::vector<Layer> layers() {
  std::vector<Layer> out = {{"/stem/stem.0/Conv", false}};
  for (int n = 1; n <= 3; ++n) {
    out.push_back({block(n) + "/conv1/Conv", true});
    out.push_back({block(n) + "/conv2/Conv", true});
    if (n < 3) out.push_back({block(n) + "/shortcut/shortcut.0/Conv", true});
  }
  out.push_back(kFc);
  return out;
}

// What the Convs read: the image, the stem's and every inner and block ReLU output.
Names convInputs() {
  return {kImage, kStem, innerRelu(1), blockOut(1), innerRelu(2), blockOut(2), innerRelu(3)};
}

// Both inputs of each residual Add: layer3's shortcut is the identity (layer2's output).
Names addInputs() {
  return {conv2Out(1), shortcutOut(1), conv2Out(2), shortcutOut(2), conv2Out(3), blockOut(2)};
}

}  // namespace resnet

// MobileNetV2: stem conv-bn-relu6; inverted residuals features.3..9 (1x1 expand conv-bn-relu6,
// 3x3 depthwise conv-bn-relu6, 1x1 projection conv-bn), residual Add in 3, 5 and 7; head 1x1
// conv-bn-relu6 (features.10-12); pool, flatten, Linear.
namespace mobilenet {

const std::string kStem = "/features/features.2/Clip_output_0";
const std::string kHead = "/features/features.12/Clip_output_0";
const int kFirstBlock = 3, kLastBlock = 9;
const std::set<int> kResidual = {3, 5, 7};

std::string block(int i) {
  return "/features/features." + std::to_string(i);
}
std::string expandOut(int i) {
  return block(i) + "/block/block.2/Clip_output_0";
}
std::string depthwiseOut(int i) {
  return block(i) + "/block/block.5/Clip_output_0";
}
std::string projectOut(int i) {
  return block(i) + "/block/block.6/Conv_output_0";
}
std::string projectBnOut(int i) {
  return block(i) + "/block/block.7/BatchNormalization_output_0";
}
std::string addOut(int i) {
  return block(i) + "/Add_output_0";
}

// What block i's expand conv reads (i = 10: the head conv): the previous block's output.
std::string blockInput(int i, bool bn_folded = true) {
  if (i == kFirstBlock) return kStem;
  if (kResidual.count(i - 1)) return addOut(i - 1);
  return bn_folded ? projectOut(i - 1) : projectBnOut(i - 1);
}

std::vector<Layer> layers() {
  std::vector<Layer> out = {{"/features/features.0/Conv", false}};
  for (int i = kFirstBlock; i <= kLastBlock; ++i) {
    out.push_back({block(i) + "/block/block.0/Conv", i == kFirstBlock});  // reads the stem's ReLU6
    out.push_back({block(i) + "/block/block.3/Conv", true});
    out.push_back({block(i) + "/block/block.6/Conv", true});
  }
  out.push_back({"/features/features.10/Conv", false});
  out.push_back(kFc);
  return out;
}

// Every ReLU6 output: stem, expand and depthwise of each block, head.
Names clipOutputs() {
  Names out = {kStem, kHead};
  for (int i = kFirstBlock; i <= kLastBlock; ++i) {
    out.insert(expandOut(i));
    out.insert(depthwiseOut(i));
  }
  return out;
}

// What the expand convs of blocks 4..9 and the head conv read (block 3's is the stem's ReLU6).
Names blockInputs(bool bn_folded = true) {
  Names out;
  for (int i = kFirstBlock + 1; i <= kLastBlock + 1; ++i)
    out.insert(blockInput(i, bn_folded));
  return out;
}

Names projectOutputs(const std::set<int>& blocks) {
  Names out;
  for (int i : blocks)
    out.insert(projectOut(i));
  return out;
}

Names allProjectOutputs() {
  std::set<int> all;
  for (int i = kFirstBlock; i <= kLastBlock; ++i)
    all.insert(i);
  return projectOutputs(all);
}

Names addOutputs() {
  Names out;
  for (int i : kResidual)
    out.insert(addOut(i));
  return out;
}

// Both inputs of each residual Add: the block's input and its projection.
Names addInputs() {
  Names out;
  for (int i : kResidual) {
    out.insert(blockInput(i));
    out.insert(projectOut(i));
  }
  return out;
}

}  // namespace mobilenet

// ------------------------------------------------------------------------------------------------
// The grids, in backends/README.md's shorthand.

struct Grid {
  int bits = 8;
  bool is_unsigned = false;
  bool symmetric = true;
  bool symmetric_range = false;
  bool per_channel = false;
  bool power_of_two = false;
  bool full_range_clamp = false;
};

Grid s8(int bits = 8) {
  return {bits, false, true, false, false, false};
}
Grid s8r() {
  return {8, false, true, true, false, false};
}
// Scale amax / 127, clamp [-128, 127]: what an int8 QuantizeLinear computes.
Grid s8rc() {
  Grid g = s8r();
  g.full_range_clamp = true;
  return g;
}
Grid u8asym(int bits = 8) {
  return {bits, true, false, false, false, false};
}
Grid perChannel(Grid g) {
  g.per_channel = true;
  return g;
}
Grid pot(Grid g) {
  g.power_of_two = true;
  return g;
}
// OpenVINO's grid for a tensor >= 0: [0, 2^bits - 1], zero point 0.
Grid unsignedSymmetric(Grid g) {
  g.is_unsigned = true;
  g.symmetric_range = false;
  g.full_range_clamp = false;
  return g;
}

// Per-channel quantization of Conv weights and of Gemm weights with transB = 1 is along axis 0.
std::string describe(const Grid& g) {
  return std::to_string(g.bits) + (g.is_unsigned ? " unsigned" : " signed") +
         (g.symmetric ? " sym" : " asym") + (g.symmetric_range ? " narrow" : "") +
         (g.full_range_clamp ? " full-clamp" : "") + (g.per_channel ? " axis 0" : " per-tensor") +
         (g.power_of_two ? " pot" : "");
}

std::string describe(const quant::QScheme& s) {
  if (s.axis > 0) return "unexpected axis " + std::to_string(s.axis);
  return describe(Grid{s.bits, s.is_unsigned, s.symmetric, s.symmetric_range, s.axis == 0,
                       s.power_of_two_scale, s.full_range_clamp});
}

// ------------------------------------------------------------------------------------------------
// What one backend does to one model.

enum class Quantized { AllLayers, ConvsOnly, GemmOnly };
enum class Bias { Float, OnePerLayer };

struct Expected {
  Grid weight;
  Grid activation;
  bool unsigned_after_relu = false;  // OpenVINO
  Quantized layers = Quantized::AllLayers;
  // Outputs placement: every reader of a unit's output sees it quantized, quantized or not itself.
  bool unit_outputs = false;
  Bias bias = Bias::Float;
  bool keeps_batchnorm = false;
  Names activations;  // the float tensors that carry an activation quantizer
};

bool isLayerQuantized(const Expected& e, const Layer& layer) {
  const bool gemm = layer.node == kFc.node;
  return e.layers == Quantized::AllLayers || (e.layers == Quantized::GemmOnly) == gemm;
}

// Schemes and rules common to both models, from each backend's JSON.
Expected rulesOf(const std::string& backend) {
  Expected e;
  if (backend == "Academic") {
    e.weight = perChannel(u8asym());
    e.activation = u8asym();
    e.keeps_batchnorm = true;  // MQBench's AcademicQuantizer does not fuse: W quantized before BN
  } else if (backend == "Academic_NLP") {
    e.weight = perChannel(s8());
    e.activation = u8asym();
    e.layers = Quantized::GemmOnly;
  } else if (backend == "TensorRT" || backend == "QDQ") {
    e.weight = perChannel(s8r());
    e.activation = s8rc();
  } else if (backend == "TensorRT_NLP") {
    e.weight = perChannel(s8r());
    e.activation = s8rc();
    e.layers = Quantized::GemmOnly;
  } else if (backend == "SNPE" || backend == "QNN") {
    e.weight = u8asym();
    e.activation = u8asym();
    e.unit_outputs = true;
    e.bias = Bias::OnePerLayer;  // int32, scale s_in * s_w
  } else if (backend == "PPLW8A16") {
    e.weight = u8asym();
    e.activation = u8asym(16);
    e.unit_outputs = true;
  } else if (backend == "PPLCUDA") {
    e.weight = perChannel(u8asym());
    e.activation = u8asym();
    e.unit_outputs = true;
  } else if (backend == "NNIE") {
    e.weight = s8();  // only initialises the observers of the logarithmic grid
    e.activation = s8();
  } else if (backend == "Vitis") {
    e.weight = pot(s8());
    e.activation = pot(s8());
    e.unit_outputs = true;
    e.bias = Bias::OnePerLayer;  // own 8-bit power-of-two quantizer
  } else if (backend == "ONNX_QNN") {
    e.weight = u8asym();
    e.activation = u8asym();
    e.layers = Quantized::ConvsOnly;  // no QLinearFC: Gemm stays float
    e.unit_outputs = true;
    e.bias = Bias::OnePerLayer;
  } else if (backend == "OpenVINO") {
    e.weight = perChannel(s8(7));
    e.activation = s8();
    e.unsigned_after_relu = true;
  } else if (backend == "Tengine_u8") {
    e.weight = u8asym();
    e.activation = u8asym();
    e.unit_outputs = true;
  } else if (backend == "STPU") {
    e.weight = s8r();
    e.activation = s8rc();
    e.unit_outputs = true;
    e.bias = Bias::OnePerLayer;
  } else if (backend == "ONNXRuntime") {
    e.weight = s8r();
    e.activation = u8asym();
    e.bias = Bias::OnePerLayer;
  } else {
    ADD_FAILURE() << "no expectations written for backend " << backend;
  }
  return e;
}

// ResNet. Inputs placement puts a point before every quantized unit's activation inputs, outputs
// placement after every unit plus the network input (and output, when a unit writes it).
Expected resnetExpected(const std::string& backend) {
  using namespace resnet;
  Expected e = rulesOf(backend);
  // Units of backends that fuse Conv+BN+ReLU and Add+ReLU: what each one writes.
  const Names unit_outputs =
      Names{kStem, innerRelu(1), innerRelu(2), innerRelu(3)} +
      Names{conv2Out(1), shortcutOut(1), conv2Out(2), shortcutOut(2), conv2Out(3)} +
      Names{blockOut(1), blockOut(2), blockOut(3)} + Names{kPool, kLogits};
  if (backend == "Academic") {
    e.activations = convInputs() + Names{kFlat};  // Conv and Gemm inputs only; BN, Add float
  } else if (backend == "Academic_NLP") {
    e.activations = {kFlat};
  } else if (backend == "TensorRT") {
    // conv2+Add+ReLU is one unit: conv2's output gets no point, the shortcut (other Add input)
    // does. Of the two Convs before layer1/2's Add, conv2 comes first in the graph and fuses.
    e.activations = convInputs() + Names{shortcutOut(1), shortcutOut(2)} +
                    Names{blockOut(3), kFlat};  // GlobalAveragePool's and Gemm's inputs
  } else if (backend == "TensorRT_NLP") {
    e.activations = addInputs() + Names{kFlat};  // Add and Gemm inputs; Convs float
  } else if (backend == "NNIE" || backend == "QDQ" || backend == "ONNXRuntime" ||
             backend == "OpenVINO") {
    // No Conv+Add fusion: both Add inputs; ReLU after Add is fused (ORT) or float (others),
    // either way the block output is quantized where the next Convs read it.
    e.activations = convInputs() + addInputs() + Names{blockOut(3), kFlat};
  } else if (backend == "SNPE" || backend == "QNN" || backend == "PPLW8A16" ||
             backend == "PPLCUDA" || backend == "STPU") {
    e.activations = Names{kImage} + unit_outputs;  // Flatten shares the pool's point
  } else if (backend == "Tengine_u8" || backend == "Vitis") {
    // No Add+ReLU unit: the Add's output and the ReLU's (Tengine: as the next units' input;
    // Vitis: ReLU is a unit of its own) both carry a point.
    e.activations = Names{kImage} + unit_outputs + Names{addOut(1), addOut(2), addOut(3)};
  } else if (backend == "ONNX_QNN") {
    e.activations = Names{kImage} + unit_outputs - Names{kLogits};  // Gemm float
  }
  return e;
}

Expected mobilenetExpected(const std::string& backend) {
  using namespace mobilenet;
  Expected e = rulesOf(backend);
  // Units of backends that fuse Conv+BN+ReLU6: what each one writes.
  const Names unit_outputs = clipOutputs() + allProjectOutputs() + addOutputs() + Names{kPool};
  // Inputs placement, Conv+BN+ReLU6 fused: what every Conv, the pool and the Gemm read.
  const Names layer_inputs = Names{kImage} + clipOutputs() + blockInputs() + Names{kFlat};
  if (backend == "Academic") {
    // BN kept, so a block's projection output is its BN's; the pool is float: the head's ReLU6
    // output is read by no quantized op.
    e.activations =
        Names{kImage} + clipOutputs() - Names{kHead} + blockInputs(false) + Names{kFlat};
  } else if (backend == "Academic_NLP") {
    e.activations = {kFlat};
  } else if (backend == "TensorRT") {
    // projection+Add fused in blocks 3, 5, 7: the other Add input (the block input) is already
    // a point as the expand conv's input.
    e.activations = layer_inputs;
  } else if (backend == "TensorRT_NLP") {
    e.activations = addInputs() + Names{kFlat};
  } else if (backend == "NNIE" || backend == "QDQ" || backend == "ONNXRuntime" ||
             backend == "OpenVINO") {
    // Adds are units of their own: the projections feeding them get a point too. OpenVINO does
    // not fuse ReLU6: Conv alone, Clip float, the Clip's output quantized where Convs read it.
    e.activations = layer_inputs + projectOutputs(kResidual);
  } else if (backend == "SNPE" || backend == "QNN" || backend == "PPLW8A16" ||
             backend == "PPLCUDA" || backend == "STPU" || backend == "Tengine_u8" ||
             backend == "Vitis") {
    e.activations = Names{kImage} + unit_outputs + Names{kLogits};
  } else if (backend == "ONNX_QNN") {
    e.activations = Names{kImage} + unit_outputs;  // Gemm float: logits not quantized
  }
  return e;
}

// ------------------------------------------------------------------------------------------------
// Reading the prepared model.

std::string modelPath(const std::string& model) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + model + ".onnx";
}

size_t countNodes(const Graph& g, const std::string& op_type) {
  size_t n = 0;
  for (const Node* node : g.nodes())
    n += node->opType() == op_type ? 1 : 0;
  return n;
}

// The FakeQuantize node whose output `v` is, looking through Flatten, which shares its input's
// quantizer wherever it is listed.
const Node* fakeQuantizeBehind(const Value* v) {
  while (v != nullptr && v->producer() != nullptr) {
    const Node* p = v->producer();
    if (passes::isFakeQuantize(p)) return p;
    if (p->opType() != "Flatten") return nullptr;
    v = p->input(0);
  }
  return nullptr;
}

struct Case {
  std::string backend;
  std::string model;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << " on " << c.model;
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return info.param.backend + "_" + info.param.model;
}

std::vector<Case> allCases() {
  std::vector<Case> out;
  for (const std::string& b : backends::builtinBackendNames()) {
    for (const char* m : {"resnet", "mobilenet"})
      out.push_back({b, m});
  }
  return out;
}

class BackendPlacement : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    expected_ = c.model == "resnet" ? resnetExpected(c.backend) : mobilenetExpected(c.backend);
    layers_ = c.model == "resnet" ? resnet::layers() : mobilenet::layers();
    model_ = passes::prepare(importOnnxFile(modelPath(c.model)), backends::loadBackend(c.backend));
  }

  Grid activationGrid(bool non_negative) const {
    return expected_.unsigned_after_relu && non_negative ? unsignedSymmetric(expected_.activation)
                                                         : expected_.activation;
  }

  size_t quantizedLayers() const {
    return static_cast<size_t>(std::count_if(layers_.begin(), layers_.end(), [&](const Layer& l) {
      return isLayerQuantized(expected_, l);
    }));
  }

  Expected expected_;
  std::vector<Layer> layers_;
  std::unique_ptr<passes::PreparedModel> model_;
};

TEST_P(BackendPlacement, QuantizerCountsByKind) {
  std::map<PointKind, size_t> by_kind;
  for (const passes::QuantPoint& p : model_->points())
    ++by_kind[p.kind];
  const size_t weights = quantizedLayers();
  const size_t biases = expected_.bias == Bias::OnePerLayer ? weights : 0;
  EXPECT_EQ(by_kind[PointKind::Weight], weights);
  EXPECT_EQ(by_kind[PointKind::Activation], expected_.activations.size());
  EXPECT_EQ(by_kind[PointKind::Bias], biases);
  EXPECT_EQ(by_kind[PointKind::FixedOutput], 0u);
  // No quantizer is shared between values here (no Concat): one FakeQuantize node each.
  EXPECT_EQ(countNodes(model_->graph(), passes::kFakeQuantizeOp),
            weights + biases + expected_.activations.size());
}

TEST_P(BackendPlacement, ActivationPointsSitOnTheExpectedTensors) {
  Names actual;
  for (const passes::QuantPoint& p : model_->points()) {
    if (p.kind == PointKind::Activation) actual.insert(p.value);
  }
  EXPECT_EQ(actual - expected_.activations, Names{}) << "quantized, not expected";
  EXPECT_EQ(expected_.activations - actual, Names{}) << "expected, not quantized";
}

TEST_P(BackendPlacement, EachConvAndGemmReadsItsInputAndWeightAsTheRulesSay) {
  const Graph& g = model_->graph();
  for (const Layer& layer : layers_) {
    SCOPED_TRACE(layer.node);
    const Node* node = g.findNode(layer.node);
    ASSERT_NE(node, nullptr);
    const bool quantized = isLayerQuantized(expected_, layer);

    const Node* weight_fq =
        passes::isFakeQuantize(node->input(1)->producer()) ? node->input(1)->producer() : nullptr;
    EXPECT_EQ(weight_fq != nullptr, quantized) << "weight quantizer";
    if (weight_fq != nullptr) {
      EXPECT_EQ(describe(model_->quantizer(passes::quantizerOf(*weight_fq))->scheme()),
                describe(expected_.weight));
    }

    // Inputs placement quantizes what quantized units read; outputs placement what units write,
    // for every reader.
    const Node* input_fq = fakeQuantizeBehind(node->input(0));
    EXPECT_EQ(input_fq != nullptr, quantized || expected_.unit_outputs) << "input quantizer";
    if (input_fq != nullptr) {
      EXPECT_EQ(describe(model_->quantizer(passes::quantizerOf(*input_fq))->scheme()),
                describe(activationGrid(layer.reads_non_negative)));
    }
  }
}

TEST_P(BackendPlacement, GraphInputAndOutputFollowThePlacement) {
  const Graph& g = model_->graph();
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs().front()->name(), kLogits);  // the interface keeps its names
  EXPECT_EQ(passes::isFakeQuantize(g.outputs().front()->producer()),
            expected_.activations.count(kLogits) > 0);
  const Value* image = g.findValue(kImage);
  ASSERT_NE(image, nullptr);
  ASSERT_TRUE(g.isGraphInput(image));
  bool image_quantized = true;
  for (const Use& u : image->uses())
    image_quantized &= passes::isFakeQuantize(u.node);
  EXPECT_EQ(image_quantized, expected_.activations.count(kImage) > 0);
}

TEST_P(BackendPlacement, BiasesAndBatchNormAsTheBackendKeepsThem) {
  for (const passes::QuantPoint& p : model_->points()) {
    if (p.kind != PointKind::Bias) continue;
    const bool derived = !p.bias_input_quantizer.empty();
    EXPECT_EQ(derived, GetParam().backend != "Vitis") << p.quantizer;
    if (derived) {
      EXPECT_EQ(p.bias_bits, 32) << p.quantizer;
    } else {
      EXPECT_EQ(describe(p.spec.scheme), describe(pot(s8()))) << p.quantizer;
    }
  }
  const size_t batchnorms = countNodes(model_->graph(), "BatchNormalization");
  if (expected_.keeps_batchnorm) {
    EXPECT_EQ(batchnorms, layers_.size() - 1);  // one after every Conv
  } else {
    EXPECT_EQ(batchnorms, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(BackendPlacementZoo, BackendPlacement, ::testing::ValuesIn(allCases()),
                         caseName);

// Academic keeps the first and last weighted layers (stem Conv, classifier Gemm) at 8 bits when
// the rest is lowered: both their weights and what they read.
TEST(BackendPlacementAcademic, FirstAndLastLayersStayAtEightBits) {
  passes::PrepareOptions options;
  options.config.weight = {{"bits", 4}};
  options.config.activation = {{"bits", 4}};
  auto m = passes::prepare(importOnnxFile(modelPath("resnet")), backends::loadBackend("Academic"),
                           options);
  const Graph& g = m->graph();
  auto bits = [&](const std::string& node, size_t slot) {
    const Node* fq = fakeQuantizeBehind(g.findNode(node)->input(slot));
    return fq == nullptr ? 0 : m->quantizer(passes::quantizerOf(*fq))->scheme().bits;
  };
  EXPECT_EQ(bits("/stem/stem.0/Conv", 0), 8);
  EXPECT_EQ(bits("/stem/stem.0/Conv", 1), 8);
  EXPECT_EQ(bits("/fc/Gemm", 0), 8);
  EXPECT_EQ(bits("/fc/Gemm", 1), 8);
  for (const char* inner :
       {"/layer1/conv1/Conv", "/layer2/shortcut/shortcut.0/Conv", "/layer3/conv2/Conv"}) {
    EXPECT_EQ(bits(inner, 0), 4) << inner;
    EXPECT_EQ(bits(inner, 1), 4) << inner;
  }
}

}  // namespace
}  // namespace qforge::testing
