#include "algos/qat_checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"

namespace qforge::algos {

namespace {

constexpr const char* kFormat = "qforge.qat_checkpoint.v1";

using TensorDict = c10::Dict<std::string, at::Tensor>;

TensorDict toDict(const std::map<std::string, at::Tensor>& tensors) {
  TensorDict dict;
  // Detached, contiguous copies: a checkpoint holds values, not autograd history or views.
  for (const auto& [name, t] : tensors)
    dict.insert(name, t.detach().contiguous().clone());
  return dict;
}

std::map<std::string, at::Tensor> fromDict(const c10::IValue& value) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& entry : value.toGenericDict())
    tensors[entry.key().toStringRef()] = entry.value().toTensor();
  return tensors;
}

}  // namespace

void saveQatCheckpoint(const QatCheckpoint& checkpoint, const std::string& path) {
  c10::impl::GenericDict quantizers(
      c10::StringType::get(),
      c10::DictType::create(c10::StringType::get(), c10::TensorType::get()));
  for (const auto& [name, state] : checkpoint.quantizers)
    quantizers.insert(name, toDict(state));
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("format", std::string(kFormat));
  root.insert("settings", checkpoint.settings);
  root.insert("epoch", checkpoint.epoch);
  root.insert("step_in_epoch", checkpoint.step_in_epoch);
  root.insert("global_step", checkpoint.global_step);
  root.insert("epoch_sums", checkpoint.epoch_sums.defined() ? checkpoint.epoch_sums.clone()
                                                            : at::zeros({5}, at::kDouble));
  root.insert("initializers", toDict(checkpoint.initializers));
  root.insert("quantizers", quantizers);
  root.insert("optimizer", toDict(checkpoint.optimizer));
  root.insert("rng_state", checkpoint.rng_state.defined() ? checkpoint.rng_state.clone()
                                                          : at::empty({0}, at::kByte));
  root.insert("history", checkpoint.history);
  const std::vector<char> bytes = torch::jit::pickle_save(root);
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  writeFileAtomically(path, std::string(bytes.begin(), bytes.end()));
}

QatCheckpoint loadQatCheckpoint(const std::string& path) {
  require(std::filesystem::exists(path),
          "checkpoint " + path + " does not exist; give --resume the --out directory of a qat run");
  const std::string text = readFile(path);
  QatCheckpoint c;
  try {
    const c10::IValue root = torch::jit::pickle_load(std::vector<char>(text.begin(), text.end()));
    const auto dict = root.toGenericDict();
    require(dict.contains("format") && dict.at("format").toStringRef() == kFormat,
            "not a qforge QAT checkpoint");
    c.settings = dict.at("settings").toStringRef();
    c.epoch = dict.at("epoch").toInt();
    c.step_in_epoch = dict.at("step_in_epoch").toInt();
    c.global_step = dict.at("global_step").toInt();
    c.epoch_sums = dict.at("epoch_sums").toTensor();
    c.initializers = fromDict(dict.at("initializers"));
    for (const auto& entry : dict.at("quantizers").toGenericDict())
      c.quantizers[entry.key().toStringRef()] = fromDict(entry.value());
    c.optimizer = fromDict(dict.at("optimizer"));
    c.rng_state = dict.at("rng_state").toTensor();
    c.history = dict.at("history").toStringRef();
  } catch (const Error& e) {
    throw Error("checkpoint " + path + ": " + e.what());
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error("checkpoint " + path + " is unreadable (" + what.substr(0, what.find('\n')) +
                "); it was not written by qforge qat, or is damaged");
  }
  return c;
}

}  // namespace qforge::algos

