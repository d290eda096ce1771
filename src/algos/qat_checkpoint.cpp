#include "algos/qat_checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/files.h"

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
