// parseJson's refusals: one qforge::Error naming the file for anything nlohmann refuses.
#include "core/json_reader.h"

#include <gtest/gtest.h>

#include "support/checks.h"

namespace qforge::testing {
namespace {

TEST(JsonReaderTest, SyntaxErrorsNameTheByte) {
  EXPECT_EQ(errorOf([] { parseJson("{\"a\": }", "b.json"); }),
            "b.json: not valid JSON at byte 7: fix the syntax there");
}

// A number beyond double's range is nlohmann's out_of_range, not a parse_error: it escaped as an
// internal error (found by fuzzing backend files, issue #22).
TEST(JsonReaderTest, NumbersOutOfRangeAreRefusedInOneLine) {
  EXPECT_EQ(errorOf([] { parseJson("{\"weight\": {\"bits\": 1e999}}", "b.json"); }),
            "b.json: not valid JSON (number overflow parsing '1e999')");
}

}  // namespace
}  // namespace qforge::testing
