// RNN, GRU and LSTM: closed-form steps on one hidden unit (peepholes, clip, input_forget, GRU's
// two reset forms, every activation function), PyTorch's own at::lstm / at::gru / at::rnn_tanh on
// bigger sizes (gates reordered: ONNX has LSTM iofc and GRU zrh, PyTorch ifgo and rzn),
// sequence_lens, layout, autograd, and the errors that name the node.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "exec/executor.h"
#include "exec/op_info.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

Attribute hidden(int64_t h) {
  return Attribute::makeInt("hidden_size", h);
}
Attribute direction(const std::string& d) {
  return Attribute::makeString("direction", d);
}
Attribute activations(std::vector<std::string> names) {
  return Attribute::makeStrings("activations", std::move(names));
}

at::Tensor f64(std::vector<double> values, at::IntArrayRef shape) {
  return at::tensor(values, at::kDouble).reshape(shape);
}

// Blocks of `t` (hidden rows each, along dim 0) in the order `order` lists ONNX's block indices.
at::Tensor reorder(const at::Tensor& t, int64_t hidden_size, const std::vector<int64_t>& order) {
  const std::vector<at::Tensor> blocks = t.split(hidden_size, 0);
  std::vector<at::Tensor> out;
  for (int64_t i : order)
    out.push_back(blocks[static_cast<size_t>(i)]);
  return at::cat(out, 0);
}

// PyTorch's flat parameter list (w_ih, w_hh, b_ih, b_hh per direction) from ONNX's W, R, B.
std::vector<at::Tensor> torchParams(const at::Tensor& w, const at::Tensor& r, const at::Tensor& b,
                                    int64_t hidden_size, const std::vector<int64_t>& order) {
  const int64_t gh = w.size(1);
  std::vector<at::Tensor> params;
  for (int64_t d = 0; d < w.size(0); ++d) {
    params.push_back(reorder(w[d], hidden_size, order));
    params.push_back(reorder(r[d], hidden_size, order));
    params.push_back(reorder(b[d].narrow(0, 0, gh), hidden_size, order));
    params.push_back(reorder(b[d].narrow(0, gh, gh), hidden_size, order));
  }
  return params;
}

const std::vector<int64_t> kLstmToTorch = {0, 2, 3, 1};  // iofc -> ifco (PyTorch's i, f, g, o)
const std::vector<int64_t> kGruToTorch = {1, 0, 2};      // zrh -> rzh (PyTorch's r, z, n)

// PyTorch's output [seq, batch, directions * hidden] as ONNX's Y [seq, directions, batch, hidden].
at::Tensor onnxY(const at::Tensor& torch_out, int64_t directions) {
  const int64_t seq = torch_out.size(0), batch = torch_out.size(1);
  return torch_out.reshape({seq, batch, directions, -1}).permute({0, 2, 1, 3});
}

struct LstmCase {
  at::Tensor x, w, r, b, h0, c0;
};

LstmCase randomLstm(int64_t seq, int64_t batch, int64_t input, int64_t h, int64_t dirs) {
  at::manual_seed(7);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  return {at::randn({seq, batch, input}, opts),    at::randn({dirs, 4 * h, input}, opts) * 0.5,
          at::randn({dirs, 4 * h, h}, opts) * 0.5, at::randn({dirs, 8 * h}, opts) * 0.3,
          at::randn({dirs, batch, h}, opts),       at::randn({dirs, batch, h}, opts)};
}

TEST(RecurrentTest, RegisteredFromOpset7WithoutWeightSlots) {
  for (const char* type : {"RNN", "GRU", "LSTM"}) {
    EXPECT_EQ(OpRegistry::builtin().find("", type, 6), nullptr) << type;
    for (int64_t opset : {7, 14}) {
      const OpInfo* info = OpRegistry::builtin().find("", type, opset);
      ASSERT_NE(info, nullptr) << type << " " << opset;
      // W's channels are not Conv-like: the passes must leave the op float.
      EXPECT_TRUE(info->weight_inputs.empty());
      EXPECT_EQ(info->bias_input, -1);
    }
  }
}

TEST(RecurrentTest, RnnTwoStepsByHand) {
  // h1 = tanh(0.5 * 1 - 0.3 * 0.4 + 0.1 + 0.2), h2 = tanh(0.5 * -2 - 0.3 * h1 + 0.3).
  const double h1 = std::tanh(0.5 - 0.3 * 0.4 + 0.3);
  const double h2 = std::tanh(-1.0 - 0.3 * h1 + 0.3);
  const auto out =
      runSingleOp({"RNN",
                   14,
                   {f32({1, -2}, {2, 1, 1}), f32({0.5}, {1, 1, 1}), f32({-0.3}, {1, 1, 1}),
                    f32({0.1, 0.2}, {1, 2}), at::Tensor(), f32({0.4}, {1, 1, 1})},
                   {hidden(1)},
                   2});
  expectValuesNear(out[0], {2, 1, 1, 1}, {h1, h2});
  expectValuesNear(out[1], {1, 1, 1}, {h2});
}

