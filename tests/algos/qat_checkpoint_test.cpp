// What the trainer puts into a checkpoint and takes out: settings compared key by key (each
// difference named), the metric history, the model's tensors and quantizer states (mismatches
// named), through the file and back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "algos/qat_checkpoint.h"
#include "core/files.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

std::unique_ptr<passes::PreparedModel> calibratedConvs() {
  auto m = passes::prepare(convReluConv(), tinyBackend({{"weight", {{"fake_quantizer", "LSQ"}}}}));
  calibrateOn(*m, at::randn({2, 2, 5, 5}));
  return m;
}

TEST(QatCheckpointContents, SettingsNameEveryDifference) {
  auto m = calibratedConvs();
  const algos::QatParameters p = algos::collectQatParameters(*m, true);
  algos::QatConfig config;
  const std::string settings = algos::qatSettingsJson(*m, p, config, 1);
  const nlohmann::json j = nlohmann::json::parse(settings);
  EXPECT_EQ(j["backend"], "Tiny");
  EXPECT_EQ(j["optimizer"], "sgd");
  EXPECT_EQ(j["schedule"], "cosine");
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["parameters"].size(), p.size());
  EXPECT_EQ(j["quantizers"].size(), m->quantizers().size());
  EXPECT_EQ(errorOf([&] { algos::requireSameQatSettings(settings, settings, "c.pt"); }),
            "(no error)");

  algos::QatConfig other = config;
  other.lr = 0.5;
  other.schedule = algos::QatSchedule::Step;
  const std::string changed = algos::qatSettingsJson(*m, p, other, 2);
  const std::string message =
      errorOf([&] { algos::requireSameQatSettings(settings, changed, "c.pt"); });
  EXPECT_EQ(message.rfind("checkpoint c.pt was written with other settings: ", 0), 0u) << message;
  EXPECT_NE(message.find("lr 0.001 -> 0.5"), std::string::npos) << message;
  EXPECT_NE(message.find("schedule \"cosine\" -> \"step\""), std::string::npos) << message;
  EXPECT_NE(message.find("world_size 1 -> 2"), std::string::npos) << message;
  EXPECT_EQ(message.find("momentum"), std::string::npos) << message;
  nlohmann::json older = j;
  older.erase("seed");
  older["parameters"] = nlohmann::json::array();
  const std::string missing =
      errorOf([&] { algos::requireSameQatSettings(older.dump(), settings, "c.pt"); });
  EXPECT_NE(missing.find("seed (missing) -> 0"), std::string::npos) << missing;
  EXPECT_NE(missing.find("parameters (differs)"), std::string::npos) << missing;
}

TEST(QatCheckpointContents, HistoryRoundTripsThroughJson) {
  std::vector<algos::QatEpochResult> history(2);
  history[0] = {0, 1.25, 0.5, -1, 0.001, 12.5, 24, false};
  history[1] = {1, 0.75, -1, 91.5, 0.0005, 11.0, 24, true};
  const std::vector<algos::QatEpochResult> back =
      algos::parseQatHistory(algos::qatHistoryJson(history));
  ASSERT_EQ(back.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back[i].epoch, history[i].epoch);
    EXPECT_EQ(back[i].loss, history[i].loss);
    EXPECT_EQ(back[i].train_top1, history[i].train_top1);
    EXPECT_EQ(back[i].eval_metric, history[i].eval_metric);
    EXPECT_EQ(back[i].lr, history[i].lr);
    EXPECT_EQ(back[i].seconds, history[i].seconds);
    EXPECT_EQ(back[i].steps, history[i].steps);
    EXPECT_EQ(back[i].bn_frozen, history[i].bn_frozen);
  }
  EXPECT_TRUE(algos::parseQatHistory("[]").empty());
}

TEST(QatCheckpointContents, ModelStateIsRestoredInPlaceOrTheMismatchNamed) {
  auto m = calibratedConvs();
  Value* w1 = m->graph().value("w1");
  const at::Tensor tensor = w1->initializer();
  algos::QatCheckpoint c;
  c.initializers["w1"] = at::full({3, 2, 3, 3}, 0.25);
  for (quant::FakeQuantizer* q : m->quantizers())
    c.quantizers[q->name()] = q->state();
  // Through the file and back, as a resumed run reads it.
  TempDir dir("qat-checkpoint");
  algos::saveQatCheckpoint(c, dir.file("c.pt"));
  const algos::QatCheckpoint loaded = algos::loadQatCheckpoint(dir.file("c.pt"));
  algos::restoreQatModelState(loaded, *m, "c.pt");
  EXPECT_TRUE(w1->initializer().is_same(tensor));  // the same tensor, new values
  EXPECT_TRUE(at::equal(w1->initializer(), at::full({3, 2, 3, 3}, 0.25)));

  algos::QatCheckpoint wrong_shape = c;
  wrong_shape.initializers["w1"] = at::zeros({3});
  EXPECT_EQ(errorOf([&] { algos::restoreQatModelState(wrong_shape, *m, "c.pt"); }),
            "checkpoint c.pt: tensor 'w1' does not match the model's initializers");
  algos::QatCheckpoint unknown = c;
  unknown.initializers["nowhere"] = at::zeros({3});
  EXPECT_NE(errorOf([&] { algos::restoreQatModelState(unknown, *m, "c.pt"); }).find("'nowhere'"),
            std::string::npos);
  algos::QatCheckpoint no_quantizers = c;
  no_quantizers.quantizers.clear();
  EXPECT_NE(errorOf([&] {
              algos::restoreQatModelState(no_quantizers, *m, "c.pt");
            }).find("has no state for quantizer"),
            std::string::npos);
}

