// TfIdfVectorizer (opset 9) on int32/int64 tokens, as ONNX's operator page and reference define
// it: the pool lists n-grams by length (ngram_counts[i] is where the (i + 1)-grams start), each
// mapped to an output slot by ngram_indexes. For every skip distance 0..max_skip_count and start
// position, the tokens start, start + (skip + 1), ... form n-grams of min..max_gram_length that
// count when the pool has them; unigrams count at skip 0 only (a skip does not change them).
// mode TF gives the counts, IDF weights[i] where a count is non-zero, TFIDF counts * weights.
#include "exec/ops/text.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "exec/ops/common.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::op;
using ops::shapeString;

struct NgramPool {
  std::map<std::vector<int64_t>, int64_t> slot_of;  // n-gram -> output slot
  int64_t slots = 0;
};

NgramPool poolOf(const OpContext& ctx) {
  if (ctx.hasAttr("pool_strings")) ctx.fail("string pools are not supported (ATen has no strings)");
  const std::vector<int64_t> pool = ctx.attrInts("pool_int64s", {});
  const std::vector<int64_t> counts = ctx.attrInts("ngram_counts", {});
  const std::vector<int64_t> indexes = ctx.attrInts("ngram_indexes", {});
  NgramPool out;
  size_t gram = 0;  // position in ngram_indexes
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto n = static_cast<int64_t>(i + 1);
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || (end - begin) % n != 0) {
      ctx.fail("ngram_counts does not split pool_int64s into whole " + std::to_string(n) +
               "-grams");
    }
    for (int64_t at = begin; at < end; at += n, ++gram) {
      if (gram >= indexes.size()) ctx.fail("ngram_indexes has fewer entries than the pool n-grams");
      out.slot_of[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)] = indexes[gram];
      out.slots = std::max(out.slots, indexes[gram] + 1);
    }
  }
  return out;
}

std::vector<at::Tensor> tfIdfVectorizer(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  if (x.scalar_type() != at::kInt && x.scalar_type() != at::kLong) {
    ctx.fail("X must be int32 or int64 tokens, got " + std::string(c10::toString(x.scalar_type())));
  }
  if (x.dim() != 1 && x.dim() != 2) {
    ctx.fail("X must be [C] or [N, C], got " + shapeString(x.sizes()));
  }
  const NgramPool pool = poolOf(ctx);
  const int64_t min_n = ctx.attrInt("min_gram_length");
  const int64_t max_n = ctx.attrInt("max_gram_length");
  const int64_t max_skip = ctx.attrInt("max_skip_count");
  const std::string mode = ctx.attrString("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") ctx.fail("unknown mode '" + mode + "'");
  const std::vector<double> weights = ctx.attrFloats("weights", {});

  const at::Tensor rows = (x.dim() == 1 ? x.unsqueeze(0) : x).to(at::kLong).contiguous();
  const int64_t n_rows = rows.size(0), length = rows.size(1);
  at::Tensor y = at::zeros({n_rows, pool.slots}, at::kFloat);
  auto counts = y.accessor<float, 2>();
  const auto tokens = rows.accessor<int64_t, 2>();
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t skip = 0; skip <= max_skip; ++skip) {
      const int64_t lowest = skip == 0 ? min_n : std::max<int64_t>(min_n, 2);
      for (int64_t start = 0; start < length; ++start) {
        gram.clear();
        for (int64_t n = 1; n <= max_n; ++n) {
          const int64_t at = start + (n - 1) * (skip + 1);
          if (at >= length) break;
          gram.push_back(tokens[r][at]);
          if (n < lowest) continue;
          const auto hit = pool.slot_of.find(gram);
          if (hit != pool.slot_of.end()) counts[r][hit->second] += 1;
        }
      }
    }
  }
  if (mode != "TF") {
    at::Tensor w = at::ones({pool.slots}, at::kFloat);
    if (!weights.empty()) {
      const std::vector<int64_t> indexes = ctx.attrInts("ngram_indexes", {});
      for (size_t i = 0; i < indexes.size() && i < weights.size(); ++i)
        w[indexes[i]] = weights[i];
    }
    y = mode == "IDF" ? (y > 0).to(at::kFloat) * w : y * w;
  }
  return {x.dim() == 1 ? y.squeeze(0) : y};
}

}  // namespace

void registerTextOps(OpRegistry& r) {
  r.add(op("TfIdfVectorizer", 9, kLatestOpset, tfIdfVectorizer));
}

}  // namespace qforge
