// The .npy and IDX readers (and the .npy writer) on files written byte by byte by the tests.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "data/data_test_files.h"
#include "data/idx.h"
#include "data/npy.h"
#include "support/scoped_limits.h"

namespace qforge::data {
namespace {

using testing::expectErrorWith;
using testing::gzipped;
using testing::idxBytes;
using testing::npyBytes;
using testing::writeBytes;

TEST(NpyTest, ReadsHandWrittenFloatArrayAndRecords) {
  const std::string dir = testing::makeTempDir("npy");
  const float values[6] = {1.5f, -2, 3, 4, 5.25f, 6};
  writeBytes(dir + "/a.npy",
             npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", values, 24));
  NpyFile f(dir + "/a.npy");
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(f.dtype(), at::kFloat);
  at::Tensor all = f.readAll();
  EXPECT_EQ(all[0][0].item<float>(), 1.5f);
  EXPECT_EQ(all[2][0].item<float>(), 5.25f);
  at::Tensor row = f.readRecord(1);
  EXPECT_EQ(row.sizes(), at::IntArrayRef({2}));
  EXPECT_EQ(row[0].item<float>(), 3.0f);
  EXPECT_EQ(row[1].item<float>(), 4.0f);
  expectErrorWith([&] { f.readRecord(3); }, {"a.npy", "out of range"});
}

TEST(NpyTest, ReadsIntegerAndByteArrays) {
  const std::string dir = testing::makeTempDir("npy");
  const int64_t longs[3] = {7, 0, 123456789012};
  writeBytes(dir + "/l.npy",
             npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", longs, 24));
  at::Tensor l = NpyFile(dir + "/l.npy").readAll();
  EXPECT_EQ(l.scalar_type(), at::kLong);
  EXPECT_EQ(l[2].item<int64_t>(), 123456789012);
  const uint8_t bytes[4] = {0, 9, 200, 255};
  writeBytes(dir + "/b.npy",
             npyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2), }", bytes, 4));
  at::Tensor b = NpyFile(dir + "/b.npy").readAll();
  EXPECT_EQ(b.scalar_type(), at::kByte);
  EXPECT_EQ(b[1][0].item<uint8_t>(), 200);
}

TEST(NpyTest, WriterRoundTripsAndRefusesMissingRows) {
  const std::string dir = testing::makeTempDir("npy");
  {
    NpyWriter w(dir + "/out.npy", at::kFloat, {3, 2});
    w.append(at::tensor({1.0f, 2.0f}).reshape({1, 2}));
    w.append(at::tensor({3.0f, 4.0f, 5.0f, 6.0f}).reshape({2, 2}));
    w.close();
  }
  NpyFile f(dir + "/out.npy");
  EXPECT_EQ(f.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(at::equal(f.readAll(), at::arange(1, 7, at::kFloat).reshape({3, 2})));
  // The header is what NumPy writes: a dict padded with spaces to a multiple of 64 bytes.
  const std::string header = npyHeader(at::kFloat, {3, 2});
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_NE(header.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"),
            std::string::npos);
  EXPECT_NE(npyHeader(at::kLong, {5}).find("'shape': (5,)"), std::string::npos);

  NpyWriter short_writer(dir + "/short.npy", at::kFloat, {3, 2});
  short_writer.append(at::zeros({1, 2}));
  expectErrorWith([&] { short_writer.close(); }, {"short.npy", "1 of 3 rows"});
  expectErrorWith([&] { NpyFile(dir + "/short.npy"); }, {"short.npy"});  // never appeared
  NpyWriter w2(dir + "/w2.npy", at::kFloat, {1, 2});
  expectErrorWith([&] { w2.append(at::zeros({1, 3})); }, {"w2.npy", "do not fit"});
}

TEST(NpyTest, RejectsBadFilesNamingThem) {
  const std::string dir = testing::makeTempDir("npy");
  const float v[4] = {0, 0, 0, 0};
  writeBytes(dir + "/text.npy", "hello, I am not an array");
  expectErrorWith([&] { NpyFile(dir + "/text.npy"); }, {"text.npy", "not a .npy file"});
  writeBytes(dir + "/big.npy",
             npyBytes("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", v, 16));
  expectErrorWith([&] { NpyFile(dir + "/big.npy"); }, {"big.npy", "big-endian"});
  writeBytes(dir + "/fortran.npy",
             npyBytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", v, 16));
  expectErrorWith([&] { NpyFile(dir + "/fortran.npy"); }, {"fortran.npy", "Fortran"});
  writeBytes(dir + "/complex.npy",
             npyBytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", v, 16));
  expectErrorWith([&] { NpyFile(dir + "/complex.npy"); }, {"complex.npy", "not supported"});
  writeBytes(dir + "/cut.npy",
             npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", v, 16));
  expectErrorWith([&] { NpyFile(dir + "/cut.npy"); }, {"cut.npy", "needs"});
  expectErrorWith([&] { NpyFile(dir + "/missing.npy"); }, {"cannot open", "missing.npy"});
}

// Shapes from fuzzed headers (issue #22): a negative dim reached ATen (c10::Error, an internal
// error), a product past int64_t was signed overflow.
TEST(NpyTest, RejectsNegativeAndOverflowingShapes) {
  const std::string dir = testing::makeTempDir("npy");
  const float v[4] = {0, 0, 0, 0};
  writeBytes(
      dir + "/negative.npy",
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (11, -111111111), }", v, 16));
  expectErrorWith([&] { NpyFile(dir + "/negative.npy"); }, {"negative.npy", "negative dimension"});
  writeBytes(
      dir + "/huge.npy",
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (11, 1111111111111111111), }", v,
               16));
  expectErrorWith([&] { NpyFile(dir + "/huge.npy"); },
                  {"huge.npy", "more bytes than any file can"});
}

// An empty array is still a shape: ATen's strides multiply every dim but the zero ones, so
// (0, 2^40, 2^40) overflowed them although it holds no bytes.
TEST(NpyTest, RejectsAnEmptyShapeWhoseStridesOverflow) {
  const std::string dir = testing::makeTempDir("npy");
  writeBytes(dir + "/empty.npy",
             npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, "
                      "1099511627776), }",
                      nullptr, 0));
  expectErrorWith([&] { NpyFile(dir + "/empty.npy"); },
                  {"empty.npy", "more bytes than any file can"});
  writeBytes(dir + "/fine.npy",
             npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", nullptr, 0));
  EXPECT_EQ(NpyFile(dir + "/fine.npy").shape(), (std::vector<int64_t>{0, 3}));
}

TEST(IdxTest, ReadsPlainAndGzippedFilesAlike) {
  const std::string dir = testing::makeTempDir("idx");
  std::vector<uint8_t> pixels(3 * 2 * 2);
  for (size_t i = 0; i < pixels.size(); ++i)
    pixels[i] = static_cast<uint8_t>(10 * i);
  const std::string bytes = idxBytes({3, 2, 2}, pixels);
  writeBytes(dir + "/plain-ubyte", bytes);
  writeBytes(dir + "/packed-ubyte.gz", gzipped(bytes));
  for (const std::string name : {"plain-ubyte", "packed-ubyte.gz"}) {
    IdxFile f(dir + "/" + name);
    EXPECT_EQ(f.dims(), (std::vector<int64_t>{3, 2, 2})) << name;
    EXPECT_EQ(f.recordBytes(), 4);
    uint8_t record[4];
    f.read(2, record);  // out of order on purpose: the gzip reader must inflate ahead
    EXPECT_EQ(record[0], 80);
    EXPECT_EQ(record[3], 110);
    f.read(0, record);
    EXPECT_EQ(record[1], 10);
  }
}

// A fuzzed header whose dims multiply past int64_t (signed overflow, issue #22), and one past any
// file size, gzipped too (where the size is not known up front): refused from the header.
TEST(IdxTest, RejectsDimsThatHoldMoreBytesThanAFileCan) {
  const std::string dir = testing::makeTempDir("idx");
  writeBytes(dir + "/huge-ubyte", idxBytes({10243, 7077883, 4294914299u}, {1, 2, 3}));
  expectErrorWith([&] { IdxFile(dir + "/huge-ubyte"); },
                  {"huge-ubyte", "[10243,7077883,4294914299]", "more bytes than any file can"});
  writeBytes(dir + "/huge-ubyte.gz", gzipped(idxBytes({0, 4294967295u, 4294967295u}, {})));
  expectErrorWith([&] { IdxFile(dir + "/huge-ubyte.gz"); },
                  {"huge-ubyte.gz", "more bytes than any file can"});
}

// A record is read into a float tensor whole: one above the tensor limit is refused from the
// header, before a gzipped file is inflated that far.
TEST(IdxTest, ARecordAboveTheTensorLimitIsRefusedFromTheHeader) {
  const std::string dir = testing::makeTempDir("idx");
  writeBytes(dir + "/wide-ubyte.gz", gzipped(idxBytes({1, 20000, 20000}, {1, 2, 3})));
  ResourceLimits limits;
  limits.max_tensor_bytes = int64_t{256} << 20;
  testing::ScopedLimits scope(limits);
  expectErrorWith([&] { IdxFile(dir + "/wide-ubyte.gz"); },
                  {"one record of", "wide-ubyte.gz", "[1,20000,20000]", "would take 1.5 GiB",
                   "above the limit of 256.0 MiB", "--max-tensor-bytes"});
}

TEST(IdxTest, RejectsTruncatedAndForeignFiles) {
  const std::string dir = testing::makeTempDir("idx");
  std::string bytes = idxBytes({4, 2, 2}, std::vector<uint8_t>(16, 1));
  bytes.resize(bytes.size() - 5);
  writeBytes(dir + "/cut-ubyte", bytes);
  expectErrorWith([&] { IdxFile(dir + "/cut-ubyte"); }, {"cut-ubyte", "ends early"});
  writeBytes(dir + "/cut-ubyte.gz", gzipped(bytes));
  IdxFile gz(dir + "/cut-ubyte.gz");  // a gzip stream's length is known only once inflated
  uint8_t record[4];
  gz.read(0, record);
  expectErrorWith([&] { gz.read(3, record); }, {"cut-ubyte.gz", "ends early"});
  writeBytes(dir + "/png-ubyte", "\x89PNG\r\n\x1a\n....");
  expectErrorWith([&] { IdxFile(dir + "/png-ubyte"); }, {"png-ubyte", "not an IDX file"});
  std::string floats = idxBytes({1}, {0, 0, 0, 0});
  floats[2] = 0x0D;
  writeBytes(dir + "/float-ubyte", floats);
  expectErrorWith([&] { IdxFile(dir + "/float-ubyte"); }, {"float-ubyte", "not supported"});
  std::string corrupt = gzipped(idxBytes({2, 2}, {1, 2, 3, 4}));
  for (size_t i = 12; i < corrupt.size() - 8; ++i)
    corrupt[i] = static_cast<char>(0xff);
  writeBytes(dir + "/corrupt-ubyte.gz", corrupt);
  expectErrorWith([&] { IdxFile(dir + "/corrupt-ubyte.gz"); }, {"corrupt-ubyte.gz"});
}

}  // namespace
}  // namespace qforge::data
