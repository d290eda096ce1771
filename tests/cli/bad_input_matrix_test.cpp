// The bad-input matrix: every file type qforge reads and every family of command-line options,
// broken the ways files from strangers and typing users break them. Each case must give exactly
// one line on stderr ("qforge: error: ..." naming what is wrong), nothing on stdout, exit code 2,
// and write nothing: no output directory, nothing half-made beside it.
//
// docs/BAD_INPUT.md lists the cases with the message each gives; the test checks that every case
// is there. To rewrite it from the messages of the current build, run this test with
// QFORGE_WRITE_BAD_INPUT_DOC=$PWD/docs/BAD_INPUT.md (the command is in the file).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "algos/qat_checkpoint.h"
#include "core/files.h"
#include "core/utf8.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string family;  // what kind of input: "ONNX model", "backend JSON", ...
  std::string name;    // unique, as listed in docs/BAD_INPUT.md
  std::string args;    // the command line after `qforge`; DIR is the case's scratch directory
  std::string expect;  // a part of the one line on stderr
  std::string env = "";
};

std::string zoo(const std::string& name) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A .npy file: a v1.0 header for `descr` and `shape`, then `payload`.
std::string npy(const std::string& descr, const std::string& shape, const std::string& payload) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + payload;
}

// y = -x on [N, 2].
OnnxBuilder negModel() {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 2}).output("y", onnx::TensorProto::FLOAT, {-1, 2});
  b.node("Neg", {"x"}, {"y"}, "neg");
  return b;
}

