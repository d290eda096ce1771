// The recurrent ops RNN, GRU and LSTM (opsets 7 and 14: layout from 14), as ONNX's operator pages
// define them: gate order iofc (LSTM) and zrh (GRU), B = [Wb, Rb], optional sequence_lens,
// initial states and peepholes, the listed activation functions with clip on their inputs. The
// time loop is ATen ops (matmul, sigmoid, where...), so autograd runs through it.
//
// No weight or bias slots in the table: W is [num_directions, gates * hidden, input] with its
// output channels on axis 1, split by gate and direction, R multiplies the hidden state rather
// than input 0, and B adds the input and recurrent biases. No WeightLayout says that, and a
// Conv-like reading (per-channel axis 0 = directions, an int32 bias at input scale * weight scale)
// would be wrong, so the passes leave these ops float, which no backend gives a role anyway.
#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::op;
using ops::shapeString;

enum class Cell { Rnn, Gru, Lstm };

int64_t gateCount(Cell cell) {
  return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
}

// Activation functions per direction: f (RNN); f, g (GRU); f, g, h (LSTM).
int64_t activationCount(Cell cell) {
  return cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 2 : 3;
}

struct Activation {
  std::string name;  // lower case
  double alpha = 0;
  double beta = 0;
};

// Which of alpha and beta a function reads, and their defaults: those of the ONNX operator of the
// same name (ThresholdedRelu, LeakyRelu, HardSigmoid, Elu; Affine and ScaledTanh as the former
// experimental ops), as the operator pages say.
struct ActivationDef {
  const char* name;
  bool uses_alpha, uses_beta;
  double alpha, beta;
};

constexpr ActivationDef kActivations[] = {
    {"relu", false, false, 0, 0},         {"tanh", false, false, 0, 0},
    {"sigmoid", false, false, 0, 0},      {"affine", true, true, 1.0, 0.0},
    {"leakyrelu", true, false, 0.01, 0},  {"thresholdedrelu", true, false, 1.0, 0},
    {"scaledtanh", true, true, 1.0, 1.0}, {"hardsigmoid", true, true, 0.2, 0.5},
    {"elu", true, false, 1.0, 0},         {"softsign", false, false, 0, 0},
    {"softplus", false, false, 0, 0},
};

at::Tensor applyActivation(const Activation& a, const at::Tensor& x) {
  const std::string& n = a.name;
  if (n == "relu") return at::relu(x);
  if (n == "tanh") return at::tanh(x);
  if (n == "sigmoid") return at::sigmoid(x);
  if (n == "affine") return x * a.alpha + a.beta;
  if (n == "leakyrelu") return at::where(x >= 0, x, x * a.alpha);
  // The RNN pages write x >= alpha (the ThresholdedRelu op itself uses >).
  if (n == "thresholdedrelu") return at::where(x >= a.alpha, x, at::zeros_like(x));
  if (n == "scaledtanh") return at::tanh(x * a.beta) * a.alpha;
  if (n == "hardsigmoid") return at::clamp(x * a.alpha + a.beta, 0, 1);
  if (n == "elu") return at::where(x >= 0, x, at::expm1(x) * a.alpha);
  if (n == "softsign") return x / (at::abs(x) + 1);
  return at::softplus(x);  // log(1 + e^x); parseActivations admits nothing else
}