// Settings and history come from the file: malformed ones are one error, not nlohmann's exception
// (or, for a missing history key, undefined behaviour); issue #22.
TEST(QatCheckpointContents, MalformedSettingsAndHistoryAreRefused) {
  const std::string bad = errorOf([] { algos::requireSameQatSettings("{\"a\": ", "{}", "c.pt"); });
  EXPECT_EQ(bad.rfind("checkpoint c.pt: its settings are not valid JSON (", 0), 0u) << bad;
  EXPECT_EQ(bad.find("json.exception"), std::string::npos) << bad;
  EXPECT_NE(
      errorOf([] { algos::requireSameQatSettings("[1]", "{}", "c.pt"); }).find("not a JSON object"),
      std::string::npos);
  EXPECT_EQ(errorOf([] { algos::parseQatHistory("[{}]"); }),
            "the QAT metric history is malformed (key 'epoch' not found)");
  EXPECT_EQ(errorOf([] { algos::parseQatHistory("{}"); }),
            "the QAT metric history is not a JSON list");
  EXPECT_EQ(algos::parseQatHistory("[]").size(), 0u);
}

// A damaged file (cut short anywhere, so that the zip directory points past its end) is one
// error; libtorch's own pickle_load read past the end of its buffer there (found by fuzzing,
// issue #22; the ASan build caught the read).
TEST(QatCheckpointContents, ATruncatedFileIsRefusedWithoutReadingPastIt) {
  algos::QatCheckpoint c;
  c.settings = "{}";
  c.initializers["w"] = at::arange(3000, at::kFloat);
  TempDir dir("qat-checkpoint");
  algos::saveQatCheckpoint(c, dir.file("c.pt"));
  const std::string bytes = readFile(dir.file("c.pt"));
  for (size_t cut :
       {size_t{0}, size_t{20}, bytes.size() / 2, bytes.size() - 30, bytes.size() - 1}) {
    writeFileAtomically(dir.file("cut.pt"), bytes.substr(0, cut));
    const std::string message = errorOf([&] { algos::loadQatCheckpoint(dir.file("cut.pt")); });
    EXPECT_NE(message.find("cut.pt"), std::string::npos) << cut << ": " << message;
  }
  EXPECT_EQ(algos::loadQatCheckpoint(dir.file("c.pt")).initializers.at("w").numel(), 3000);
}

// A tensor whose pickled element count exceeds its data record: libtorch's Unpickler sizes the
// storage by the count, so the tensor would read past the record. The zip is stored uncompressed
// and libtorch does not check CRCs, so the count is patched in place: epoch_sums' 5 doubles (its
// persistent id ends "K\x05tQ": BININT1 5, TUPLE, BINPERSID) become 64.
TEST(QatCheckpointContents, ATensorLargerThanItsRecordIsRefused) {
  algos::QatCheckpoint c;
  c.settings = "{}";
  c.epoch_sums = at::arange(5, at::kDouble);
  TempDir dir("qat-checkpoint");
  algos::saveQatCheckpoint(c, dir.file("c.pt"));
  std::string bytes = readFile(dir.file("c.pt"));
  const std::string count = std::string("K\x05tQ", 4);
  const size_t at = bytes.find(count);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(count, at + 1), std::string::npos);
  EXPECT_EQ(algos::loadQatCheckpoint(dir.file("c.pt")).epoch_sums[4].item<double>(), 4.0);
  bytes[at + 1] = 64;
  writeFileAtomically(dir.file("long.pt"), bytes);
  const std::string message = errorOf([&] { algos::loadQatCheckpoint(dir.file("long.pt")); });
  EXPECT_NE(message.find("a tensor claims 512 bytes of data, more than its record holds"),
            std::string::npos)
      << message;
  // A storage of 0 elements (no record read, no data) under a tensor of 5: libtorch let it
  // through, and copying it dereferenced null (a fuzzed checkpoint, issue #22).
  bytes[at + 1] = 0;
  writeFileAtomically(dir.file("empty.pt"), bytes);
  const std::string empty = errorOf([&] { algos::loadQatCheckpoint(dir.file("empty.pt")); });
  EXPECT_NE(empty.find("empty.pt: a tensor of shape [5] reaches past its data"), std::string::npos)
      << empty;
}

}  // namespace
}  // namespace qforge::testing