TEST(RecurrentTest, GruBothResetFormsByHand) {
  const double x = 0.7, h0 = -0.6;
  const double wz = 0.3, wr = -0.8, wh = 1.1, rz = 0.5, rr = 0.9, rh = -1.3;
  const double bz = 0.1, br = -0.2, bh = 0.3, rbz = 0.05, rbr = 0.4, rbh = 0.7;
  const double z = sigmoid(wz * x + rz * h0 + bz + rbz);
  const double r = sigmoid(wr * x + rr * h0 + br + rbr);
  const double h_after = std::tanh(wh * x + rh * (r * h0) + rbh + bh);   // linear_before_reset=0
  const double h_before = std::tanh(wh * x + r * (rh * h0 + rbh) + bh);  // linear_before_reset=1
  const std::vector<at::Tensor> inputs = {f64({x}, {1, 1, 1}),
                                          f64({wz, wr, wh}, {1, 3, 1}),
                                          f64({rz, rr, rh}, {1, 3, 1}),
                                          f64({bz, br, bh, rbz, rbr, rbh}, {1, 6}),
                                          at::Tensor(),
                                          f64({h0}, {1, 1, 1})};
  for (int64_t lbr : {0, 1}) {
    const double h = lbr ? h_before : h_after;
    const auto out = runSingleOp(
        {"GRU", 7, inputs, {hidden(1), Attribute::makeInt("linear_before_reset", lbr)}, 2});
    expectValuesNear(out[1], {1, 1, 1}, {(1 - z) * h + z * h0});
  }
}

TEST(RecurrentTest, LstmPeepholesClipAndInputForgetByHand) {
  const double x = 1.5, h0 = 0.5, c0 = 2.0, clip = 1.2;
  const double wi = 0.8, wo = -0.4, wf = 0.6, wc = 1.7, ri = 0.2, ro = 0.3, rf = -0.5, rc = 0.9;
  const double bi = 0.1, bo = 0.2, bf = 0.3, bc = -0.1, pi = 0.4, po = -0.7, pf = 0.25;
  const auto cl = [&](double v) { return std::max(-clip, std::min(clip, v)); };
  const double i = sigmoid(cl(wi * x + ri * h0 + bi + pi * c0));
  const double c_in = std::tanh(cl(wc * x + rc * h0 + bc));
  const auto finish = [&](double f) {
    const double c = f * c0 + i * c_in;
    const double o = sigmoid(cl(wo * x + ro * h0 + bo + po * c));
    return std::vector<double>{o * std::tanh(cl(c)), c};
  };
  const std::vector<double> plain = finish(sigmoid(cl(wf * x + rf * h0 + bf + pf * c0)));
  const std::vector<double> coupled = finish(1 - i);
  // B holds the input biases, then zero recurrent ones.
  const std::vector<at::Tensor> inputs = {f64({x}, {1, 1, 1}),
                                          f64({wi, wo, wf, wc}, {1, 4, 1}),
                                          f64({ri, ro, rf, rc}, {1, 4, 1}),
                                          f64({bi, bo, bf, bc, 0, 0, 0, 0}, {1, 8}),
                                          at::Tensor(),
                                          f64({h0}, {1, 1, 1}),
                                          f64({c0}, {1, 1, 1}),
                                          f64({pi, po, pf}, {1, 3})};
  for (int64_t input_forget : {0, 1}) {
    const std::vector<double>& want = input_forget ? coupled : plain;
    const auto out = runSingleOp({"LSTM",
                                  14,
                                  inputs,
                                  {hidden(1), Attribute::makeFloat("clip", clip),
                                   Attribute::makeInt("input_forget", input_forget)},
                                  3});
    expectValuesNear(out[0], {1, 1, 1, 1}, {want[0]});
    expectValuesNear(out[1], {1, 1, 1}, {want[0]});
    expectValuesNear(out[2], {1, 1, 1}, {want[1]});
  }
}

