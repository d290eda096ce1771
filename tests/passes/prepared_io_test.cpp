// A prepared model saved and loaded in another "process" computes exactly what it computed
// before, with the same quantizers; broken directories are refused with the file named.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backends/backend_config.h"
#include "core/error.h"
#include "core/files.h"
#include "passes/prepared_io.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

// tinyBackend with unit outputs and int32 biases: every kind of quantizer.
nlohmann::json tinyDocument(const nlohmann::json& patch) {
  nlohmann::json doc =
      tinyBackendDocument({{"placement", {{"unit_inputs", true}, {"unit_outputs", true}}},
                           {"constraints", {{"bias", {{"mode", "derived"}, {"bits", 32}}}}}});
  doc.merge_patch(patch);
  return doc;
}

struct Saved {
  std::string dir;
  at::Tensor x;
  at::Tensor y;
  std::map<std::string, at::Tensor> scales;
};

Saved saveCalibrated(const nlohmann::json& patch = nlohmann::json::object()) {
  const nlohmann::json doc = tinyDocument(patch);
  auto m = passes::prepare(convReluConv(), backends::parseBackendConfig(doc, "test"));
  Saved s{makeTempDir("prepared_io"), at::randn({2, 2, 5, 5}), {}, {}};
  calibrateOn(*m, s.x);
  const at::Tensor other = at::randn({3, 2, 5, 5}) * 1.5;
  s.y = m->executor().run({{"x", other}}).at("y");
  s.x = other;
  for (quant::FakeQuantizer* q : m->quantizers())
    s.scales[q->name()] = q->qparams().scale;
  passes::savePreparedModel(*m, doc, s.dir);
  return s;
}

TEST(PreparedIo, LoadedModelComputesExactlyWhatTheSavedOneDid) {
  const Saved s = saveCalibrated();
  auto back = passes::loadPreparedModel(s.dir);
  EXPECT_EQ(back->backend().name, "Tiny");
  ASSERT_EQ(back->quantizers().size(), s.scales.size());
  for (quant::FakeQuantizer* q : back->quantizers()) {
    ASSERT_TRUE(s.scales.count(q->name())) << q->name();
    EXPECT_TRUE(at::equal(q->qparams().scale, s.scales.at(q->name()))) << q->name();
  }
  const at::Tensor y = back->executor().run({{"x", s.x}}).at("y");
  EXPECT_TRUE(at::equal(y, s.y)) << (y - s.y).abs().max();
}

TEST(PreparedIo, LearnedQuantizerParametersSurvive) {
  // LSQ keeps its scale as a parameter: a changed value must come back, not a recalibration.
  const nlohmann::json lsq = {{"weight", {{"fake_quantizer", "LSQ"}}},
                              {"activation", {{"fake_quantizer", "LSQ"}}}};
  const nlohmann::json doc = tinyDocument(lsq);
  auto m = passes::prepare(convReluConv(), backends::parseBackendConfig(doc, "test"));
  const at::Tensor x = at::randn({2, 2, 5, 5});
  calibrateOn(*m, x);
  quant::FakeQuantizer* first = m->quantizers().front();
  auto state = first->state();
  ASSERT_TRUE(state.count("scale"));
  state["scale"] = state["scale"] * 1.37;
  first->loadState(state);
  const at::Tensor y = m->executor().run({{"x", x}}).at("y");
  const std::string dir = makeTempDir("prepared_io_lsq");
  passes::savePreparedModel(*m, doc, dir);
  auto back = passes::loadPreparedModel(dir);
  EXPECT_TRUE(at::equal(back->quantizer(first->name())->state().at("scale"), state["scale"]));
  EXPECT_TRUE(at::equal(back->executor().run({{"x", x}}).at("y"), y));
}

TEST(PreparedIo, RefusesADirectoryWithoutAPreparedModel) {
  const std::string dir = makeTempDir("prepared_io_empty");
  EXPECT_FALSE(passes::isPreparedModelDir(dir));
  const std::string message = errorOf([&] { passes::loadPreparedModel(dir); });
  EXPECT_NE(message.find("not a prepared model directory"), std::string::npos) << message;
  EXPECT_NE(message.find("qforge quantize"), std::string::npos) << message;
}

TEST(PreparedIo, RefusesTruncatedOrInconsistentFilesNamingThem) {
  const Saved s = saveCalibrated();
  const std::string json_path = s.dir + "/prepared.json";
  const std::string text = readFile(json_path);

  writeFileAtomically(json_path, text.substr(0, text.size() / 2));
  std::string message = errorOf([&] { passes::loadPreparedModel(s.dir); });
  EXPECT_NE(message.find("prepared.json"), std::string::npos) << message;

  // A quantizer's state removed: the message names the quantizer.
  nlohmann::json doc = nlohmann::json::parse(text);
  const std::string victim = doc["quantizers"].begin().key();
  doc["quantizers"].erase(victim);
  writeFileAtomically(json_path, doc.dump());
  message = errorOf([&] { passes::loadPreparedModel(s.dir); });
  EXPECT_NE(message.find(victim), std::string::npos) << message;

  // A point removed while the graph still runs it.
  doc = nlohmann::json::parse(text);
  const std::string dropped = doc["points"][0]["quantizer"];
  doc["points"].erase(0);
  writeFileAtomically(json_path, doc.dump());
  message = errorOf([&] { passes::loadPreparedModel(s.dir); });
  EXPECT_NE(message.find(dropped), std::string::npos) << message;
}

// A prepared.json that is valid JSON but not an object, or whose "format" is not a string: one
// line, not nlohmann's type_error (found by fuzzing, issue #22).
TEST(PreparedIo, RefusesAJsonDocumentOfTheWrongShape) {
  const Saved s = saveCalibrated();
  const std::string json_path = s.dir + "/prepared.json";
  for (const char* text : {"12", "[1, 2]", "{\"format\": 7, \"version\": 1}"}) {
    writeFileAtomically(json_path, text);
    const std::string message = errorOf([&] { passes::loadPreparedModel(s.dir); });
    EXPECT_NE(message.find("not a qforge prepared model of version"), std::string::npos)
        << text << ": " << message;
  }
}

}  // namespace
}  // namespace qforge::testing
