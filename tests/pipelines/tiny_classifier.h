// A linear classifier and labelled data for the pipeline tests, with the closed forms they are
// checked against: x[N,4] -> Gemm(W[3,4], b, transB) -> y[N,3].
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>
#include <string>

#include "ir/graph.h"
#include "support/quant_graphs.h"
#include "support/tensor_dataset.h"

namespace qforge::testing {

inline at::Tensor classifierWeight() {
  return at::tensor(
             {1.0f, -0.5f, 0.25f, 0.0f, -1.0f, 0.75f, 0.5f, -0.25f, 0.5f, 0.5f, -1.0f, 0.125f})
      .view({3, 4});
}
inline at::Tensor classifierBias() {
  return at::tensor({0.1f, -0.2f, 0.05f});
}

inline Graph linearClassifier() {
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(4)}};
  g.addInput(x);
  Node* gemm = g.addNode(
      "Gemm",
      {x, g.addInitializer("w", classifierWeight()), g.addInitializer("b", classifierBias())},
      {"y"}, "fc");
  gemm->attributes.set(Attribute::makeInt("transB", 1));
  gemm->output(0)->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3)}};
  g.addOutput(gemm->output(0));
  return g;
}

// `n` samples whose labels mostly, not always, agree with the classifier.
inline at::Tensor classifierInputs(int64_t n, int64_t seed) {
  at::manual_seed(seed);
  return at::randn({n, 4}) * 1.5;
}
inline at::Tensor classifierLabels(const at::Tensor& x, int64_t seed) {
  at::manual_seed(seed + 1);
  return (at::addmm(classifierBias(), x, classifierWeight().t()) + at::randn({x.size(0), 3}))
      .argmax(1);
}
inline std::shared_ptr<TensorDataset> classifierData(int64_t n, int64_t seed,
                                                     const std::string& name) {
  const at::Tensor x = classifierInputs(n, seed);
  return std::make_shared<TensorDataset>(x, classifierLabels(x, seed), name);
}

// Correct top-1 predictions of logits against labels.
inline int64_t correct(const at::Tensor& logits, const at::Tensor& labels) {
  return (logits.argmax(1) == labels).sum().item<int64_t>();
}

// tinyBackendDocument(patch) written to `path`, for options that take a backend file.
inline std::string writeBackend(const std::string& path,
                                const nlohmann::json& patch = nlohmann::json::object()) {
  std::ofstream(path) << tinyBackendDocument(patch).dump(2);
  return path;
}

}  // namespace qforge::testing
