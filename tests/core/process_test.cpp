// Running a program without a shell: its stdout and stderr apart, its exit code or signal, a
// timeout that kills it, and a program that is not there.
#include "core/process.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "core/error.h"

namespace qforge {
namespace {

TEST(Process, CapturesStdoutAndStderrApartAndTheExitCode) {
  const ProcessResult r =
      runProcess({"/bin/sh", "-c", "echo out1; echo err1 >&2; echo out2; exit 3"});
  EXPECT_FALSE(r.timed_out);
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 3);
  EXPECT_EQ(r.out, "out1\nout2\n");
  EXPECT_EQ(r.err, "err1\n");
  EXPECT_EQ(exitDescription(r, 0), "exited with code 3");
}

TEST(Process, ReadsMoreThanAPipeHoldsOnBothStreams) {
  // 200 KB on each: a reader that drained one stream only would deadlock the child.
  const ProcessResult r = runProcess(
      {"/bin/sh", "-c", "head -c 200000 /dev/zero; head -c 200000 /dev/zero >&2; echo done"});
  EXPECT_EQ(r.out.size(), 200005u);
  EXPECT_EQ(r.err.size(), 200000u);
  EXPECT_EQ(lastLine(r.out.substr(200000)), "done");
}

TEST(Process, ATimeoutKillsTheChild) {
  const ProcessResult r = runProcess({"/bin/sleep", "30"}, 0.2);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(exitDescription(r, 0.2), "did not finish within 0.2 s");
  const ProcessResult killed = runProcess({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(exitDescription(killed, 0), "was killed by signal 9 (Killed)");
}

TEST(Process, AMissingProgramIsAnErrorAndFindExecutableLooksOnThePath) {
  EXPECT_THROW(runProcess({"/no/such/program"}), Error);
  EXPECT_EQ(findExecutable("/bin/sh"), "/bin/sh");
  EXPECT_EQ(findExecutable("/no/such/program"), "");
  EXPECT_FALSE(findExecutable("sh").empty());
  EXPECT_EQ(lastLine("a\nb  \n\n  \n"), "b");
  EXPECT_EQ(lastLine("  only "), "only");
  EXPECT_EQ(lastLine("\n\n"), "");
}

}  // namespace
}  // namespace qforge
