// Renders an HTML file in Debian's headless Chromium and returns the DOM after its scripts ran,
// for tests of pages qforge writes (the analysis report). A missing browser is a failure, never a
// skip: scripts/install-deps.sh installs it.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace qforge::testing {

// `chromium --headless --dump-dom file://<html_path>` in a fresh profile, killed with everything
// it started after `timeout_seconds`; its stderr (dbus noise) is discarded. On success `*dom` is
// the serialized document. Fails with "chromium is not installed: run scripts/install-deps.sh"
// when `chromium` (a name looked up on PATH, or a path) is not an executable; use it as
// ASSERT_TRUE(renderDom(path, &dom)).
::testing::AssertionResult renderDom(const std::string& html_path, std::string* dom,
                                     const std::string& chromium = "chromium",
                                     int timeout_seconds = 60);

}  // namespace qforge::testing
