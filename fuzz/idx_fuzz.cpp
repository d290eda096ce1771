// IDX files (MNIST's format, `--data train-images-idx3-ubyte[.gz]`), plain or gzipped: the header
// and the first and last records.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/idx.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string path = fuzz::writeScratch("images-idx3-ubyte", fuzz::text(data, size));
  return fuzz::refusalsOnly([&] {
    data::IdxFile idx(path);
    if (idx.count() <= 0) return;
    std::vector<uint8_t> record(static_cast<size_t>(idx.recordBytes()));
    idx.read(0, record.data());
    idx.read(idx.count() - 1, record.data());
  });
}
