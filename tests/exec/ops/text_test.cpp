// TfIdfVectorizer on counts worked out by hand (ONNX's node tests, tests/conformance, cover the
// skip and mode combinations they list), and its errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// Pool: unigrams 1 and 2 (slots 0, 1), bigrams (1, 2) and (2, 3) (slots 2, 3).
std::vector<Attribute> pool(const std::string& mode, int64_t max_skip) {
  return {Attribute::makeInt("min_gram_length", 1),
          Attribute::makeInt("max_gram_length", 2),
          Attribute::makeInt("max_skip_count", max_skip),
          Attribute::makeString("mode", mode),
          Attribute::makeInts("ngram_counts", {0, 2}),
          Attribute::makeInts("ngram_indexes", {0, 1, 2, 3}),
          Attribute::makeInts("pool_int64s", {1, 2, 1, 2, 2, 3}),
          Attribute::makeFloats("weights", {0.5, 1.0, 2.0, 4.0})};
}

TEST(TextOpsTest, TfIdfCountsNgramsAcrossSkips) {
  const at::Tensor x = i64({1, 2, 1, 2, 3});
  // Unigrams: 1 twice, 2 twice. Bigrams at skip 0: (1,2) at 0 and 2, (2,3) at 3. At skip 1 the
  // pairs are (1,1), (2,2), (1,3): none in the pool, and unigrams are not counted again.
  expectTensorNear(run1({"TfIdfVectorizer", 9, {x}, pool("TF", 1)}), f32({2, 2, 2, 1}));
  // Skip 2 adds the pairs at positions (0, 3) = (1,2) and (1, 4) = (2,3).
  expectTensorNear(run1({"TfIdfVectorizer", 9, {x}, pool("TF", 2)}), f32({2, 2, 3, 2}));
  expectTensorNear(run1({"TfIdfVectorizer", 9, {x}, pool("IDF", 0)}), f32({0.5, 1, 2, 4}));
  expectTensorNear(run1({"TfIdfVectorizer", 9, {x}, pool("TFIDF", 0)}), f32({1, 2, 4, 4}));
  // Rows of a batch are counted apart; int32 tokens too.
  const at::Tensor rows = at::tensor({1, 2, 3, 3, 3, 3}, at::kInt).reshape({2, 3});
  expectTensorNear(run1({"TfIdfVectorizer", 9, {rows}, pool("TF", 0)}),
                   f32({1, 1, 1, 1, 0, 0, 0, 0}).reshape({2, 4}));
}

TEST(TextOpsTest, TfIdfErrorsNameTheNode) {
  const at::Tensor x = i64({1, 2});
  std::vector<Attribute> odd = pool("TF", 0);
  odd[4] = Attribute::makeInts("ngram_counts", {0, 3});  // 3 ints cannot be bigrams
  expectError({"TfIdfVectorizer", 9, {x}, odd}, {"node 'op' (TfIdfVectorizer", "whole 2-grams"});
  expectError({"TfIdfVectorizer", 9, {f32({1, 2})}, pool("TF", 0)}, {"int32 or int64"});
  expectError({"TfIdfVectorizer", 9, {x}, pool("BM25", 0)}, {"unknown mode 'BM25'"});
}

}  // namespace
}  // namespace qforge
