// Reading the graph text form (grammar in ir/dump.h) token by token, one line at a time; every
// error names the line and column. parse.cpp assembles the graph from these pieces.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ir/attribute.h"
#include "ir/graph.h"

namespace qforge::text {

// Throws qforge::Error "graph text line <line>, column <column>: <what>".
[[noreturn]] void failAt(size_t line, size_t column, const std::string& what);

// One line of the text being read; every error names the line and column.
class LineReader {
 public:
  LineReader(std::string text, size_t line) : text_(std::move(text)), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const { failAt(line_, pos_ + 1, what); }
  size_t line() const { return line_; }
  // The column of the next token (spaces skipped).
  size_t column() {
    skipSpaces();
    return pos_ + 1;
  }

  char peek() {
    skipSpaces();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool done() { return peek() == '\0'; }

  bool accept(const std::string& token) {
    skipSpaces();
    if (text_.compare(pos_, token.size(), token) != 0) return false;
    pos_ += token.size();
    return true;
  }
  void expect(const std::string& token, const std::string& context) {
    if (!accept(token)) fail("expected '" + token + "' " + context + ", found " + found());
  }
  void expectEnd(const std::string& context) {
    if (!done()) fail("unexpected " + found() + " " + context);
  }

  // What is at the cursor, for error messages.
  std::string found() {
    if (done()) return "the end of the line";
    const std::string rest = text_.substr(pos_, 20);
    return "'" + rest + (pos_ + 20 < text_.size() ? "...'" : "'");
  }

  // The longest run of characters satisfying `keep` (possibly empty).
  template <typename Keep>
  std::string run(Keep keep) {
    skipSpaces();
    const size_t start = pos_;
    while (pos_ < text_.size() && keep(text_[pos_]))
      ++pos_;
    return text_.substr(start, pos_ - start);
  }

  std::string quoted();
  std::string restOfLine() {
    skipSpaces();
    std::string rest = text_.substr(pos_);
    pos_ = text_.size();
    while (!rest.empty() && rest.back() == ' ')
      rest.pop_back();
    return rest;
  }

 private:
  void skipSpaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t'))
      ++pos_;
  }

  std::string text_;
  size_t line_;
  size_t pos_ = 0;
};

// Characters of attribute names and (with ':' and '-') of "domain::Op".
bool isAttributeNameChar(char c);

// An integer token; `what` says where, for the error.
int64_t readInt(LineReader& r, const std::string& what);

// float32[N,3,?] or float32 (rank unknown).
TensorType readType(LineReader& r);

struct TypedName {
  std::string name;
  std::optional<TensorType> type;
  size_t column = 0;       // of the '%'
  size_t type_column = 0;  // of the type, when there is one
};

// %name or %"name", then ": type" when present.
TypedName readValue(LineReader& r);

// {v,v,...} as the tensor's element type, row-major; zeros when `r` holds no values here.
// Errors about the type point at `type_column`.
at::Tensor readTensorValues(LineReader& r, const TensorType& type, size_t type_column,
                            const std::string& what);

// name=value, the kind told by the value's spelling.
Attribute readAttribute(LineReader& r);

}  // namespace qforge::text