// RNN with W = 1, R = 0 and no bias: one step gives f(x).
at::Tensor activationOf(const std::vector<std::string>& names, std::vector<Attribute> extra,
                        const at::Tensor& x, int64_t dirs = 1) {
  extra.push_back(hidden(1));
  extra.push_back(activations(names));
  if (dirs == 2) extra.push_back(direction("bidirectional"));
  const int64_t b = x.numel();
  return run1({"RNN",
               14,
               {x.reshape({1, b, 1}), at::ones({dirs, 1, 1}, x.options()),
                at::zeros({dirs, 1, 1}, x.options())},
               extra});
}

TEST(RecurrentTest, EveryActivationFunctionWithDefaultAndGivenAlphaBeta) {
  const std::vector<double> xs = {-2, -0.5, 0, 0.7, 1, 3};
  const at::Tensor x = at::tensor(xs, at::kDouble);
  const auto check = [&](const std::string& name, std::vector<Attribute> attrs, auto fn) {
    std::vector<double> want;
    for (double v : xs)
      want.push_back(fn(v));
    expectValuesNear(activationOf({name}, attrs, x), {1, 1, 6, 1}, want, 1e-9);
  };
  const auto alpha = [](double a) { return Attribute::makeFloats("activation_alpha", {a}); };
  const auto beta = [](double b) { return Attribute::makeFloats("activation_beta", {b}); };
  check("Relu", {}, [](double v) { return std::max(v, 0.0); });
  check("Tanh", {}, [](double v) { return std::tanh(v); });
  check("Sigmoid", {}, [](double v) { return sigmoid(v); });
  check("Affine", {alpha(2), beta(-1)}, [](double v) { return 2 * v - 1; });
  check("Affine", {}, [](double v) { return v; });
  check("LeakyRelu", {}, [](double v) { return v >= 0 ? v : 0.01 * v; });
  check("LeakyRelu", {alpha(0.2)}, [](double v) { return v >= 0 ? v : 0.2 * v; });
  check("ThresholdedRelu", {}, [](double v) { return v >= 1 ? v : 0; });
  check("ThresholdedRelu", {alpha(0.5)}, [](double v) { return v >= 0.5 ? v : 0; });
  check("ScaledTanh", {alpha(2), beta(0.5)}, [](double v) { return 2 * std::tanh(0.5 * v); });
  check("HardSigmoid", {}, [](double v) { return std::max(0.0, std::min(1.0, 0.2 * v + 0.5)); });
  check("HardSigmoid", {alpha(0.4), beta(0.1)},
        [](double v) { return std::max(0.0, std::min(1.0, 0.4 * v + 0.1)); });
  check("Elu", {}, [](double v) { return v >= 0 ? v : std::exp(v) - 1; });
  check("Elu", {alpha(0.5)}, [](double v) { return v >= 0 ? v : 0.5 * (std::exp(v) - 1); });
  check("Softsign", {}, [](double v) { return v / (1 + std::abs(v)); });
  check("softplus", {}, [](double v) { return std::log1p(std::exp(v)); });  // any case
}

TEST(RecurrentTest, AlphaAndBetaAreConsumedByTheFunctionsThatTakeThem) {
  // Direction 0's ScaledTanh takes alpha 2 and beta 0.5; direction 1's LeakyRelu the next alpha.
  const at::Tensor x = at::tensor({-1.0, 2.0}, at::kDouble);
  const at::Tensor y = activationOf({"ScaledTanh", "LeakyRelu"},
                                    {Attribute::makeFloats("activation_alpha", {2, 0.3}),
                                     Attribute::makeFloats("activation_beta", {0.5})},
                                    x, 2);
  expectValuesNear(y, {1, 2, 2, 1}, {2 * std::tanh(-0.5), 2 * std::tanh(1.0), -0.3, 2.0}, 1e-9);
}

TEST(RecurrentTest, BidirectionalLstmMatchesPyTorch) {
  const int64_t H = 3;
  const LstmCase c = randomLstm(5, 2, 4, H, 2);
  const auto out = runSingleOp({"LSTM",
                                14,
                                {c.x, c.w, c.r, c.b, at::Tensor(), c.h0, c.c0},
                                {hidden(H), direction("bidirectional")},
                                3});
  const auto [y, h_n, c_n] =
      at::lstm(c.x, {c.h0, c.c0}, torchParams(c.w, c.r, c.b, H, kLstmToTorch), true, 1, 0.0, false,
               true, false);
  expectTensorNear(out[0], onnxY(y, 2), 1e-9, 1e-9);
  expectTensorNear(out[1], h_n, 1e-9, 1e-9);
  expectTensorNear(out[2], c_n, 1e-9, 1e-9);
}