// Every broken file the cases read, made once under `dir`.
void makeFixtures(const fs::path& dir) {
  const auto save = [&dir](const std::string& name, const OnnxBuilder& b) {
    b.save((dir / name).string());
  };
  writeBytes(dir / "junk.onnx", "this is not a model");
  writeBytes(dir / "empty.onnx", "");
  writeBytes(dir / "truncated.onnx", readFile(zoo("resnet")).substr(0, 4000));
  {
    OnnxBuilder b = negModel();
    b.model().clear_graph();
    save("no_graph.onnx", b);
  }
  {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    b.node("Mul", {"x", "w"}, {"y"}, "scale");
    save("missing_init.onnx", b);
  }
  {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    b.node("Add", {"x", "y"}, {"t"}, "p");
    b.node("Neg", {"t"}, {"y"}, "q");
    save("cycle.onnx", b);
  }
  {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    b.node("Neg", {"x"}, {"y"}, "a");
    b.node("Abs", {"x"}, {"y"}, "b");
    save("duplicate.onnx", b);
  }
  const auto withInitializer = [&](const std::string& name,
                                   const std::function<void(onnx::TensorProto&)>& edit) {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    b.initializer("w", at::ones({2}));
    b.node("Mul", {"x", "w"}, {"y"}, "scale");
    edit(*b.model().mutable_graph()->mutable_initializer(0));
    save(name, b);
  };
  const auto external = [](onnx::TensorProto& t, const std::string& location) {
    t.clear_raw_data();
    t.clear_float_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t.add_external_data();
    e->set_key("location");
    e->set_value(location);
  };
  withInitializer("escape.onnx", [&](onnx::TensorProto& t) { external(t, "../../etc/passwd"); });
  withInitializer("ext_missing.onnx", [&](onnx::TensorProto& t) { external(t, "w.bin"); });
  writeBytes(dir / "short" / "w.bin", "1234");
  withInitializer("short/ext_short.onnx", [&](onnx::TensorProto& t) { external(t, "w.bin"); });
  withInitializer("huge_init.onnx", [](onnx::TensorProto& t) {
    t.clear_dims();
    t.add_dims(int64_t{1} << 40);
  });
  withInitializer("negative_dim.onnx", [](onnx::TensorProto& t) {
    t.clear_dims();
    t.add_dims(-2);
  });
  withInitializer("wrong_size.onnx", [](onnx::TensorProto& t) { t.set_raw_data("12345"); });
  withInitializer("complex_init.onnx",
                  [](onnx::TensorProto& t) { t.set_data_type(onnx::TensorProto::STRING); });
  {
    OnnxBuilder b = negModel();
    b.model().mutable_graph()->mutable_node(0)->set_name("neg\xFF\x1B]0;x\x07");
    save("not_utf8.onnx", b);
  }
  {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    b.node("Frobnicate", {"x"}, {"y"}, "frob");
    save("unknown_op.onnx", b);
  }
  {
    // ConstantOfShape asked at run time for 10^6 x 10^6 x 10^3 floats.
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {1}).output("y", onnx::TensorProto::FLOAT, {});
    b.initializer("shape", at::tensor({int64_t{1000000}, int64_t{1000000}, int64_t{1000}}));
    b.node("ConstantOfShape", {"shape"}, {"big"}, "big");
    b.node("Add", {"big", "x"}, {"y"}, "add");
    save("runtime_huge.onnx", b);
  }
  {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {1, 1000000, 1000000})
        .output("y", onnx::TensorProto::FLOAT, {1, 1000000, 1000000});
    b.node("Neg", {"x"}, {"y"}, "neg");
    save("huge_input.onnx", b);
  }
  {
    // Ifs nested three deep.
    const auto body = [](const onnx::GraphProto* inner) {
      OnnxBuilder b;
      b.output("y", onnx::TensorProto::FLOAT, {2});
      if (inner == nullptr) {
        b.node("Identity", {"x"}, {"y"}, "leaf");
      } else {
        b.initializer("c", at::ones({1}, at::kBool));
        onnx::NodeProto& n = b.node("If", {"c"}, {"y"}, "inner_if");
        addGraphAttribute(n, "then_branch", *inner);
        addGraphAttribute(n, "else_branch", *inner);
      }
      return b.model().graph();
    };
    const onnx::GraphProto leaf = body(nullptr);
    const onnx::GraphProto middle = body(&leaf);
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    b.initializer("c", at::ones({1}, at::kBool));
    onnx::NodeProto& n = b.node("If", {"c"}, {"y"}, "outer_if");
    addGraphAttribute(n, "then_branch", middle);
    addGraphAttribute(n, "else_branch", leaf);
    save("nested.onnx", b);
  }

  // Backend JSON and quantization configs.
  writeBytes(dir / "backend_syntax.json", "{\"name\": \"X\",");
  writeBytes(dir / "backend_types.json", "{\"name\": 7}");
  writeBytes(dir / "backend_array.json", "[1, 2, 3]");
  writeBytes(dir / "config_syntax.yaml", "default: [unclosed\n");
  writeBytes(dir / "config_syntax.json", "{\"default\": ");
  writeBytes(dir / "config_unknown_key.json", "{\"frobnicate\": 1}");
  writeBytes(dir / "config_no_match.json",
             "{\"overrides\": [{\"name\": \"no_such_node\", \"skip\": true}]}");
  writeBytes(dir / "config_bits.yaml", "activation:\n  bits: 99\n");
  writeBytes(dir / "algo_bad.json", "{\"iters\": ");

  // Data sources.
  writeBytes(dir / "data" / "bad_magic.npy", "NOTNUMPY........");
  writeBytes(dir / "data" / "truncated.npy", npy("<f4", "(4, 1, 28, 28)", std::string(64, '\0')));
  writeBytes(dir / "data" / "complex.npy",
             npy("<c16", "(1, 1, 28, 28)", std::string(784 * 16, '\0')));
  writeBytes(dir / "data" / "wrong_shape.npy", npy("<f4", "(2, 3, 5)", std::string(120, '\0')));
  writeBytes(dir / "data" / "bad_header.npy", npy("<f4", "(-4, 28", ""));
  writeBytes(dir / "data" / "not_zip.npz", "PK but not really a zip file");
  writeBytes(dir / "data" / "bad-images-idx3-ubyte",
             std::string("\x00\x00\x09\x03\x00\x00\x00\x01", 8));
  std::string idx = std::string("\x00\x00\x08\x03", 4);
  idx += std::string("\x00\x00\x00\x0a\x00\x00\x00\x1c\x00\x00\x00\x1c", 12);
  writeBytes(dir / "data" / "short-images-idx3-ubyte", idx + std::string(100, '\0'));
  writeBytes(dir / "data" / "img" / "a.png", "\x89PNG\r\n\x1a\n but then garbage");
  fs::create_directories(dir / "data" / "empty_folder");
  writeBytes(dir / "data" / "missing.txt", "no/such/image.png 3\n");
  writeBytes(dir / "data" / "mixed.txt", "img/a.png 1\nimg/a.png\n");
  writeBytes(dir / "data" / "neg.npy", npy("<f4", "(4, 2)", std::string(32, '\0')));
  // Headers declaring 20000x20000 pixels (1.5 GiB as floats) over a few bytes.
  writeBytes(dir / "data" / "huge_img" / "wide.pgm", "P5\n20000 20000\n255\n\x01\x02");
  writeBytes(dir / "data" / "wide-images-idx3-ubyte",
             std::string("\x00\x00\x08\x03\x00\x00\x00\x01\x00\x00\x4e\x20\x00\x00\x4e\x20", 16));

  // Parameter files for `qforge convert`.
  writeBytes(dir / "conv" / "cache.txt", "TRT-8001-EntropyCalibration2\ninput: zzzz\n");
  writeBytes(dir / "conv" / "ranges.json", "{\"blob_range\": {\"x\": \"wide\"}}");
  writeBytes(dir / "conv" / "aimet.json", "{\"activation_encodings\": 5}");
  writeBytes(dir / "conv" / "aimet_v1.json",
             "{\"version\": \"1.0.0\", \"activation_encodings\": [{}]}");
  writeBytes(dir / "conv" / "ppl.json", "[\"not\", \"an\", \"object\"]");
  writeBytes(dir / "conv" / "ppl_cuda.txt", "x: lots\n");
  writeBytes(dir / "conv" / "vitis.json", "{\"x\": {\"scale\": \"one\"}}");
  writeBytes(dir / "conv" / "tengine.scale", "x 0.5\n");
  writeBytes(dir / "conv" / "binary.txt", std::string("\x00\xff\x00\xfe", 4));

  // Prepared-model directories and QAT checkpoints.
  fs::create_directories(dir / "prep_empty");
  writeBytes(dir / "prep_badjson" / "prepared.json", "{\"format\": ");
  writeBytes(dir / "prep_badjson" / "prepared.onnx", readFile(zoo("resnet")));
  writeBytes(dir / "prep_version" / "prepared.json",
             "{\"format\": \"qforge-prepared\", \"version\": 999}");
  writeBytes(dir / "prep_version" / "prepared.onnx", readFile(zoo("resnet")));
  writeBytes(dir / "ckpt_bad" / "checkpoint.pt", "not a checkpoint at all");
  writeBytes(dir / "ckpt_trunc" / "checkpoint.pt", std::string("PK\x03\x04", 4) + "trunc");
  // A real checkpoint with its pickle patched: a string length of 4 GiB (the zip is stored
  // uncompressed and libtorch does not check CRCs), and epoch_sums' 5 doubles claimed as 64.
  algos::QatCheckpoint checkpoint;
  checkpoint.settings = "{}";
  checkpoint.epoch_sums = at::zeros({5}, at::kDouble);
  algos::saveQatCheckpoint(checkpoint, (dir / "ckpt_ok.pt").string());
  const std::string saved = readFile((dir / "ckpt_ok.pt").string());
  std::string huge_string = saved;
  const size_t format_key =
      huge_string.find(std::string("X\x06\x00\x00\x00"
                                   "format",
                                   11));
  huge_string.replace(format_key + 1, 4, "\xf0\xff\xff\xff");
  writeBytes(dir / "ckpt_huge_string" / "checkpoint.pt", huge_string);
  std::string long_tensor = saved;
  long_tensor[long_tensor.find(std::string("K\x05tQ", 4)) + 1] = 64;
  writeBytes(dir / "ckpt_long_tensor" / "checkpoint.pt", long_tensor);

  // Metric scripts: one that fails, one that prints no number, one not executable.
  writeBytes(dir / "metric_fails.sh", "#!/bin/sh\necho 'KeyError: labels' >&2\nexit 1\n");
  writeBytes(dir / "metric_words.sh", "#!/bin/sh\necho accuracy is good\n");
  writeBytes(dir / "metric_plain.sh", "echo 1\n");
  fs::permissions(dir / "metric_fails.sh", fs::perms::owner_all);
  fs::permissions(dir / "metric_words.sh", fs::perms::owner_all);
}

