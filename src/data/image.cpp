#include "data/image.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/files.h"
#include "core/resource_limits.h"

// stb_image is a single-header library: this translation unit holds its implementation.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO   // decode from memory only: file errors are reported by readFile
#define STBI_NO_LINEAR  // no HDR/float paths
#define STBI_NO_HDR
#include <stb/stb_image.h>

namespace qforge::data {

namespace {

const char* channelWord(int64_t c) {
  switch (c) {
    case 1:
      return " (gray)";
    case 2:
      return " (gray+alpha)";
    case 3:
      return " (RGB)";
    case 4:
      return " (RGBA)";
    default:
      return "";
  }
}

// Debian 12's stb_image (2.27) builds a JPEG Huffman table from a DHT segment's 16 code counts
// without checking that they add up to at most 256, and writes past the table when they do not
// (stb 2.28 refuses such a file; a fuzzed JPEG found it, issue #22). This walks the file's
// segments as stb does (a DHT's tables are read while its length lasts, each 17 bytes plus its
// codes) and refuses the file first.
void checkJpegHuffmanTables(const std::string& bytes, const std::string& path) {
  const auto byte = [&](size_t i) { return i < bytes.size() ? uint8_t(bytes[i]) : uint8_t{0}; };
  // stb takes any run of 0xFF fill bytes before a marker, the start-of-image one too.
  size_t i = 1;
  while (byte(0) == 0xFF && i < bytes.size() && byte(i) == 0xFF)
    ++i;
  if (byte(0) != 0xFF || byte(i) != 0xD8) return;  // not a JPEG
  ++i;
  while (i + 1 < bytes.size()) {
    const uint8_t marker = byte(i + 1);
    // Outside segments: entropy-coded data, fill bytes, stuffed zeros, restart markers.
    if (byte(i) != 0xFF || marker == 0xFF || marker == 0x00 || marker == 0x01 || marker == 0xD8 ||
        (marker >= 0xD0 && marker <= 0xD7)) {
      ++i;
      continue;
    }
    if (marker == 0xD9) return;  // end of image
    const int64_t length = (int64_t{byte(i + 2)} << 8) | byte(i + 3);
    if (marker == 0xC4) {
      size_t p = i + 4;
      for (int64_t left = length - 2; left > 0 && p < bytes.size();) {
        int codes = 0;
        for (size_t k = 1; k <= 16; ++k)
          codes += byte(p + k);
        require(codes <= 256, "cannot decode image '" + path +
                                  "': corrupt JPEG (a Huffman table declares " +
                                  std::to_string(codes) + " codes, at most 256 exist)");
        p += 17 + static_cast<size_t>(codes);
        left -= 17 + codes;
      }
    }
    i += 2 + static_cast<size_t>(length);
  }
}

// stb 2.27 reads a PNG's first data chunk into a buffer it allocates by the chunk's length, and
// with a length of 0 passes that null buffer to memcpy (undefined behaviour, which lets the
// compiler drop stb's later null checks; found by fuzzing under UBSan, issue #22). Empty IDAT
// chunks carry nothing, so the bytes are given to stb without them. Anything else about the
// chunks is stb's to judge: the walk stops where a chunk does not fit.
std::string withoutEmptyPngData(const std::string& bytes) {
  static const std::string kSignature("\x89PNG\r\n\x1a\n", 8);
  if (bytes.compare(0, kSignature.size(), kSignature) != 0) return bytes;
  const auto u32 = [&](size_t i) {
    return (uint32_t{uint8_t(bytes[i])} << 24) | (uint32_t{uint8_t(bytes[i + 1])} << 16) |
           (uint32_t{uint8_t(bytes[i + 2])} << 8) | uint8_t(bytes[i + 3]);
  };
  std::string kept = kSignature;
  bool dropped = false;
  size_t i = kSignature.size();
  while (bytes.size() - i >= 12 && u32(i) <= bytes.size() - i - 12) {
    const size_t chunk = 12 + size_t{u32(i)};
    if (u32(i) == 0 && bytes.compare(i + 4, 4, "IDAT") == 0) {
      dropped = true;
    } else {
      kept.append(bytes, i, chunk);
    }
    i += chunk;
  }
  if (!dropped) return bytes;
  kept.append(bytes, i, std::string::npos);
  return kept;
}

}  // namespace

at::Tensor decodeImage(const std::string& path) {
  const std::string bytes = withoutEmptyPngData(readFile(path));
  require(!bytes.empty(), "cannot decode image '" + path + "': the file is empty");
  require(bytes.size() <= static_cast<size_t>(std::numeric_limits<int>::max()),
          "cannot decode image '" + path + "': files above 2 GiB are not read as images");
  checkJpegHuffmanTables(bytes, path);
  int w = 0, h = 0, c = 0;
  // A few header bytes can declare 2^24 x 2^24 pixels; stb would allocate them before finding the
  // data missing. The image becomes a float tensor, so that is the size checked.
  if (stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                            static_cast<int>(bytes.size()), &w, &h, &c)) {
    requireTensorBytes(tensorBytes({h, w, c}, sizeof(float)), "image '" + path + "'");
  }
  stbi_uc* pixels = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                          static_cast<int>(bytes.size()), &w, &h, &c, 0);
  if (!pixels) {
    throw Error("cannot decode image '" + path + "': " + stbi_failure_reason() +
                " (PNG, JPEG, BMP, GIF, TGA, PNM are readable)");
  }
  at::Tensor t = at::from_blob(pixels, {h, w, c}, at::kByte).clone();
  stbi_image_free(pixels);
  return t;
}

