// The .npz reader on archives built byte by byte: stored members (numpy.savez, with the zip64
// local headers numpy forces), deflated members (numpy.savez_compressed, deflated by zlib
// here), and archives it must refuse with the file, the member and the reason.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data/data_test_files.h"
#include "data/npz.h"

namespace qforge::data {
namespace {

using testing::expectErrorWith;
using testing::writeBytes;
using testing::ZipMember;

const float kX[6] = {0.5f, -1.0f, 2.0f, 3.25f, -4.0f, 5.5f};
const int64_t kRate[2] = {16000, 22050};

std::string xNpy() {
  return testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", kX, 24);
}
std::string rateNpy() {
  return testing::npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", kRate, 16);
}

void expectContents(const NpzFile& npz) {
  EXPECT_EQ(npz.names(), (std::vector<std::string>{"x", "rate"}));
  EXPECT_TRUE(npz.contains("rate"));
  EXPECT_FALSE(npz.contains("x.npy"));
  auto x = npz.open("x");
  EXPECT_EQ(x->shape(), (std::vector<int64_t>{2, 3}));
  const at::Tensor row1 = x->readRecord(1);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(row1[i].item<float>(), kX[3 + i]);
  const at::Tensor rate = npz.open("rate")->readAll();
  EXPECT_EQ(rate.scalar_type(), at::kLong);
  EXPECT_EQ(rate[0].item<int64_t>(), 16000);
  EXPECT_EQ(rate[1].item<int64_t>(), 22050);
}

TEST(NpzTest, ReadsStoredMembersWithNumpysZip64Headers) {
  const std::string dir = testing::makeTempDir("npz");
  writeBytes(dir + "/plain.npz", testing::zipBytes({{"x.npy", xNpy()}, {"rate.npy", rateNpy()}}));
  expectContents(NpzFile(dir + "/plain.npz"));
  writeBytes(dir + "/zip64.npz",
             testing::zipBytes({{"x.npy", xNpy()}, {"rate.npy", rateNpy()}}, true));
  expectContents(NpzFile(dir + "/zip64.npz"));
}

TEST(NpzTest, ReadsDeflatedMembers) {
  const std::string dir = testing::makeTempDir("npz");
  writeBytes(dir + "/c.npz",
             testing::zipBytes({{"x.npy", xNpy(), 8}, {"rate.npy", rateNpy(), 8}}, true));
  expectContents(NpzFile(dir + "/c.npz"));
}

TEST(NpzTest, RefusesForeignCorruptAndUnsupportedArchives) {
  const std::string dir = testing::makeTempDir("npz");
  writeBytes(dir + "/text.npz", "not a zip at all, just some bytes long enough to scan");
  expectErrorWith([&] { NpzFile(dir + "/text.npz"); }, {"text.npz", "not an .npz"});
  expectErrorWith([&] { NpzFile(dir + "/missing.npz"); }, {"missing.npz"});

  writeBytes(dir + "/bzip.npz", testing::zipBytes({{"x.npy", xNpy(), 12}}));
  expectErrorWith([&] { NpzFile(dir + "/bzip.npz"); },
                  {"bzip.npz", "'x.npy'", "method 12", "stored and deflated"});

  // One flipped byte in the deflated data: the CRC (or the inflater) catches it.
  std::string bytes = testing::zipBytes({{"x.npy", xNpy(), 8}});
  bytes[30 + 5 + 20] ^= 0x5a;
  writeBytes(dir + "/corrupt.npz", bytes);
  NpzFile corrupt(dir + "/corrupt.npz");
  expectErrorWith([&] { corrupt.open("x"); }, {"corrupt.npz", "'x'"});

  writeBytes(dir + "/one.npz", testing::zipBytes({{"x.npy", xNpy()}}));
  expectErrorWith([&] { NpzFile(dir + "/one.npz").open("y"); },
                  {"one.npz", "no array 'y'", "it has: x"});
  // A member that is not a .npy file underneath.
  writeBytes(dir + "/junk.npz", testing::zipBytes({{"x.npy", "junk bytes"}}));
  expectErrorWith([&] { NpzFile(dir + "/junk.npz").open("x"); }, {"junk.npz:x", "not a .npy"});
}

size_t openFileDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

// Refused files and members leave nothing open: a member whose compressed size runs past the
// archive leaked its inflater and temporary file, a .npy refused by its header its FILE (found by
// fuzzing under LeakSanitizer, issue #22).
TEST(NpzTest, RefusalsCloseWhatTheyOpened) {
  const std::string dir = testing::makeTempDir("npz");
  std::string bytes = testing::zipBytes({{"x.npy", xNpy(), 8}});
  const size_t entry = bytes.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(entry, std::string::npos);
  bytes.replace(entry + 20, 4, testing::littleEndian(bytes.size() + 1000, 4));
  writeBytes(dir + "/past_end.npz", bytes);
  writeBytes(dir + "/text.npy", "not an array");
  const size_t before = openFileDescriptors();
  for (int i = 0; i < 20; ++i) {
    NpzFile npz(dir + "/past_end.npz");
    expectErrorWith([&] { npz.open("x"); }, {"past_end.npz", "truncated"});
    expectErrorWith([&] { NpyFile(dir + "/text.npy"); }, {"text.npy", "not a .npy file"});
  }
  EXPECT_EQ(openFileDescriptors(), before);
}

}  // namespace
}  // namespace qforge::data
