// `qforge convert --from FMT --to FMT IN OUT`: rewrites a quantization parameter file for another
// toolchain (TensorRT ranges or cache, SNPE/QNN encodings, PPL, Vitis, Tengine). The source is
// read into qforge's table and written in the target's conventions; a target that needs what
// the source does not say (an asymmetric range for TensorRT) is refused, naming the tensor.
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/commands.h"
#include "cli/json_report.h"
#include "core/error.h"
#include "core/files.h"
#include "deploy/formats/table_formats.h"

namespace qforge::cli {

namespace {

struct ConvertOptions {
  std::string from;
  std::string to;
  std::string input;
  std::string output;
  bool json = false;
};

int runConvert(const ConvertOptions& o) {
  const deploy::formats::TableFormat& from = deploy::formats::tableFormat(o.from);
  const deploy::formats::TableFormat& to = deploy::formats::tableFormat(o.to);
  const deploy::QuantTable table = from.parse(readFile(o.input), o.input);
  require(!table.tensors.empty(), o.input + ": no quantized tensors in the file");
  std::string text;
  try {
    text = to.write(table);
  } catch (const Error& e) {
    throw e.within("cannot convert '" + o.input + "' to " + o.to);
  }
  writeFileAtomically(o.output, text);
  if (o.json) {
    nlohmann::json report = {{"from", o.from},
                             {"to", o.to},
                             {"input", o.input},
                             {"output", o.output},
                             {"tensors", table.tensors.size()}};
    std::cout << jsonReportText(report);
  } else {
    std::cout << "converted " << table.tensors.size() << " tensors from " << o.from << " to "
              << o.to << ": " << o.output << "\n";
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addConvertCommand(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  std::string formats = "Formats:";
  for (const auto& f : deploy::formats::tableFormats())
    formats += "\n  " + f.name + ": " + f.description;
  CLI::App* sub = app.add_subcommand(
      "convert", "Convert a quantization parameter file between toolchain formats");
  sub->footer(formats);
  sub->add_option("--from", options->from, "Format of IN")
      ->type_name(value_type::kFormat)
      ->required();
  sub->add_option("--to", options->to, "Format of OUT")->type_name(value_type::kFormat)->required();
  sub->add_option("input", options->input, "Parameter file to read")
      ->type_name(value_type::kFile)
      ->required();
  sub->add_option("output", options->output, "Parameter file to write")
      ->type_name(value_type::kFile)
      ->required();
  sub->add_flag("--json", options->json, "Print machine-readable JSON");
  return {sub, [options] { return runConvert(*options); }};
}

}  // namespace qforge::cli
