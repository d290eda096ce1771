// fuzz_replay TARGET PATH...: the fuzz targets outside libFuzzer. Runs TARGET's test function once
// on each file named, and on each file of each directory named (in name order; missing
// directories and dot files are skipped). Builds without QFORGE_FUZZ compile every target into
// this one binary, each target's LLVMFuzzerTestOneInput renamed qforge_fuzz_<target>
// (fuzz/CMakeLists.txt), so fuzz/corpus and fuzz/regressions replay as ctests with any compiler.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#define QFORGE_FUZZ_TARGET(name) extern "C" int qforge_fuzz_##name(const uint8_t*, size_t);
#include "fuzz_targets.inc"
#undef QFORGE_FUZZ_TARGET

namespace {

using TestOneInput = int (*)(const uint8_t*, size_t);

struct Target {
  const char* name;
  TestOneInput run;
};

const Target kTargets[] = {
#define QFORGE_FUZZ_TARGET(name) {#name, qforge_fuzz_##name},
#include "fuzz_targets.inc"
#undef QFORGE_FUZZ_TARGET
};

void runFile(TestOneInput test, const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << path.string() << "\n";
    std::exit(2);
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::cerr << "running " << path.string() << " (" << bytes.size() << " bytes)\n";
  test(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  TestOneInput test = nullptr;
  std::string names;
  for (const Target& t : kTargets) {
    if (argc > 1 && std::string(argv[1]) == t.name) test = t.run;
    names += std::string(" ") + t.name;
  }
  if (!test) {
    std::cerr << "usage: fuzz_replay TARGET PATH...\ntargets:" << names << "\n";
    return 2;
  }
  size_t runs = 0;
  for (int i = 2; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename().string()[0] != '.')
          files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files)
        runFile(test, f);
      runs += files.size();
    } else if (fs::exists(arg)) {
      runFile(test, arg);
      ++runs;
    }
  }
  std::cerr << "replayed " << runs << " inputs\n";
  return 0;
}