TEST(RecurrentTest, GruWithLinearBeforeResetMatchesPyTorch) {
  // PyTorch's GRU applies the reset gate after the recurrent product, ONNX's linear_before_reset.
  at::manual_seed(3);
  const int64_t H = 4;
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x = at::randn({6, 3, 2}, opts), w = at::randn({2, 3 * H, 2}, opts) * 0.5;
  const at::Tensor r = at::randn({2, 3 * H, H}, opts) * 0.5, b = at::randn({2, 6 * H}, opts) * 0.3;
  const at::Tensor h0 = at::randn({2, 3, H}, opts);
  const auto out = runSingleOp(
      {"GRU",
       14,
       {x, w, r, b, at::Tensor(), h0},
       {hidden(H), direction("bidirectional"), Attribute::makeInt("linear_before_reset", 1)},
       2});
  const auto [y, h_n] =
      at::gru(x, h0, torchParams(w, r, b, H, kGruToTorch), true, 1, 0.0, false, true, false);
  expectTensorNear(out[0], onnxY(y, 2), 1e-9, 1e-9);
  expectTensorNear(out[1], h_n, 1e-9, 1e-9);
}

TEST(RecurrentTest, ReverseRnnIsPyTorchsRnnOverTheFlippedSequence) {
  at::manual_seed(5);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x = at::randn({4, 2, 3}, opts), w = at::randn({1, 5, 3}, opts) * 0.5;
  const at::Tensor r = at::randn({1, 5, 5}, opts) * 0.5, b = at::randn({1, 10}, opts) * 0.3;
  const auto out = runSingleOp(
      {"RNN", 7, {x, w, r, b}, {hidden(5), direction("reverse"), activations({"Tanh"})}, 2});
  const auto [y, h_n] =
      at::rnn_tanh(x.flip(0), at::zeros({1, 2, 5}, opts), torchParams(w, r, b, 5, {0}), true, 1,
                   0.0, false, false, false);
  expectTensorNear(out[0], onnxY(y.flip(0), 1), 1e-9, 1e-9);
  expectTensorNear(out[1], h_n, 1e-9, 1e-9);
}

TEST(RecurrentTest, SequenceLensZeroTheTailAndKeepTheLastValidState) {
  const int64_t H = 2;
  const LstmCase c = randomLstm(4, 3, 3, H, 2);
  const std::vector<int64_t> lengths = {4, 2, 0};
  const auto out = runSingleOp({"LSTM",
                                14,
                                {c.x, c.w, c.r, c.b, at::tensor({4, 2, 0}, at::kInt), c.h0, c.c0},
                                {hidden(H), direction("bidirectional")},
                                3});
  const std::vector<at::Tensor> params = torchParams(c.w, c.r, c.b, H, kLstmToTorch);
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t len = lengths[static_cast<size_t>(i)];
    at::Tensor want_y = at::zeros({4, 2, 1, H}, c.x.options());
    at::Tensor want_h = at::zeros({2, 1, H}, c.x.options()), want_c = want_h.clone();
    if (len > 0) {
      const auto [y, h_n, c_n] = at::lstm(c.x.narrow(0, 0, len).narrow(1, i, 1),
                                          {c.h0.narrow(1, i, 1), c.c0.narrow(1, i, 1)}, params,
                                          true, 1, 0.0, false, true, false);
      want_y.narrow(0, 0, len).copy_(onnxY(y, 2));
      want_h = h_n;
      want_c = c_n;
    }
    expectTensorNear(out[0].narrow(2, i, 1), want_y, 1e-9, 1e-9);
    expectTensorNear(out[1].narrow(1, i, 1), want_h, 1e-9, 1e-9);
    expectTensorNear(out[2].narrow(1, i, 1), want_c, 1e-9, 1e-9);
  }
}

TEST(RecurrentTest, BatchFirstLayoutIsTheTransposedTimeMajorRun) {
  const int64_t H = 3;
  const LstmCase c = randomLstm(3, 2, 2, H, 2);
  const at::Tensor lens = at::tensor({3, 1}, at::kInt);
  const std::vector<Attribute> attrs = {hidden(H), direction("bidirectional")};
  const auto time_major =
      runSingleOp({"LSTM", 14, {c.x, c.w, c.r, c.b, lens, c.h0, c.c0}, attrs, 3});
  std::vector<Attribute> batch_attrs = attrs;
  batch_attrs.push_back(Attribute::makeInt("layout", 1));
  const auto batch_first =
      runSingleOp({"LSTM",
                   14,
                   {c.x.transpose(0, 1).contiguous(), c.w, c.r, c.b, lens,
                    c.h0.transpose(0, 1).contiguous(), c.c0.transpose(0, 1).contiguous()},
                   batch_attrs,
                   3});
  expectTensorNear(batch_first[0], time_major[0].permute({2, 0, 1, 3}));
  expectTensorNear(batch_first[1], time_major[1].transpose(0, 1));
  expectTensorNear(batch_first[2], time_major[2].transpose(0, 1));
}

