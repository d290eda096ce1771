#include "pipelines/metric_script.h"

#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/process.h"
#include "data/npy.h"

namespace qforge::pipelines {

namespace {

// A file name for an output name: letters, digits, '.', '-' and '_' kept, the rest '_', and a
// number added when two names come out the same.
std::string fileNameFor(const std::string& name, std::set<std::string>& taken) {
  std::string base;
  for (const char c : name)
    base += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_';
  if (base.empty() || base[0] == '.') base = "output" + base;
  std::string file = base + ".npy";
  for (int i = 2; taken.count(file); ++i)
    file = base + "_" + std::to_string(i) + ".npy";
  taken.insert(file);
  return file;
}

at::Tensor stacked(const std::vector<at::Tensor>& parts, const std::string& what) {
  for (const at::Tensor& t : parts) {
    require(t.dim() >= 1 && t.sizes().slice(1) == parts.front().sizes().slice(1),
            "--metric-script: " + what +
                " cannot be stacked over the evaluation batches (it has no batch axis, or its "
                "shape changes from batch to batch)");
  }
  return parts.size() == 1 ? parts.front() : at::cat(parts, 0);
}

}  // namespace

void checkMetricScript(const std::string& script) {
  require(std::filesystem::is_regular_file(script),
          "--metric-script '" + script + "': no such file");
  require(!findExecutable(std::filesystem::absolute(script).string()).empty(),
          "--metric-script '" + script + "' is not executable; chmod +x it (with a #! line)");
}

double runMetricScript(const std::string& script, const std::vector<TensorMap>& outputs,
                       const std::vector<std::string>& names, const std::vector<at::Tensor>& labels,
                       const std::string& model) {
  require(!outputs.empty(), "--metric-script: no evaluation batch to score");
  TempDir dir("metric");
  nlohmann::json manifest = {{"model", model}, {"outputs", nlohmann::json::object()}};
  std::set<std::string> taken = {"labels.npy", "outputs.json"};
  int64_t samples = 0;
  for (const std::string& name : names) {
    std::vector<at::Tensor> parts;
    for (const TensorMap& batch : outputs)
      parts.push_back(batch.at(name));
    const at::Tensor all = stacked(parts, "output '" + name + "'");
    samples = all.size(0);
    const std::string file = fileNameFor(name, taken);
    data::writeNpy(dir.file(file), all);
    manifest["outputs"][name] = file;
  }
  manifest["samples"] = samples;
  bool labelled = !labels.empty();
  for (const at::Tensor& l : labels)
    labelled = labelled && l.defined();
  if (labelled) {
    std::vector<at::Tensor> parts;
    for (const at::Tensor& l : labels)
      parts.push_back(l.to(at::kLong).reshape({-1}));
    data::writeNpy(dir.file("labels.npy"), at::cat(parts, 0));
    manifest["labels"] = "labels.npy";
  } else {
    manifest["labels"] = nullptr;
  }
  writeFileAtomically(dir.file("outputs.json"), manifest.dump(2) + "\n");

  const std::string program = std::filesystem::absolute(script).string();
  const ProcessResult r = runProcess({program, dir.path()});
  const std::string on = " on the " + model + " model's outputs";
  if (r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    const std::string said = lastLine(r.err);
    throw Error("--metric-script '" + script + "' " + exitDescription(r, 0) + on +
                (said.empty() ? "" : ": " + said));
  }
  const std::string line = lastLine(r.out);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(line.c_str(), &end);
  require(!line.empty() && end == line.c_str() + line.size() && errno == 0 && std::isfinite(value),
          "--metric-script '" + script + "' printed '" + line.substr(0, 80) + "' as its last line" +
              on +
              "; it must print the metric, one number (higher is "
              "better)");
  return value;
}

}  // namespace qforge::pipelines
