#include "algos/qat_checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "algos/pickle_check.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "core/strings.h"

namespace qforge::algos {

namespace {

constexpr const char* kFormat = "qforge.qat_checkpoint.v1";

using TensorDict = c10::Dict<std::string, at::Tensor>;

// The checkpoint's bytes for libtorch's zip reader. torch::jit::pickle_load's own VectorReader
// (libtorch 1.13) copies whatever range the reader asks for, past the end of the data when a
// damaged archive's directory points there (a fuzzed checkpoint: heap-buffer-overflow, issue
// #22). This one returns the bytes there are, as libtorch's FileAdapter does, and the zip reader
// then refuses the file with an error.
class BoundedReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BoundedReader(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// Every tensor's storage within the record libtorch read it from. The Unpickler sizes a storage by
// the element count the pickle claims, not by the bytes of its record: a damaged checkpoint would
// make a tensor that reads past its data.
void checkStorages(const c10::IValue& value, const std::map<const void*, size_t>& record_bytes) {
  if (value.isTensor()) {
    // qforge writes dense CPU tensors of plain types; the Unpickler also rebuilds quantized and
    // sparse ones on request, which no checkpoint of ours holds (a fuzzed one made a quantized
    // tensor that crashed when copied).
    const at::Tensor& tensor = value.toTensor();
    require(tensor.layout() == at::kStrided && !tensor.is_quantized() && tensor.is_cpu() &&
                !at::isComplexType(tensor.scalar_type()),
            "holds a " + std::string(c10::toString(tensor.scalar_type())) +
                " tensor of a kind qforge does not write");
    if (tensor.numel() == 0) return;
    // The last element's byte within the storage, from the pickled offset, sizes and strides.
    int64_t last = tensor.storage_offset();
    bool fits = last >= 0;
    for (int64_t d = 0; d < tensor.dim() && fits; ++d) {
      int64_t reach = 0;
      fits = tensor.stride(d) >= 0 &&
             !__builtin_mul_overflow(tensor.size(d) - 1, tensor.stride(d), &reach) &&
             !__builtin_add_overflow(last, reach, &last);
    }
    int64_t end_byte = 0;
    fits = fits && !__builtin_mul_overflow(last + 1, int64_t(tensor.element_size()), &end_byte);
    const at::Storage& storage = tensor.storage();
    require(fits && storage.data() != nullptr && end_byte <= int64_t(storage.nbytes()),
            "a tensor of shape " + c10::str(tensor.sizes()) + " reaches past its data");
    const auto record = record_bytes.find(storage.data());
    require(record != record_bytes.end() && storage.nbytes() <= record->second,
            "a tensor claims " + std::to_string(storage.nbytes()) +
                " bytes of data, more than its record holds");
  } else if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      checkStorages(entry.key(), record_bytes);
      checkStorages(entry.value(), record_bytes);
    }
  } else if (value.isList()) {
    for (const c10::IValue& item : value.toListRef())
      checkStorages(item, record_bytes);
  } else if (value.isTuple()) {
    for (const c10::IValue& item : value.toTupleRef().elements())
      checkStorages(item, record_bytes);
  }
}

// What torch::jit::pickle_load does (readArchiveAndTensors), through BoundedReader, with the
// pickle checked before libtorch's Unpickler reads it and the tensors checked after.
c10::IValue unpickle(const std::string& bytes) {
  caffe2::serialize::PyTorchStreamReader reader(std::make_shared<BoundedReader>(bytes));
  require(reader.hasRecord("data.pkl"), "the archive has no data.pkl");
  const std::tuple<at::DataPtr, size_t> pickle_record = reader.getRecord("data.pkl");
  const char* pickle = static_cast<const char*>(std::get<0>(pickle_record).get());
  const size_t pickle_size = std::get<1>(pickle_record);
  checkTorchPickle(pickle, pickle_size, "data.pkl");

  size_t pos = 0;
  const auto read = [&](char* out, size_t n) {
    n = std::min(n, pickle_size - pos);
    std::memcpy(out, pickle + pos, n);
    pos += n;
    return n;
  };
  std::map<const void*, size_t> record_bytes;
  const auto read_record = [&](const std::string& key) {
    auto [data, size] = reader.getRecord("data/" + key);
    record_bytes[data.get()] = size;
    return std::move(data);
  };
  torch::jit::Unpickler unpickler(read, /*type_resolver=*/nullptr, /*obj_loader=*/nullptr,
                                  read_record, /*device=*/c10::nullopt);
  unpickler.set_version(reader.version());
  c10::IValue root = unpickler.parse_ivalue();
  checkStorages(root, record_bytes);
  return root;
}

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
    const c10::IValue root = unpickle(text);
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
  // The saved settings come from the file: anything but a JSON object is a damaged checkpoint
  // (nlohmann's exception escaped as an internal error; issue #22).
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(saved_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint " + checkpoint_path + ": its settings are not valid JSON (" +
                jsonReason(e) + "); it was not written by qforge qat, or is damaged");
  }
  require(saved.is_object(), "checkpoint " + checkpoint_path +
                                 ": its settings are not a JSON object; it was not written by "
                                 "qforge qat, or is damaged");
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
  // From a checkpoint file: checked (a const json's operator[] on a missing key is undefined
  // behaviour, and nlohmann's exceptions would escape as internal errors; issue #22).
  std::vector<QatEpochResult> history;
  try {
    const nlohmann::json list = nlohmann::json::parse(json);
    require(list.is_array(), "the QAT metric history is not a JSON list");
    for (const auto& e : list) {
      QatEpochResult r;
      r.epoch = e.at("epoch").get<int64_t>();
      r.loss = e.at("loss").get<double>();
      r.train_top1 = e.at("train_top1").get<double>();
      r.eval_metric = e.at("eval_metric").get<double>();
      r.lr = e.at("lr").get<double>();
      r.seconds = e.at("seconds").get<double>();
      r.steps = e.at("steps").get<int64_t>();
      r.bn_frozen = e.at("bn_frozen").get<bool>();
      history.push_back(r);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("the QAT metric history is malformed (" + jsonReason(e) + ")");
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
