// `qforge convert --from FMT --to FMT IN OUT`: the first two bytes pick the source and target
// formats (modulo the list), the rest is the parameter file. As the command does: parse, refuse an
// empty table, write the target format.
#include <cstddef>
#include <cstdint>

#include "deploy/formats/table_formats.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace qforge;
  if (size < 2) return 0;
  const auto& formats = deploy::formats::tableFormats();
  const auto& from = formats[data[0] % formats.size()];
  const auto& to = formats[data[1] % formats.size()];
  const std::string input = fuzz::text(data + 2, size - 2);
  return fuzz::refusalsOnly([&] {
    const deploy::QuantTable table = from.parse(input, "params." + from.name);
    require(!table.tensors.empty(), "no quantized tensors in the file");
    (void)to.write(table);
  });
}