std::vector<Case> matrix() {
  const std::string resnet = zoo("resnet");
  const std::string q =
      "quantize " + resnet + " --backend TensorRT --calib-batches 1 --calib-batch 8 ";
  const std::string out = " --out DIR/out";
  std::vector<Case> c;
  const auto add = [&c](const std::string& family, const std::string& name, const std::string& args,
                        const std::string& expect, const std::string& env = "") {
    c.push_back({family, name, args, expect, env});
  };

  std::string f = "ONNX model";
  add(f, "not protobuf", "inspect DIR/junk.onnx",
      "is not a valid ONNX model: protobuf parsing failed");
  add(f, "empty file", "inspect DIR/empty.onnx", "the model has no graph; it is not an ONNX model");
  add(f, "truncated", "run DIR/truncated.onnx", "truncated or not ONNX");
  add(f, "missing file", "inspect DIR/nope.onnx", "DIR/nope.onnx': no such file");
  add(f, "a directory", "inspect DIR/data", "is a directory; give the .onnx file");
  add(f, "no graph", "inspect DIR/no_graph.onnx", "the model has no graph");
  add(f, "missing initializer", "inspect DIR/missing_init.onnx", "reads 'w', which no node");
  add(f, "cycle", "inspect DIR/cycle.onnx", "cycle");
  add(f, "duplicate value", "inspect DIR/duplicate.onnx", "already defined");
  add(f, "external data outside", "inspect DIR/escape.onnx", "outside the model's directory");
  add(f, "external data missing", "inspect DIR/ext_missing.onnx", "cannot open external data file");
  add(f, "external data short", "inspect DIR/short/ext_short.onnx",
      "holds 4 bytes of data but its shape needs 8");
  add(f, "huge initializer", "inspect DIR/huge_init.onnx",
      "initializer 'w' would take 4.0 TiB, above the limit of 8.0 GiB");
  add(f, "negative dimension", "inspect DIR/negative_dim.onnx", "negative dimension");
  add(f, "data size mismatch", "inspect DIR/wrong_size.onnx",
      "holds 5 bytes of data but its shape needs 8");
  add(f, "unsupported element type", "run DIR/complex_init.onnx", "element type");
  add(f, "name not UTF-8", "inspect DIR/not_utf8.onnx",
      "node 0's name 'neg\\xFF\\x1B]0;x\\x07' is not UTF-8 text");
  add(f, "unknown op", "run DIR/unknown_op.onnx", "node 'frob' (Frobnicate)");
  add(f, "huge tensor at run time", "run DIR/runtime_huge.onnx",
      "node 'big' (ConstantOfShape): a tensor would take");
  add(f, "huge declared input", "run DIR/huge_input.onnx", "a sample for input 'x' would take");
  add(f, "bodies nested too deep", "inspect DIR/nested.onnx --max-subgraph-depth 1",
      "node 'inner_if' (If): its body 'then_branch' is nested 2 deep, above the limit of 1");
  add(f, "too many nodes", "inspect " + resnet + " --max-nodes 10", "more than 10 nodes");
  add(f, "initializers too large", "inspect " + resnet + " --max-model-bytes 100K",
      "the initializers add up to more than 100.0 KiB");
  add(f, "quantize a broken model", "quantize DIR/junk.onnx --backend TensorRT" + out,
      "protobuf parsing failed");
  add(f, "quantize a model too large", q + "--max-tensor-bytes 1K" + out, "would take");
  add(f, "eval a missing model", "eval DIR/nope.onnx", "no such file");

  f = "backend JSON";
  add(f, "unknown name", "quantize " + resnet + " --backend NoSuchChip" + out, "NoSuchChip");
  add(f, "syntax error", "quantize " + resnet + " --backend DIR/backend_syntax.json" + out,
      "backend_syntax.json");
  add(f, "wrong types", "quantize " + resnet + " --backend DIR/backend_types.json" + out,
      "backend_types.json");
  add(f, "not an object", "quantize " + resnet + " --backend DIR/backend_array.json" + out,
      "backend_array.json");
  add(f, "missing file", "quantize " + resnet + " --backend DIR/none.json" + out, "none.json");

  f = "quantization config";
  add(f, "YAML syntax", q + "--config DIR/config_syntax.yaml" + out, "config_syntax.yaml");
  add(f, "JSON syntax", q + "--config DIR/config_syntax.json" + out, "config_syntax.json");
  add(f, "unknown key", q + "--config DIR/config_unknown_key.json" + out, "frobnicate");
  add(f, "override matches nothing", q + "--config DIR/config_no_match.json" + out, "no_such_node");
  add(f, "bit width out of range", q + "--config DIR/config_bits.yaml" + out, "bits");
  add(f, "missing file", q + "--config DIR/none.yaml" + out, "none.yaml");
  add(f, "reconstruction config syntax",
      q + "--algo adaround --algo-config DIR/algo_bad.json" + out, "algo_bad.json");

  f = "data";
  add(f, "npy bad magic", q + "--calib DIR/data/bad_magic.npy" + out, "bad_magic.npy");
  add(f, "npy truncated", q + "--calib DIR/data/truncated.npy" + out, "truncated.npy");
  add(f, "npy unsupported dtype", q + "--calib DIR/data/complex.npy" + out, "complex.npy");
  add(f, "npy shape mismatch", q + "--calib DIR/data/wrong_shape.npy" + out, "wrong_shape.npy");
  add(f, "npy bad header", q + "--calib DIR/data/bad_header.npy" + out, "bad_header.npy");
  add(f, "npz not a zip", q + "--calib DIR/data/not_zip.npz" + out, "not_zip.npz");
  add(f, "IDX bad magic", q + "--calib DIR/data/bad-images-idx3-ubyte" + out,
      "bad-images-idx3-ubyte");
  add(f, "IDX truncated", q + "--calib DIR/data/short-images-idx3-ubyte" + out,
      "short-images-idx3-ubyte");
  add(f, "image not decodable", q + "--calib folder:DIR/data/img" + out, "a.png");
  add(f, "image above the tensor limit",
      q + "--calib folder:DIR/data/huge_img --max-tensor-bytes 256M" + out,
      "wide.pgm' would take 1.5 GiB, above the limit of 256.0 MiB");
  add(f, "IDX record above the tensor limit",
      q + "--calib DIR/data/wide-images-idx3-ubyte --max-tensor-bytes 256M" + out, "one record of");
  add(f, "empty folder", q + "--calib folder:DIR/data/empty_folder" + out, "empty_folder");
  add(f, "list names a missing file", q + "--calib list:DIR/data/missing.txt" + out,
      "no/such/image.png");
  add(f, "list with and without labels", q + "--calib list:DIR/data/mixed.txt" + out, "mixed.txt");
  add(f, "unknown source", q + "--calib frob:thing" + out, "frob:thing");
  add(f, "missing source file", q + "--calib DIR/data/none.npy" + out, "none.npy");
  add(f, "random with a bad parameter", q + "--calib random:normal,std=wide" + out, "std");
  add(f, "const not a number", q + "--calib const:abc" + out, "abc");
  add(f, "named input unknown", q + "--calib 'nosuch=random:normal'" + out, "nosuch");
  add(f, "eval labels file bad",
      "eval " + resnet + " --data DIR/data/neg.npy --labels DIR/data/bad_magic.npy",
      "bad_magic.npy");
  add(f, "run input spec", "run " + resnet + " --input image=DIR/data/none.npy", "none.npy");

  f = "convert input";
  add(f, "TensorRT cache garbage",
      "convert DIR/conv/cache.txt DIR/out.json --from tensorrt_cache --to tensorrt_ranges",
      "cache.txt");
  add(f, "TensorRT ranges without their key",
      "convert DIR/conv/ranges.json DIR/out.txt --from tensorrt_ranges --to tensorrt_cache",
      "ranges.json");
  add(f, "AIMET legacy wrong type",
      "convert DIR/conv/aimet.json DIR/out.json --from aimet_legacy --to tensorrt_ranges",
      "aimet.json");
  add(f, "AIMET 1.0 missing fields",
      "convert DIR/conv/aimet_v1.json DIR/out.json --from aimet_v1 --to tensorrt_ranges",
      "aimet_v1.json");
  add(f, "PPL not an object",
      "convert DIR/conv/ppl.json DIR/out.json --from ppl --to tensorrt_ranges", "ppl.json");
  add(f, "PPL-CUDA bad number",
      "convert DIR/conv/ppl_cuda.txt DIR/out.json --from ppl_cuda --to tensorrt_ranges",
      "ppl_cuda.txt");
  add(f, "Vitis without its key",
      "convert DIR/conv/vitis.json DIR/out.json --from vitis --to tensorrt_ranges", "vitis.json");
  add(f, "Tengine short line",
      "convert DIR/conv/tengine.scale DIR/out.json --from tengine --to tensorrt_ranges",
      "tengine.scale");
  add(f, "binary junk",
      "convert DIR/conv/binary.txt DIR/out.json --from ppl_cuda --to tensorrt_ranges",
      "binary.txt");
  add(f, "unknown format",
      "convert DIR/conv/ranges.json DIR/out.json --from frob --to tensorrt_cache", "frob");
  add(f, "missing input",
      "convert DIR/conv/none.json DIR/out.json --from vitis --to tensorrt_cache", "none.json");

  f = "prepared model";
  add(f, "no prepared.json", "deploy DIR/prep_empty" + out, "prep_empty");
  add(f, "prepared.json syntax", "deploy DIR/prep_badjson" + out, "prepared.json");
  add(f, "prepared.json version", "deploy DIR/prep_version" + out,
      "not a qforge prepared model of version");
  add(f, "a file, not a directory", "deploy DIR/junk.onnx" + out, "junk.onnx");
  add(f, "verify without deploy.json", "verify DIR/prep_empty", "prep_empty");

  f = "QAT checkpoint";
  add(f, "not a checkpoint",
      "qat " + resnet + " --backend TensorRT --resume DIR/ckpt_bad --limit 64 --batch 32",
      "ckpt_bad/checkpoint.pt");
  add(f, "truncated checkpoint",
      "qat " + resnet + " --backend TensorRT --resume DIR/ckpt_trunc --limit 64 --batch 32",
      "ckpt_trunc/checkpoint.pt");
  add(f, "string length past the end",
      "qat " + resnet + " --backend TensorRT --resume DIR/ckpt_huge_string --limit 64 --batch 32",
      "data.pkl declares 4294967280 bytes");
  add(f, "tensor larger than its record",
      "qat " + resnet + " --backend TensorRT --resume DIR/ckpt_long_tensor --limit 64 --batch 32",
      "a tensor claims 512 bytes of data, more than its record holds");
  add(f, "no checkpoint there",
      "qat " + resnet + " --backend TensorRT --resume DIR/prep_empty --limit 64 --batch 32",
      "no checkpoint.pt there");

  f = "analysis and tuning";
  const std::string eval = "--eval fashion-mnist:test --eval-limit 16 --eval-batch 16 ";
  const std::string academic =
      "quantize " + resnet + " --backend Academic --calib-batches 1 --calib-batch 8 " + eval;
  add(f, "analyze with nothing to measure",
      "analyze " + resnet + " --backend TensorRT --no-isolated --no-leave-one-out --no-fisher",
      "nothing to measure");
  add(f, "target without evaluation data", q + "--target-drop 1" + out, "pass --eval");
  add(f, "two targets", q + eval + "--target-drop 1 --target-sqnr 20" + out, "give one target");
  add(f, "unknown ranking", q + eval + "--target-sqnr 20 --tune-ranking frob" + out,
      "--tune-ranking must be isolated or fisher");
  add(f, "top-1 target on unlabelled data",
      q + "--eval random:normal,count=8 --target-drop 1" + out, "needs labelled evaluation data");
  add(f, "budget below the narrowest width", academic + "--bits-budget 1.5" + out,
      "below the narrowest weight width Academic runs (2 bits)");
  add(f, "budget below the pinned units", academic + "--bits-budget 2" + out,
      "below what the narrowest widths take");
  add(f, "budget on a one-width backend", q + eval + "--bits-budget 6" + out,
      "TensorRT runs only 8-bit weights");
  add(f, "budget and target", academic + "--bits-budget 5 --target-drop 1" + out,
      "are separate searches: give one");
  add(f, "bad size budget", academic + "--size-budget lots" + out,
      "--size-budget 'lots' is not a size");
  add(f, "report not writable", q + "--report DIR/none/r.html" + out, "--report");
  add(f, "metric script that fails",
      q + eval + "--target-drop 1 --metric-script DIR/metric_fails.sh" + out,
      "exited with code 1 on the float model's outputs: KeyError: labels");
  add(f, "metric script printing no number",
      q + eval + "--target-drop 1 --metric-script DIR/metric_words.sh" + out,
      "printed 'accuracy is good' as its last line");
  add(f, "metric script not executable",
      q + eval + "--target-drop 1 --metric-script DIR/metric_plain.sh" + out, "is not executable");

  f = "command line";
  add(f, "unknown command", "frobnicate", "unknown command 'frobnicate'");
  add(f, "no command", "", "no command given");
  add(f, "unknown option", "inspect " + resnet + " --frob", "--frob");
  add(f, "missing required option", "quantize " + resnet + out, "--backend is required");
  add(f, "extra argument", "inspect " + resnet + " extra", "extra");
  add(f, "calib-batches zero", q.substr(0, q.find("--calib-batches")) + "--calib-batches 0" + out,
      "--calib-batches");
  add(f, "calib-batch zero", q.substr(0, q.find("--calib-batches")) + "--calib-batch 0" + out,
      "--calib-batch");
  add(f, "calibration seed negative", q + "--calib-shuffle -3" + out,
      "--calib-shuffle: a seed is a whole number from 0 up, not '-3'");
  add(f, "shuffle seed not a number", "eval " + resnet + " --shuffle x",
      "--shuffle: a seed is a whole number from 0 up, not 'x'");
  add(f, "unknown pass", q + "--passes frob" + out, "frob");
  add(f, "unknown algorithm", q + "--algo frob" + out, "frob");
  add(f, "bad cache limit", q + "--algo adaround --cache-limit lots" + out,
      "--cache-limit 'lots' is not a size");
  add(f, "rank outside the world", q + "--world-size 2 --rank 2" + out,
      "--rank must be in [0, 2) for --world-size 2, got 2");
  add(f, "autotune across ranks",
      q + "--world-size 2 --target-drop 1 --eval fashion-mnist:test" + out,
      "run in one process: drop --world-size or the target");
  add(f, "bad tensor limit", "inspect " + resnet + " --max-tensor-bytes lots",
      "--max-tensor-bytes 'lots' is not a size");
  add(f, "zero node limit", "inspect " + resnet + " --max-nodes 0",
      "--max-nodes '0' must be a whole number of at least 1");
  add(f, "bad depth limit", "inspect " + resnet + " --max-subgraph-depth deep",
      "--max-subgraph-depth 'deep' must be a whole number of at least 1");
  add(f, "bad limit in the environment", "inspect " + resnet,
      "QFORGE_MAX_NODES='x' is not a positive count", "QFORGE_MAX_NODES=x");
  add(f, "output is a file", q + "--out DIR/junk.onnx", "junk.onnx: exists and is not a directory");
  add(f, "output is the current directory", q + "--out .", "is the current directory or holds it");
  add(f, "output is above the current directory", q + "--out ..",
      "is the current directory or holds it");
  add(f, "QAT unknown loss", "qat " + resnet + " --backend TensorRT --loss frob" + out,
      "--loss: unknown loss 'frob'");
  add(f, "QAT label smoothing", "qat " + resnet + " --backend TensorRT --label-smoothing 2" + out,
      "--label-smoothing must be in [0, 1)");
  add(f, "QAT no output", "qat " + resnet + " --backend TensorRT", "give --out");
  add(f, "eval bad crop", "eval " + resnet + " --crop 0.x", "--crop");
  add(f, "run bad input spec", "run " + resnet + " --input =", "--input");
  add(f, "bad thread count", "inspect " + resnet, "QFORGE_NUM_THREADS", "QFORGE_NUM_THREADS=lots");
  add(f, "verify bad threshold", "verify DIR/prep_empty --min-sqnr much", "--min-sqnr");
  add(f, "convert unknown target", "convert DIR/conv/vitis.json DIR/o.json --from vitis --to frob",
      "frob");
  add(f, "help unknown topic", "help frob", "frob");
  add(f, "completion unknown shell", "completion tcsh", "tcsh");
  return c;
}

