// The reconstruction presets and the config keys MQBench's YAML files use
// (quantize.reconstruction: pattern, scale_lr, warm_up, weight, max_count, b_range, prob,
// keep_gpu, round_mode), plus qforge's own (batch, lr, max_block_layers, cache_limit, seed).
#include "algos/reconstruction.h"
#include "core/error.h"

namespace qforge::algos {
namespace {

double number(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number()) throw Error(where + " must be a number, got " + v.dump());
  return v.get<double>();
}

int64_t count(const nlohmann::json& v, const std::string& where) {
  const double d = number(v, where);
  if (d != static_cast<double>(static_cast<int64_t>(d))) {
    throw Error(where + " must be a whole number, got " + v.dump());
  }
  return static_cast<int64_t>(d);
}

}  // namespace

ReconstructionConfig reconstructionPreset(const std::string& algorithm) {
  ReconstructionConfig c;
  c.algorithm = algorithm;
  if (algorithm == "adaround") {
    c.pattern = ReconGranularity::Layer;
    c.prob = 1.0;
  } else if (algorithm == "brecq") {
    c.pattern = ReconGranularity::Block;
    c.prob = 1.0;
  } else if (algorithm == "qdrop") {
    c.pattern = ReconGranularity::Block;
    c.prob = 0.5;
  } else {
    throw Error("unknown reconstruction algorithm '" + algorithm +
                "'; known: adaround, brecq, qdrop");
  }
  return c;
}

void applyReconstructionKeys(ReconstructionConfig& c, const nlohmann::json& j,
                             const std::string& where) {
  if (!j.is_object()) throw Error(where + ": the reconstruction config must be a mapping");
  if (j.contains("quantize")) {
    const nlohmann::json& q = j.at("quantize");
    if (!q.is_object() || !q.contains("reconstruction") || j.size() != 1) {
      throw Error(where +
                  ": expected quantize.reconstruction (MQBench's layout) or the keys "
                  "themselves at the top level");
    }
    applyReconstructionKeys(c, q.at("reconstruction"), where + ": quantize.reconstruction");
    return;
  }
  for (const auto& [key, v] : j.items()) {
    const std::string at = where + ": " + key;
    if (key == "pattern") {
      const std::string p = v.is_string() ? v.get<std::string>() : "";
      if (p == "layer") {
        c.pattern = ReconGranularity::Layer;
      } else if (p == "block") {
        c.pattern = ReconGranularity::Block;
      } else {
        throw Error(at + " must be \"layer\" or \"block\", got " + v.dump());
      }
    } else if (key == "scale_lr") {
      c.scale_lr = number(v, at);
    } else if (key == "warm_up") {
      c.warm_up = number(v, at);
    } else if (key == "weight") {
      c.weight = number(v, at);
    } else if (key == "max_count") {
      c.max_count = count(v, at);
    } else if (key == "b_range") {
      if (!v.is_array() || v.size() != 2)
        throw Error(at + " must be [start, end], got " + v.dump());
      c.b_start = number(v[0], at + "[0]");
      c.b_end = number(v[1], at + "[1]");
    } else if (key == "prob") {
      c.prob = number(v, at);
    } else if (key == "keep_gpu") {
      // MQBench's device placement; everything stays on the CPU here.
    } else if (key == "round_mode") {
      if (v != "learned_hard_sigmoid") {
        throw Error(at + ": only \"learned_hard_sigmoid\" (AdaRound's) is implemented, got " +
                    v.dump());
      }
    } else if (key == "batch") {
      c.batch = count(v, at);
    } else if (key == "lr") {
      c.lr = number(v, at);
    } else if (key == "max_block_layers") {
      c.max_block_layers = static_cast<int>(count(v, at));
    } else if (key == "cache_limit") {
      c.cache_limit = count(v, at);
    } else if (key == "seed") {
      c.seed = static_cast<uint64_t>(count(v, at));
    } else {
      throw Error(at +
                  " is not a reconstruction key (pattern, scale_lr, warm_up, weight, "
                  "max_count, b_range, prob, keep_gpu, round_mode, batch, lr, "
                  "max_block_layers, cache_limit, seed)");
    }
  }
}

}  // namespace qforge::algos
