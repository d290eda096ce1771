// UTF-8 checks and escaping, against RFC 3629's table of well-formed sequences: overlong forms,
// surrogates, code points above U+10FFFF, truncated and stray bytes are ill-formed.
#include <gtest/gtest.h>

#include <string>

#include "core/utf8.h"

namespace qforge {
namespace {

constexpr size_t kNone = std::string_view::npos;

TEST(Utf8, WellFormedTextPasses) {
  EXPECT_EQ(invalidUtf8Offset(""), kNone);
  EXPECT_EQ(invalidUtf8Offset("/stem/stem.0/Conv_output_0"), kNone);
  EXPECT_EQ(invalidUtf8Offset("h\xC3\xA9llo"), kNone);              // U+00E9
  EXPECT_EQ(invalidUtf8Offset("\xE2\x82\xAC"), kNone);              // U+20AC
  EXPECT_EQ(invalidUtf8Offset("\xF0\x9D\x84\x9E"), kNone);          // U+1D11E
  EXPECT_EQ(invalidUtf8Offset("\xED\x9F\xBF\xEE\x80\x80"), kNone);  // U+D7FF, U+E000
  EXPECT_EQ(invalidUtf8Offset("\xF4\x8F\xBF\xBF"), kNone);          // U+10FFFF
}

TEST(Utf8, IllFormedBytesAreFoundWhereTheyStart) {
  EXPECT_EQ(invalidUtf8Offset("ab\xFF"), 2u);
  EXPECT_EQ(invalidUtf8Offset("\x80"), 0u);              // a lone continuation byte
  EXPECT_EQ(invalidUtf8Offset("a\xC0\xAF"), 1u);         // overlong '/'
  EXPECT_EQ(invalidUtf8Offset("\xC1\xBF"), 0u);          // overlong
  EXPECT_EQ(invalidUtf8Offset("\xE0\x80\xAF"), 0u);      // overlong, 3 bytes
  EXPECT_EQ(invalidUtf8Offset("\xF0\x80\x80\xAF"), 0u);  // overlong, 4 bytes
  EXPECT_EQ(invalidUtf8Offset("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(invalidUtf8Offset("\xF4\x90\x80\x80"), 0u);  // U+110000
  EXPECT_EQ(invalidUtf8Offset("\xF5\x80\x80\x80"), 0u);
  EXPECT_EQ(invalidUtf8Offset("\xE2\x82"), 0u);  // truncated
  EXPECT_EQ(invalidUtf8Offset("\xE2\x82z"), 0u);
  EXPECT_EQ(invalidUtf8Offset(std::string("a\0b", 3)), kNone);  // NUL is a character
}

TEST(Utf8, PrintableEscapesBadBytesAndControlCharacters) {
  EXPECT_EQ(printable("/stem/st\xFFm.0/Conv"), "/stem/st\\xFFm.0/Conv");
  EXPECT_EQ(printable("\x1B[31mred"), "\\x1B[31mred");  // no terminal escapes
  EXPECT_EQ(printable(std::string("a\0b\x7F", 4)), "a\\x00b\\x7F");
  EXPECT_EQ(printable("tab\tand\nnewline"), "tab\tand\nnewline");
  // A name stays on its line.
  EXPECT_EQ(printableName("tab\tand\nnewline\x1B"), "tab\tand\\x0Anewline\\x1B");
  EXPECT_EQ(printableName("r\xC3\xA9lu\xFF"), "r\xC3\xA9lu\\xFF");
  EXPECT_EQ(printable("\xE2\x82\xAC \xED\xA0\x80"), "\xE2\x82\xAC \\xED\\xA0\\x80");
  EXPECT_EQ(printable("\xE2\x82"), "\\xE2\\x82");
  const std::string escaped = printable("\xC0\xAF\xFE\x80\xF4\x90\x80\x80");
  EXPECT_EQ(invalidUtf8Offset(escaped), kNone);
  EXPECT_EQ(escaped, "\\xC0\\xAF\\xFE\\x80\\xF4\\x90\\x80\\x80");
}

}  // namespace
}  // namespace qforge