// DIR in a case's text is the scratch directory.
std::string withDir(std::string text, const std::string& dir) {
  for (size_t at = text.find("DIR"); at != std::string::npos;
       at = text.find("DIR", at + dir.size()))
    text.replace(at, 3, dir);
  return text;
}

// The message with the scratch and source directories written as DIR and SRC.
std::string generic(std::string text, const std::string& dir) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{dir, "DIR"}, {std::string(QFORGE_SOURCE_DIR), "SRC"}}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at))
      text.replace(at, from.size(), to);
  }
  return text;
}

// Entries of `dir` (not recursive) other than the fixtures made before the case ran.
std::set<std::string> newEntries(const fs::path& dir, const std::set<std::string>& before) {
  std::set<std::string> added;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!before.count(name)) added.insert(name);
  }
  return added;
}

TEST(BadInputMatrix, EveryCaseIsOneLineExitTwoAndWritesNothing) {
  const std::string dir = makeTempDir("badinput");
  makeFixtures(dir);
  std::set<std::string> fixtures;
  for (const auto& e : fs::directory_iterator(dir))
    fixtures.insert(e.path().filename().string());

  const std::vector<Case> cases = matrix();
  EXPECT_GE(cases.size(), 80u);
  std::set<std::string> names;
  std::string doc =
      "# Bad input: what qforge says\n\n"
      "Each row is a case of `tests/cli/bad_input_matrix_test.cpp`: the command (DIR is the "
      "test's scratch directory of broken files, SRC the source tree) and the one line qforge "
      "prints on stderr. Every case exits with code 2, prints nothing on stdout and writes "
      "nothing. Rewrite this file from the current build with\n\n"
      "    QFORGE_WRITE_BAD_INPUT_DOC=$PWD/docs/BAD_INPUT.md build/tests/qforge_tests \\\n"
      "      --gtest_filter=BadInputMatrix.*\n";
  std::string family;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.family + " / " + k.name);
    EXPECT_TRUE(names.insert(k.family + " / " + k.name).second) << "duplicate case name";
    const std::string args = withDir(k.args, dir);
    const std::string expect = withDir(k.expect, dir);
    const CliStreams r = runCliStreams(args, "cd " + dir + " && " + k.env);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(lineCount(r.err), 1u) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("qforge: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(expect), std::string::npos) << "expected '" << expect << "' in: " << r.err;
    EXPECT_EQ(invalidUtf8Offset(r.err), std::string_view::npos) << r.err;
    EXPECT_EQ(newEntries(dir, fixtures), std::set<std::string>{}) << args;
    EXPECT_FALSE(fs::exists(fs::path(dir) / "out")) << args;

    if (k.family != family) {
      family = k.family;
      doc += "\n## " + family + "\n\n| case | command | message |\n|---|---|---|\n";
    }
    std::string message = generic(r.err.substr(0, r.err.find('\n')), dir);
    std::string shown_args = generic(k.args, dir);
    for (std::string* s : {&message, &shown_args}) {
      for (size_t at = s->find('|'); at != std::string::npos; at = s->find('|', at + 2))
        s->replace(at, 1, "\\|");
    }
    doc += "| " + k.name + " | `" + (k.env.empty() ? "" : k.env + " ") + "qforge " + shown_args +
           "` | " + message + " |\n";
  }

  if (const char* write = std::getenv("QFORGE_WRITE_BAD_INPUT_DOC")) {
    writeFileAtomically(write, doc);
  } else {
    // The documented list is the list tested.
    const std::string documented = readFile(std::string(QFORGE_SOURCE_DIR) + "/docs/BAD_INPUT.md");
    for (const Case& k : cases) {
      EXPECT_NE(documented.find("| " + k.name + " | "), std::string::npos)
          << "docs/BAD_INPUT.md lacks the case '" << k.name << "'";
    }
  }
}

}  // namespace
}  // namespace qforge::testing