TEST(RecurrentTest, Float16RunsInFloat32AndRoundsBack) {
  const LstmCase c = randomLstm(3, 2, 2, 2, 1);
  const auto half = [](const at::Tensor& t) { return t.to(at::kHalf); };
  const at::Tensor want = run1({"LSTM", 14, {c.x, c.w, c.r}, {hidden(2)}});
  const at::Tensor got = run1({"LSTM", 14, {half(c.x), half(c.w), half(c.r)}, {hidden(2)}});
  ASSERT_EQ(got.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::allclose(got.to(at::kDouble), want, 1e-2, 1e-2));
}

TEST(RecurrentTest, GradientsMatchPyTorchsLstm) {
  const int64_t H = 2;
  const LstmCase c = randomLstm(3, 2, 3, H, 1);
  Graph graph = buildSingleOpGraph({"LSTM", 14, {c.x, c.w, c.r, c.b}, {hidden(H)}});
  Executor executor(graph, ExecutorOptions{true});
  const at::Tensor w = c.w.clone().requires_grad_(), r = c.r.clone().requires_grad_();
  executor({c.x, w, r, c.b}).at(0).sum().backward();
  const at::Tensor w2 = c.w.clone().requires_grad_(), r2 = c.r.clone().requires_grad_();
  const auto zeros = at::zeros({1, 2, H}, c.x.options());
  std::get<0>(at::lstm(c.x, {zeros, zeros}, torchParams(w2, r2, c.b, H, kLstmToTorch), true, 1, 0.0,
                       false, false, false))
      .sum()
      .backward();
  expectTensorNear(w.grad(), w2.grad(), 1e-9, 1e-9);
  expectTensorNear(r.grad(), r2.grad(), 1e-9, 1e-9);
}

TEST(RecurrentTest, BadAttributesAndShapesNameTheNode) {
  const at::Tensor x = at::zeros({2, 1, 3}), w = at::zeros({1, 4, 3}), r = at::zeros({1, 4, 1});
  expectNodeError({"LSTM", 14, {x, w, r}, {hidden(1), direction("sideways")}},
                  "unknown direction 'sideways' (expected forward, reverse or bidirectional)");
  expectNodeError({"LSTM", 14, {x, at::zeros({1, 3, 3}), r}, {hidden(1)}},
                  "W must have shape [1, 4, 3] ([num_directions, 4*hidden_size, input_size]), got "
                  "[1, 3, 3]");
  expectNodeError({"LSTM", 14, {x, w, r}, {hidden(1), direction("bidirectional")}},
                  "W must have shape [2, 4, 3]");
  expectNodeError({"GRU", 14, {x, at::zeros({1, 3, 3}), at::zeros({1, 3, 2})}, {hidden(1)}},
                  "R must have shape [1, 3, 1]");
  expectNodeError({"RNN", 14, {x, at::zeros({1, 1, 3}), at::zeros({1, 1, 1}), at::zeros({1, 3})}},
                  "B must have shape [1, 2]");
  expectNodeError({"LSTM", 14, {x, w, r}, {hidden(1), activations({"Swish", "Tanh", "Tanh"})}},
                  "unknown activation 'Swish'");
  expectNodeError({"LSTM", 14, {x, w, r}, {hidden(1), activations({"Sigmoid", "Tanh"})}},
                  "activations has 2 entries, expected 3 (3 per direction)");
  expectNodeError({"LSTM", 14, {x, w, r, at::Tensor(), at::tensor({3}, at::kInt)}, {hidden(1)}},
                  "sequence_lens values must lie in [0, 2]");
  expectNodeError({"LSTM", 7, {x, w, r}, {hidden(1), Attribute::makeInt("layout", 1)}},
                  "layout=1 needs opset 14 or later");
  expectNodeError({"GRU", 14, {x, at::zeros({1, 3, 3}), at::zeros({1, 3, 1})}, {hidden(1)}, 3},
                  "has 3 outputs, at most 2 allowed");
  expectNodeError({"RNN", 14, {at::zeros({2, 3}), at::zeros({1, 1, 3}), at::zeros({1, 1, 1})}},
                  "X must have rank 3");
}

}  // namespace
}  // namespace qforge