void ImageOptions::validate() const {
  require(channels >= 0 && resize >= 0 && crop_height >= 0 && crop_width >= 0,
          "image sizes and channel counts must not be negative");
  require(!mean.empty() && !std.empty(), "--mean and --std need at least one value");
  for (double s : std) {
    require(std::isfinite(s) && s != 0, "--std values must be finite and non-zero");
  }
  for (double m : mean)
    require(std::isfinite(m), "--mean values must be finite");
  if (channels > 0) {
    require(mean.size() == 1 || static_cast<int64_t>(mean.size()) == channels,
            "--mean has " + std::to_string(mean.size()) + " values for " +
                std::to_string(channels) + " channels");
    require(std.size() == 1 || static_cast<int64_t>(std.size()) == channels,
            "--std has " + std::to_string(std.size()) + " values for " + std::to_string(channels) +
                " channels");
  }
}

at::Tensor transformImage(const at::Tensor& pixels, const ImageOptions& o,
                          const std::string& origin) {
  const int64_t c = pixels.size(2);
  // stb decodes some files to 0 rows or columns: the resize divided by zero (issue #22).
  require(pixels.size(0) > 0 && pixels.size(1) > 0 && c > 0,
          origin + ": the image has no pixels (" + std::to_string(pixels.size(0)) + "x" +
              std::to_string(pixels.size(1)) + ")");
  if (o.channels > 0 && c != o.channels) {
    throw Error(origin + ": image has " + std::to_string(c) + " channel" + (c == 1 ? "" : "s") +
                channelWord(c) + ", the model wants " + std::to_string(o.channels) +
                channelWord(o.channels));
  }
  at::Tensor x = pixels.permute({2, 0, 1}).to(at::kFloat);  // [C, H, W], 0..255
  if (o.bgr && c >= 3) {
    x = at::cat({x.narrow(0, 0, 3).flip({0}), x.narrow(0, 3, c - 3)});
  }
  if (o.resize > 0) {
    const int64_t h = x.size(1), w = x.size(2);
    const int64_t shorter = std::min(h, w);
    const int64_t new_h = h == shorter ? o.resize : (h * o.resize + shorter / 2) / shorter;
    const int64_t new_w = w == shorter ? o.resize : (w * o.resize + shorter / 2) / shorter;
    if (new_h != h || new_w != w) {
      x = at::upsample_bilinear2d(x.unsqueeze(0), {new_h, new_w}, /*align_corners=*/false)
              .squeeze(0)
              .clamp(0, 255);
    }
  }
  if (o.crop_height > 0 || o.crop_width > 0) {
    const int64_t ch = o.crop_height > 0 ? o.crop_height : x.size(1);
    const int64_t cw = o.crop_width > 0 ? o.crop_width : x.size(2);
    if (ch > x.size(1) || cw > x.size(2)) {
      throw Error(origin + ": crop " + std::to_string(ch) + "x" + std::to_string(cw) +
                  " is larger than the image (" + std::to_string(x.size(1)) + "x" +
                  std::to_string(x.size(2)) + "); resize first with --resize");
    }
    // Same rounding as torchvision's CenterCrop.
    const int64_t top = static_cast<int64_t>(std::round((x.size(1) - ch) / 2.0));
    const int64_t left = static_cast<int64_t>(std::round((x.size(2) - cw) / 2.0));
    x = x.narrow(1, top, ch).narrow(2, left, cw);
  }
  require(o.mean.size() == 1 || static_cast<int64_t>(o.mean.size()) == c,
          origin + ": --mean has " + std::to_string(o.mean.size()) + " values for an image with " +
              std::to_string(c) + " channels");
  require(o.std.size() == 1 || static_cast<int64_t>(o.std.size()) == c,
          origin + ": --std has " + std::to_string(o.std.size()) + " values for an image with " +
              std::to_string(c) + " channels");
  x = x / 255.0f;
  if (o.mean.size() != 1 || o.std.size() != 1 || o.mean[0] != 0 || o.std[0] != 1) {
    auto per_channel = [c](const std::vector<double>& v) {
      std::vector<float> f(c);
      for (int64_t i = 0; i < c; ++i)
        f[i] = static_cast<float>(v.size() == 1 ? v[0] : v[i]);
      return at::tensor(f).reshape({c, 1, 1});
    };
    x = (x - per_channel(o.mean)) / per_channel(o.std);
  }
  if (o.nhwc) x = x.permute({1, 2, 0});
  return x.contiguous();
}

}  // namespace qforge::data
