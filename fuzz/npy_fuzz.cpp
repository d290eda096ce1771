// NumPy data (`--data x.npy`, `--data arrays.npz`): the input is read both as a .npy file and as
// an .npz archive; whatever opens is read whole and record by record (first and last).
#include <cstddef>
#include <cstdint>

#include "data/npy.h"
#include "data/npz.h"
#include "fuzz/fuzz_support.h"

namespace {

void readArray(qforge::data::NpyFile& npy) {
  (void)npy.readAll();
  if (!npy.shape().empty() && npy.shape()[0] > 0) {
    (void)npy.readRecord(0);
    (void)npy.readRecord(npy.shape()[0] - 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  const std::string content = fuzz::text(data, size);
  const std::string npy_path = fuzz::writeScratch("data.npy", content);
  fuzz::refusalsOnly([&] {
    data::NpyFile npy(npy_path);
    readArray(npy);
  });
  const std::string npz_path = fuzz::writeScratch("data.npz", content);
  return fuzz::refusalsOnly([&] {
    data::NpzFile npz(npz_path);
    for (const std::string& name : npz.names()) {
      (void)npz.contains(name);
      std::unique_ptr<data::NpyFile> npy = npz.open(name);
      readArray(*npy);
    }
  });
}