namespace qforge::algos {

std::string qatSettingsJson(const passes::PreparedModel& model, const QatParameters& params,
                            const QatConfig& config, int world_size) {
  nlohmann::json quantizers = nlohmann::json::object();
  for (quant::FakeQuantizer* q : model.quantizers())
    quantizers[q->name()] = q->kind();
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t i = 0; i < params.size(); ++i)
    tensors.push_back(params.names[i] + c10::str(params.tensors[i].sizes()));
  return nlohmann::json{{"backend", model.backend().name},
                        {"quantizers", quantizers},
                        {"parameters", tensors},
                        {"epochs", config.epochs},
                        {"batch_size", config.batch_size},
                        {"world_size", world_size},
                        {"optimizer", qatOptimizerName(config.optimizer)},
                        {"lr", config.lr},
                        {"momentum", config.momentum},
                        {"weight_decay", config.weight_decay},
                        {"schedule", qatScheduleName(config.schedule)},
                        {"step_epochs", config.step_epochs},
                        {"step_gamma", config.step_gamma},
                        {"freeze_bn_epoch", config.freeze_bn_epoch},
                        {"augment_shift", config.augment_shift},
                        {"augment_flip", config.augment_flip},
                        {"label_smoothing", config.label_smoothing},
                        {"train_weights", config.train_weights},
                        {"quantizer_lr_scale", config.quantizer_lr_scale},
                        {"seed", config.seed}}
      .dump();
}

void requireSameQatSettings(const std::string& saved_text, const std::string& now_text,
                            const std::string& checkpoint_path) {
  const nlohmann::json saved = nlohmann::json::parse(saved_text);
  const nlohmann::json now = nlohmann::json::parse(now_text);
  std::vector<std::string> differences;
  for (const auto& [key, value] : now.items()) {
    if (!saved.contains(key) || saved[key] != value) {
      const std::string was = saved.contains(key) ? saved[key].dump() : "(missing)";
      differences.push_back(
          key + (value.is_primitive() ? " " + was + " -> " + value.dump() : " (differs)"));
    }
  }
  require(differences.empty(), "checkpoint " + checkpoint_path +
                                   " was written with other settings: " + join(differences, ", ") +
                                   "; resume with the model, backend and flags of that run");
}

std::string qatHistoryJson(const std::vector<QatEpochResult>& history) {
  nlohmann::json list = nlohmann::json::array();
  for (const QatEpochResult& e : history) {
    list.push_back({{"epoch", e.epoch},
                    {"loss", e.loss},
                    {"train_top1", e.train_top1},
                    {"eval_metric", e.eval_metric},
                    {"lr", e.lr},
                    {"seconds", e.seconds},
                    {"steps", e.steps},
                    {"bn_frozen", e.bn_frozen}});
  }
  return list.dump();
}

std::vector<QatEpochResult> parseQatHistory(const std::string& json) {
  std::vector<QatEpochResult> history;
  for (const auto& e : nlohmann::json::parse(json)) {
    QatEpochResult r;
    r.epoch = e["epoch"];
    r.loss = e["loss"];
    r.train_top1 = e["train_top1"];
    r.eval_metric = e["eval_metric"];
    r.lr = e["lr"];
    r.seconds = e["seconds"];
    r.steps = e["steps"];
    r.bn_frozen = e["bn_frozen"];
    history.push_back(r);
  }
  return history;
}

void restoreQatModelState(const QatCheckpoint& checkpoint, passes::PreparedModel& model,
                          const std::string& checkpoint_path) {
  at::NoGradGuard no_grad;
  Graph& graph = model.graph();
  for (const auto& [name, tensor] : checkpoint.initializers) {
    Value* v = graph.findValue(name);
    require(v && v->isInitializer() && v->initializer().sizes() == tensor.sizes(),
            "checkpoint " + checkpoint_path + ": tensor '" + name +
                "' does not match the model's initializers");
    v->initializer().copy_(tensor);
  }
  for (quant::FakeQuantizer* q : model.quantizers()) {
    auto it = checkpoint.quantizers.find(q->name());
    require(it != checkpoint.quantizers.end(),
            "checkpoint " + checkpoint_path + " has no state for quantizer '" + q->name() + "'");
    q->loadState(it->second);
  }
}

}  // namespace qforge::algos
