// Image decoding and transforms, class folders and list files, on images the tests write.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/files.h"
#include "data/data_test_files.h"
#include "data/dataset.h"
#include "data/image.h"
#include "support/scoped_limits.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace qforge::data {
namespace {

using testing::expectErrorWith;
using testing::writeBytes;

// Writes a PNG whose pixel (y, x, c) is `value(y, x, c)`.
template <typename F>
void writePng(const std::string& path, int h, int w, int c, F value) {
  std::vector<uint8_t> px(h * w * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        px[(y * w + x) * c + k] = value(y, x, k);
  ASSERT_NE(stbi_write_png(path.c_str(), w, h, c, px.data(), w * c), 0) << path;
}

TEST(ImageTest, DecodesPngExactly) {
  const std::string dir = testing::makeTempDir("img");
  writePng(dir + "/rgb.png", 2, 3, 3, [](int y, int x, int c) { return 10 * y + 3 * x + c; });
  at::Tensor t = decodeImage(dir + "/rgb.png");
  ASSERT_EQ(t.sizes(), at::IntArrayRef({2, 3, 3}));
  EXPECT_EQ(t.scalar_type(), at::kByte);
  EXPECT_EQ(t[1][2][1].item<uint8_t>(), 10 + 6 + 1);
  EXPECT_EQ(t[0][1][2].item<uint8_t>(), 3 + 2);
  writePng(dir + "/gray.png", 4, 5, 1, [](int y, int x, int) { return 40 * y + x; });
  EXPECT_EQ(decodeImage(dir + "/gray.png").sizes(), at::IntArrayRef({4, 5, 1}));
}

TEST(ImageTest, DecodesJpegApproximately) {
  const std::string dir = testing::makeTempDir("img");
  std::vector<uint8_t> px(8 * 8 * 3, 0);
  for (size_t i = 0; i < px.size(); i += 3)
    px[i] = 200;  // flat red: JPEG keeps it nearly so
  ASSERT_NE(stbi_write_jpg((dir + "/red.jpg").c_str(), 8, 8, 3, px.data(), 95), 0);
  at::Tensor t = decodeImage(dir + "/red.jpg").to(at::kInt);
  ASSERT_EQ(t.sizes(), at::IntArrayRef({8, 8, 3}));
  EXPECT_LE((t.select(2, 0) - 200).abs().max().item<int>(), 3);
  EXPECT_LE(t.select(2, 1).abs().max().item<int>(), 3);
}

// Debian's stb_image 2.27 writes past a Huffman table whose DHT segment declares more than 256
// codes (a fuzzed JPEG, issue #22): decodeImage refuses the file before stb reads it.
TEST(ImageTest, RefusesAJpegHuffmanTableOfMoreThan256Codes) {
  const std::string dir = testing::makeTempDir("img");
  std::vector<uint8_t> px(8 * 8 * 3, 100);
  ASSERT_NE(stbi_write_jpg((dir + "/ok.jpg").c_str(), 8, 8, 3, px.data(), 90), 0);
  std::string bytes;
  {
    std::ifstream in(dir + "/ok.jpg", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t dht = bytes.find("\xff\xc4");
  ASSERT_NE(dht, std::string::npos);
  // Segment: FF C4, length (2), table class/id (1), then the 16 code counts.
  for (size_t k = 0; k < 16; ++k)
    bytes[dht + 5 + k] = static_cast<char>(20);  // 320 codes
  writeBytes(dir + "/bad_dht.jpg", bytes);
  expectErrorWith([&] { decodeImage(dir + "/bad_dht.jpg"); },
                  {"bad_dht.jpg", "corrupt JPEG", "320 codes, at most 256"});
}

// stb 2.27 decodes a PNM header without digits to a 0x0 image, and the resize divided by zero
// (a fuzzed file, issue #22).
TEST(ImageTest, AnImageWithoutPixelsIsRefused) {
  const std::string dir = testing::makeTempDir("img");
  writeBytes(dir + "/empty.pgm", std::string("P5\n\xac/u\xc0", 7));
  ImageOptions o;
  o.resize = 8;
  expectErrorWith([&] { transformImage(decodeImage(dir + "/empty.pgm"), o, "empty.pgm"); },
                  {"empty.pgm", "no pixels (0x0)"});
}

// An empty IDAT chunk (valid PNG, nothing in it) made stb 2.27 memcpy into a null buffer (UBSan
// on a fuzzed PNG, issue #22): such chunks are dropped before stb decodes, and the pixels are as
// without them. A PNG whose only data chunk is empty is still refused.
TEST(ImageTest, EmptyPngDataChunksAreDroppedBeforeDecoding) {
  const std::string dir = testing::makeTempDir("img");
  writePng(dir + "/ok.png", 3, 4, 3, [](int y, int x, int c) { return 20 * y + 5 * x + c; });
  const std::string png = readFile(dir + "/ok.png");
  const size_t idat = png.find("IDAT") - 4;  // the chunk's length field
  // Length 0, "IDAT", and the CRC-32 of "IDAT" (0x35AF061E), as a PNG encoder writes it.
  const std::string empty_idat("\x00\x00\x00\x00IDAT\x35\xaf\x06\x1e", 12);
  writeBytes(dir + "/empty_first.png", png.substr(0, idat) + empty_idat + png.substr(idat));
  EXPECT_TRUE(at::equal(decodeImage(dir + "/empty_first.png"), decodeImage(dir + "/ok.png")));
  const size_t iend = png.find("IEND") - 4;
  writeBytes(dir + "/only_empty.png", png.substr(0, idat) + empty_idat + png.substr(iend));
  expectErrorWith([&] { decodeImage(dir + "/only_empty.png"); },
                  {"only_empty.png", "cannot decode"});
}

// A header of a few bytes can declare any size; stb allocated it before finding the pixels missing
// (a fuzzed TGA asked for 3 GiB, issue #22). The size is checked against the tensor limit first.
TEST(ImageTest, AnImageAboveTheTensorLimitIsRefusedFromItsHeader) {
  const std::string dir = testing::makeTempDir("img");
  writeBytes(dir + "/wide.pgm", "P5\n20000 20000\n255\n\x01\x02");
  ResourceLimits limits;
  limits.max_tensor_bytes = int64_t{256} << 20;
  testing::ScopedLimits scope(limits);
  expectErrorWith([&] { decodeImage(dir + "/wide.pgm"); },
                  {"image '", "wide.pgm", "would take 1.5 GiB", "above the limit of 256.0 MiB"});
}

TEST(ImageTest, DecodeErrorsNameTheFile) {
  const std::string dir = testing::makeTempDir("img");
  writeBytes(dir + "/broken.png", "\x89PNG\r\n\x1a\nthis is not really a png");
  expectErrorWith([&] { decodeImage(dir + "/broken.png"); }, {"broken.png", "cannot decode"});
  writeBytes(dir + "/empty.png", "");
  expectErrorWith([&] { decodeImage(dir + "/empty.png"); }, {"empty.png", "empty"});
  expectErrorWith([&] { decodeImage(dir + "/nothere.png"); }, {"nothere.png", "cannot open"});
}

TEST(ImageTest, NormalisesPerChannelInChwOrHwc) {
  // 1x2 RGB image: pixels (0, 51, 102) and (255, 153, 204).
  at::Tensor px = at::tensor({0, 51, 102, 255, 153, 204}, at::kByte).reshape({1, 2, 3});
  ImageOptions o;
  o.mean = {0.5, 0.2, 0.4};
  o.std = {0.5, 0.1, 0.2};
  at::Tensor chw = transformImage(px, o, "x");
  ASSERT_EQ(chw.sizes(), at::IntArrayRef({3, 1, 2}));
  // (v / 255 - mean) / std, by hand: R 0 -> -1, R 255 -> 1; G 51 -> 0, G 153 -> 4;
  // B 102 -> 0, B 204 -> 2.
  const float want[3][2] = {{-1, 1}, {0, 4}, {0, 2}};
  for (int c = 0; c < 3; ++c)
    for (int x = 0; x < 2; ++x)
      EXPECT_NEAR(chw[c][0][x].item<float>(), want[c][x], 1e-5);
  o.nhwc = true;
  at::Tensor hwc = transformImage(px, o, "x");
  ASSERT_EQ(hwc.sizes(), at::IntArrayRef({1, 2, 3}));
  EXPECT_NEAR(hwc[0][1][1].item<float>(), 4, 1e-5);
  ImageOptions bgr;
  bgr.bgr = true;
  at::Tensor b = transformImage(px, bgr, "x");
  EXPECT_NEAR(b[0][0][1].item<float>(), 204 / 255.0, 1e-6);  // blue first
  EXPECT_NEAR(b[2][0][1].item<float>(), 1.0, 1e-6);          // red last
}

TEST(ImageTest, ResizesShorterSideAndCentreCrops) {
  at::Tensor px = at::arange(4 * 6, at::kFloat).reshape({4, 6, 1}).to(at::kByte);
  ImageOptions crop;
  crop.crop_height = 2;
  crop.crop_width = 2;
  at::Tensor c = transformImage(px, crop, "x") * 255;
  ASSERT_EQ(c.sizes(), at::IntArrayRef({1, 2, 2}));
  // Rows 1..2, columns 2..3 of the 4x6 ramp: values 8, 9 / 14, 15.
  EXPECT_NEAR(c[0][0][0].item<float>(), 8, 1e-4);
  EXPECT_NEAR(c[0][1][1].item<float>(), 15, 1e-4);
  ImageOptions resize;
  resize.resize = 2;  // shorter side 4 -> 2, longer 6 -> 3
  EXPECT_EQ(transformImage(px, resize, "x").sizes(), at::IntArrayRef({1, 2, 3}));
  ImageOptions too_big;
  too_big.crop_height = 5;
  expectErrorWith([&] { transformImage(px, too_big, "img.png"); }, {"img.png", "larger"});
}

TEST(ImageTest, WrongChannelCountAndBadOptionsAreErrors) {
  at::Tensor rgba = at::zeros({2, 2, 4}, at::kByte);
  ImageOptions want_rgb;
  want_rgb.channels = 3;
  expectErrorWith([&] { transformImage(rgba, want_rgb, "'cat.png'"); },
                  {"'cat.png'", "4 channels (RGBA)", "wants 3 (RGB)"});
  ImageOptions zero_std;
  zero_std.std = {0};
  expectErrorWith([&] { zero_std.validate(); }, {"--std"});
  ImageOptions mismatch;
  mismatch.channels = 3;
  mismatch.mean = {0.1, 0.2};
  expectErrorWith([&] { mismatch.validate(); }, {"--mean has 2 values for 3 channels"});
}

TEST(FolderDatasetTest, ClassFoldersGiveSortedLabels) {
  const std::string dir = testing::makeTempDir("folder");
  std::filesystem::create_directories(dir + "/b_dog");
  std::filesystem::create_directories(dir + "/a_cat");
  writePng(dir + "/a_cat/1.png", 3, 3, 1, [](int, int, int) { return 10; });
  writePng(dir + "/a_cat/2.png", 3, 3, 1, [](int, int, int) { return 20; });
  writePng(dir + "/b_dog/x.PNG", 3, 3, 1, [](int, int, int) { return 30; });
  writeBytes(dir + "/b_dog/notes.txt", "not a sample");  // ignored
  auto ds = openDataset(dir);
  ASSERT_EQ(ds->size(), 3);
  EXPECT_TRUE(ds->hasLabels());
  Sample s0 = ds->get(0), s2 = ds->get(2);
  EXPECT_EQ(s0.label, 0);
  EXPECT_EQ(s2.label, 1);
  EXPECT_NEAR(s2.input[0][1][1].item<float>(), 30 / 255.0, 1e-6);
  EXPECT_NE(s2.origin.find("x.PNG"), std::string::npos);
}

TEST(FolderDatasetTest, FlatFolderOfNpyIsUnlabelled) {
  const std::string dir = testing::makeTempDir("flat");
  const float v[2] = {0.25f, -1};
  writeBytes(dir + "/s0.npy",
             testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", v, 8));
  auto ds = openDataset("folder:" + dir);
  ASSERT_EQ(ds->size(), 1);
  EXPECT_FALSE(ds->hasLabels());
  EXPECT_EQ(ds->get(0).input[1].item<float>(), -1.0f);
}

TEST(FolderDatasetTest, EmptyOrMissingFoldersAreErrors) {
  const std::string dir = testing::makeTempDir("empty");
  std::filesystem::create_directories(dir + "/class_a");
  expectErrorWith([&] { openDataset(dir); }, {dir, "no samples"});
  expectErrorWith([&] { openDataset(dir + "/nope"); }, {"nope", "not found"});
  expectErrorWith([&] { openDataset("fashion-mnist:validation"); }, {"validation"});
  DataOptions with_labels;
  with_labels.labels_path = "labels.npy";
  expectErrorWith([&] { openDataset(dir, with_labels); }, {"--labels"});
}

TEST(ListDatasetTest, RelativePathsLabelsAndComments) {
  const std::string dir = testing::makeTempDir("list");
  std::filesystem::create_directories(dir + "/img");
  writePng(dir + "/img/a.png", 2, 2, 3, [](int, int, int c) { return 100 + c; });
  writePng(dir + "/img/b c.png", 2, 2, 3, [](int, int, int) { return 7; });
  writeBytes(dir + "/cal.txt", "# calibration set\nimg/a.png 4\n\nimg/b c.png\t2\n");
  auto ds = openDataset(dir + "/cal.txt");
  ASSERT_EQ(ds->size(), 2);
  EXPECT_TRUE(ds->hasLabels());
  EXPECT_EQ(ds->get(0).label, 4);
  Sample b = ds->get(1);
  EXPECT_EQ(b.label, 2);
  EXPECT_NEAR(b.input[2][0][0].item<float>(), 7 / 255.0, 1e-6);

  writeBytes(dir + "/unlabelled.lst", "img/a.png\n");
  auto u = openDataset(dir + "/unlabelled.lst");
  EXPECT_FALSE(u->hasLabels());
  EXPECT_EQ(u->get(0).label, -1);

  writeBytes(dir + "/mixed.txt", "img/a.png 1\nimg/a.png\n");
  expectErrorWith([&] { openDataset(dir + "/mixed.txt"); }, {"mixed.txt", "line 2"});
  writeBytes(dir + "/missing.txt", "img/a.png\nimg/gone.png\n");
  auto m = openDataset("list:" + dir + "/missing.txt");
  expectErrorWith([&] { m->get(1); }, {"missing.txt", "line 2", "gone.png"});
  writeBytes(dir + "/blank.txt", "# nothing\n\n");
  expectErrorWith([&] { openDataset(dir + "/blank.txt"); }, {"blank.txt", "empty"});
}

}  // namespace
}  // namespace qforge::data