// The attribute `activations` resolved: alpha and beta values are consumed in list order by the
// functions that take them (as ONNX Runtime reads "consumed in the order of activation
// functions"); a function finding none left takes its default.
std::vector<Activation> parseActivations(const OpContext& ctx,
                                         const std::vector<std::string>& names) {
  const std::vector<double> alphas = ctx.attrFloats("activation_alpha", {});
  const std::vector<double> betas = ctx.attrFloats("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> out;
  for (const std::string& given : names) {
    Activation a;
    a.name = given;
    std::transform(a.name.begin(), a.name.end(), a.name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const ActivationDef* def = nullptr;
    for (const ActivationDef& d : kActivations) {
      if (a.name == d.name) def = &d;
    }
    if (def == nullptr) {
      ctx.fail("unknown activation '" + given + "' (expected Relu, Tanh, Sigmoid, Affine, " +
               "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign or Softplus)");
    }
    a.alpha = def->alpha;
    a.beta = def->beta;
    if (def->uses_alpha && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (def->uses_beta && next_beta < betas.size()) a.beta = betas[next_beta++];
    out.push_back(a);
  }
  return out;
}

struct Settings {
  Cell cell = Cell::Rnn;
  int64_t directions = 1;
  bool reverse = false;  // direction "reverse" (bidirectional runs direction 1 reversed)
  bool batch_first = false;
  int64_t hidden = 0;
  std::optional<double> clip;
  bool input_forget = false;
  bool linear_before_reset = false;
  std::vector<Activation> activations;  // activationCount(cell) per direction
};

std::vector<Activation> directionActivations(const OpContext& ctx, const Settings& s) {
  const size_t per = static_cast<size_t>(activationCount(s.cell));
  std::vector<std::string> names = s.cell == Cell::Rnn ? std::vector<std::string>{"Tanh"}
                                   : s.cell == Cell::Gru
                                       ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                       : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (s.directions == 2) {
    const std::vector<std::string> one = names;  // inserting a vector into itself is undefined
    names.insert(names.end(), one.begin(), one.end());
  }
  if (const Attribute* given = ctx.node().attributes.find("activations")) {
    if (given->kind != AttributeKind::Strings) ctx.fail("attribute 'activations' must be strings");
    names = given->strings;
  }
  std::vector<Activation> acts = parseActivations(ctx, names);
  const size_t want = per * static_cast<size_t>(s.directions);
  // RNN-7's schema default is {Tanh, Tanh} whatever the direction: a forward RNN may list two.
  if (s.directions == 1 && s.cell == Cell::Rnn && acts.size() == 2) acts.resize(1);
  // One list for both directions of a bidirectional op serves each.
  if (s.directions == 2 && acts.size() == per) {
    const std::vector<Activation> one = acts;
    acts.insert(acts.end(), one.begin(), one.end());
  }
  if (acts.size() != want) {
    ctx.fail("activations has " + std::to_string(acts.size()) + " entries, expected " +
             std::to_string(want) + " (" + std::to_string(per) + " per direction)");
  }
  return acts;
}

Settings readSettings(const OpContext& ctx, Cell cell, int64_t hidden_from_r) {
  Settings s;
  s.cell = cell;
  const std::string direction = ctx.attrString("direction", "forward");
  if (direction == "bidirectional") {
    s.directions = 2;
  } else if (direction == "reverse") {
    s.reverse = true;
  } else if (direction != "forward") {
    ctx.fail("unknown direction '" + direction + "' (expected forward, reverse or bidirectional)");
  }
  const int64_t layout = ctx.attrInt("layout", 0);
  if (layout != 0 && layout != 1) ctx.fail("layout must be 0 or 1, got " + std::to_string(layout));
  if (layout == 1 && ctx.opset() < 14) ctx.fail("layout=1 needs opset 14 or later");
  s.batch_first = layout == 1;
  s.hidden = ctx.attrInt("hidden_size", hidden_from_r);
  if (s.hidden <= 0) ctx.fail("hidden_size must be positive, got " + std::to_string(s.hidden));
  if (ctx.hasAttr("clip")) {
    s.clip = ctx.attrFloat("clip", 0);
    if (*s.clip <= 0) ctx.fail("clip must be positive, got " + std::to_string(*s.clip));
  }
  s.input_forget = cell == Cell::Lstm && ctx.attrInt("input_forget", 0) != 0;
  s.linear_before_reset = cell == Cell::Gru && ctx.attrInt("linear_before_reset", 0) != 0;
  s.activations = directionActivations(ctx, s);
  return s;
}

// The inputs of one direction, in the time-major layout and the compute dtype.
struct DirectionInputs {
  at::Tensor w, r;    // [gates * hidden, input], [gates * hidden, hidden]
  at::Tensor wb, rb;  // [gates * hidden] each (zeros when B is omitted)
  at::Tensor p;       // LSTM peepholes [3 * hidden] (i, o, f) or undefined
  at::Tensor h0, c0;  // [batch, hidden]
  const Activation* acts = nullptr;
};

struct State {
  at::Tensor h, c;
};

// Clips (when clip is set) the input of an activation and applies it.
at::Tensor activate(const Settings& s, const Activation& a, at::Tensor x) {
  if (s.clip) x = at::clamp(x, -*s.clip, *s.clip);
  return applyActivation(a, x);
}

// One step; `xw` is Xt * W^T + Wb for this step, [batch, gates * hidden].
State step(const Settings& s, const DirectionInputs& d, const at::Tensor& xw, const State& prev) {
  const int64_t H = s.hidden;
  const Activation* a = d.acts;
  if (s.cell == Cell::Rnn) {
    return {activate(s, a[0], xw + at::matmul(prev.h, d.r.t()) + d.rb), {}};
  }
  if (s.cell == Cell::Gru) {
    const std::vector<at::Tensor> x = xw.split(H, 1);  // z, r, h
    const std::vector<at::Tensor> r = d.r.split(H, 0);
    const std::vector<at::Tensor> rb = d.rb.split(H, 0);
    const at::Tensor z = activate(s, a[0], x[0] + at::matmul(prev.h, r[0].t()) + rb[0]);
    const at::Tensor reset = activate(s, a[0], x[1] + at::matmul(prev.h, r[1].t()) + rb[1]);
    const at::Tensor recurrent = s.linear_before_reset
                                     ? reset * (at::matmul(prev.h, r[2].t()) + rb[2])
                                     : at::matmul(reset * prev.h, r[2].t()) + rb[2];
    const at::Tensor h = activate(s, a[1], x[2] + recurrent);
    return {(1 - z) * h + z * prev.h, {}};
  }
  const std::vector<at::Tensor> g = (xw + at::matmul(prev.h, d.r.t()) + d.rb).split(H, 1);
  std::vector<at::Tensor> p;  // i, o, f
  if (d.p.defined()) p = d.p.split(H, 0);
  const at::Tensor i = activate(s, a[0], d.p.defined() ? g[0] + p[0] * prev.c : g[0]);
  const at::Tensor f =
      s.input_forget ? 1 - i : activate(s, a[0], d.p.defined() ? g[2] + p[2] * prev.c : g[2]);
  const at::Tensor c = f * prev.c + i * activate(s, a[1], g[3]);
  const at::Tensor o = activate(s, a[0], d.p.defined() ? g[1] + p[1] * c : g[1]);
  return {o * activate(s, a[2], c), c};
}

// Runs one direction over x [seq, batch, input]: Y [seq, batch, hidden] and the final state. A
// batch entry past its length keeps its state and writes zeros; one of length 0 ends with zero
// states, as ONNX Runtime's.
std::pair<at::Tensor, State> runDirection(const Settings& s, const DirectionInputs& d,
                                          const at::Tensor& x, const at::Tensor& lengths,
                                          bool reverse) {
  const int64_t steps = x.size(0);
  const at::Tensor xw = at::matmul(x, d.w.t()) + d.wb;
  State state{d.h0, d.c0};
  std::vector<at::Tensor> ys(static_cast<size_t>(steps));
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t t = reverse ? steps - 1 - k : k;
    State next = step(s, d, xw[t], state);
    if (lengths.defined()) {
      const at::Tensor on = lengths.gt(t).unsqueeze(1);  // [batch, 1]
      ys[t] = at::where(on, next.h, at::zeros_like(next.h));
      next.h = at::where(on, next.h, state.h);
      if (next.c.defined()) next.c = at::where(on, next.c, state.c);
    } else {
      ys[t] = next.h;
    }
    state = next;
  }
  if (lengths.defined()) {
    const at::Tensor ran = lengths.gt(0).unsqueeze(1);
    state.h = at::where(ran, state.h, at::zeros_like(state.h));
    if (state.c.defined()) state.c = at::where(ran, state.c, at::zeros_like(state.c));
  }
  const at::Tensor y = steps > 0 ? at::stack(ys) : at::zeros({0, x.size(1), s.hidden}, x.options());
  return {y, state};
}

// Fails unless `t` (input `slot`, named `name`) has shape `want` (`meaning` spells it).
void requireShape(const OpContext& ctx, const at::Tensor& t, const char* name,
                  std::vector<int64_t> want, const std::string& meaning) {
  if (t.sizes() != at::IntArrayRef(want)) {
    ctx.fail(std::string(name) + " must have shape " + shapeString(want) + " (" + meaning +
             "), got " + shapeString(t.sizes()));
  }
}

// Input `i` in the compute dtype `type` (float32 for a float16 model); undefined when an optional
// input is omitted, a failure when a required one is.
at::Tensor floatTensor(const OpContext& ctx, size_t i, at::ScalarType type, const char* name,
                       bool required = false) {
  if (!required && !ctx.hasInput(i)) return {};
  const at::Tensor& t = ctx.input(i);
  if (!at::isFloatingType(t.scalar_type())) {
    ctx.fail(std::string(name) + " must be a floating-point tensor, got " +
             c10::toString(t.scalar_type()));
  }
  return t.to(type);
}

// An initial state [directions, batch, hidden] (layout 0) or [batch, directions, hidden]
// (layout 1), returned time-major; zeros when omitted.
at::Tensor initialState(const OpContext& ctx, size_t i, const char* name, const Settings& s,
                        int64_t batch, const at::TensorOptions& options) {
  const int64_t D = s.directions, H = s.hidden;
  at::Tensor t = floatTensor(ctx, i, options.dtype().toScalarType(), name);
  if (!t.defined()) return at::zeros({D, batch, H}, options);
  if (s.batch_first) {
    requireShape(ctx, t, name, {batch, D, H}, "[batch_size, num_directions, hidden_size]");
    return t.transpose(0, 1);
  }
  requireShape(ctx, t, name, {D, batch, H}, "[num_directions, batch_size, hidden_size]");
  return t;
}

// sequence_lens as int64 [batch] with every value in [0, seq_length]; undefined when omitted.
at::Tensor sequenceLengths(const OpContext& ctx, int64_t batch, int64_t steps) {
  if (!ctx.hasInput(4)) return {};
  const at::Tensor& t = ctx.input(4);
  if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    ctx.fail(std::string("sequence_lens must be an integer tensor, got ") +
             c10::toString(t.scalar_type()));
  }
  requireShape(ctx, t, "sequence_lens", {batch}, "[batch_size]");
  const at::Tensor lengths = t.to(at::kLong);
  if (batch > 0 && (lengths.min().item<int64_t>() < 0 || lengths.max().item<int64_t>() > steps)) {
    ctx.fail("sequence_lens values must lie in [0, " + std::to_string(steps) + "]");
  }
  return lengths;
}

std::vector<at::Tensor> runRecurrent(const OpContext& ctx, Cell cell) {
  const at::Tensor& x_in = ops::floatInput(ctx, 0);
  if (x_in.dim() != 3) ctx.fail("X must have rank 3, got shape " + shapeString(x_in.sizes()));
  const at::ScalarType out_type = x_in.scalar_type();
  const at::ScalarType type = out_type == at::kHalf ? at::kFloat : out_type;
  const at::Tensor r_in = floatTensor(ctx, 2, type, "R", true);
  const Settings s = readSettings(ctx, cell, r_in.dim() == 3 ? r_in.size(2) : 0);
  const at::Tensor x = s.batch_first ? x_in.to(type).transpose(0, 1) : x_in.to(type);
  const int64_t D = s.directions, H = s.hidden, G = gateCount(cell);
  const int64_t steps = x.size(0), batch = x.size(1), input = x.size(2);
  const std::string gates = G == 1 ? "" : std::to_string(G) + "*";
  const at::Tensor w = floatTensor(ctx, 1, type, "W", true);
  requireShape(ctx, w, "W", {D, G * H, input},
               "[num_directions, " + gates + "hidden_size, input_size]");
  requireShape(ctx, r_in, "R", {D, G * H, H},
               "[num_directions, " + gates + "hidden_size, hidden_size]");
  at::Tensor b = floatTensor(ctx, 3, type, "B");
  if (b.defined()) {
    requireShape(ctx, b, "B", {D, 2 * G * H},
                 "[num_directions, " + std::to_string(2 * G) + "*hidden_size]");
  } else {
    b = at::zeros({D, 2 * G * H}, x.options());
  }
  at::Tensor p;
  if (cell == Cell::Lstm) {
    p = floatTensor(ctx, 7, type, "P");
    if (p.defined()) requireShape(ctx, p, "P", {D, 3 * H}, "[num_directions, 3*hidden_size]");
  }
  const at::Tensor lengths = sequenceLengths(ctx, batch, steps);
  const at::Tensor h0 = initialState(ctx, 5, "initial_h", s, batch, x.options());
  const at::Tensor c0 =
      cell == Cell::Lstm ? initialState(ctx, 6, "initial_c", s, batch, x.options()) : at::Tensor();

  std::vector<at::Tensor> ys, hs, cs;
  for (int64_t dir = 0; dir < D; ++dir) {
    DirectionInputs d;
    d.w = w[dir];
    d.r = r_in[dir];
    d.wb = b[dir].narrow(0, 0, G * H);
    d.rb = b[dir].narrow(0, G * H, G * H);
    if (p.defined()) d.p = p[dir];
    d.h0 = h0[dir];
    if (c0.defined()) d.c0 = c0[dir];
    d.acts = &s.activations[static_cast<size_t>(dir * activationCount(cell))];
    auto [y, state] = runDirection(s, d, x, lengths, s.reverse || dir == 1);
    ys.push_back(y);
    hs.push_back(state.h);
    if (state.c.defined()) cs.push_back(state.c);
  }
  at::Tensor y = at::stack(ys, 1);  // [seq, directions, batch, hidden]
  at::Tensor y_h = at::stack(hs, 0);
  at::Tensor y_c = cs.empty() ? at::Tensor() : at::stack(cs, 0);
  if (s.batch_first) {
    y = y.permute({2, 0, 1, 3});
    y_h = y_h.transpose(0, 1);
    if (y_c.defined()) y_c = y_c.transpose(0, 1);
  }
  std::vector<at::Tensor> out{y.to(out_type), y_h.to(out_type)};
  if (y_c.defined()) out.push_back(y_c.to(out_type));
  if (ctx.outputCount() > out.size()) {
    ctx.fail("has " + std::to_string(ctx.outputCount()) + " outputs, at most " +
             std::to_string(out.size()) + " allowed");
  }
  out.resize(ctx.outputCount());
  return out;
}

}  // namespace

void registerRecurrentOps(OpRegistry& r) {
  r.add(op("RNN", 7, kLatestOpset, [](const OpContext& c) { return runRecurrent(c, Cell::Rnn); }));
  r.add(op("GRU", 7, kLatestOpset, [](const OpContext& c) { return runRecurrent(c, Cell::Gru); }));
  r.add(
      op("LSTM", 7, kLatestOpset, [](const OpContext& c) { return runRecurrent(c, Cell::Lstm); }));
}

}  // namespace qforge
