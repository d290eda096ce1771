// The texts of `qforge help`: examples per command and the concept topics. Every flag, key and
// name here is checked against the binary by tests/cli/help_test.cpp (flags against the
// commands' --help, observers and fake quantizers against the registries, the example backend
// and config by loading them), so edit them with the code they describe.
#include "cli/help_topics.h"

#include <map>

#include "backends/backend_config.h"

namespace qforge::cli {

namespace {

HelpBlock paragraph(std::string text) {
  return {HelpBlock::Kind::Paragraph, "", std::move(text)};
}

HelpBlock item(std::string term, std::string text) {
  return {HelpBlock::Kind::Item, std::move(term), std::move(text)};
}

HelpBlock code(std::string lines) {
  return {HelpBlock::Kind::Code, "", std::move(lines)};
}

std::vector<HelpBlock> dataBlocks() {
  return {
      paragraph("What eval, qat and verify read with --data, and quantize and qat with "
                "--calib and --eval. A source is a string: its prefix says what it is, or "
                "else the ending of the file name does. Samples are read when a batch needs "
                "them, so a source of any size streams through in constant memory."),
      item("fashion-mnist:train, fashion-mnist:test",
           "Debian's dataset-fashion-mnist (IDX files in /usr/share/datasets/fashion-mnist, "
           "or in $QFORGE_FASHION_MNIST_DIR). The test split is the default of eval and "
           "verify --data, the train split that of quantize --calib and qat --data."),
      item("idx:IMAGES[,LABELS], FILE-ubyte[.gz], FILE.idx[.gz]",
           "IDX images (count x height x width [x channels]). Labels: as given, from eval "
           "--labels, or the file beside the images whose name has labels-idx1 where theirs "
           "has images-idx3."),
      item("folder:DIR, DIR",
           "One file per sample: images (.png .jpg .jpeg .bmp .gif .tga .pgm .ppm .pnm), "
           ".npy or .npz files, in one sub-folder per class (classes numbered in the sorted "
           "order of the folder names) or directly in DIR (no labels)."),
      item("npy:FILE, FILE.npy",
           "A stacked array, one sample per row of its first axis; labels from eval "
           "--labels (a .npy of integers)."),
      item("npz:FILE, FILE.npz", "Stacked arrays named by model input: sample i is row i of each."),
      item("npz:DIR",
           "One .npz per sample, its arrays named by model input, laid out as for "
           "folder:."),
      item("list:FILE, FILE.txt, FILE.lst, FILE.list",
           "One sample path per line (relative to the list file's folder), optionally "
           "followed by an integer label: PATH LABEL. Every line has a label or none does; "
           "empty lines and lines starting with # are skipped."),
      item("random:normal[,mean=M][,std=S], random:uniform[,low=A][,high=B]",
           "Synthetic samples shaped like the model's inputs, with [,seed=N], [,count=N] "
           "(64 samples by default) and [,shape=AxBxC] (the sample shape, for inputs with "
           "open dims). Sample i is drawn from a generator seeded with seed * 1000003 + i; "
           "integer inputs take uniform integers and need low and high. A quick mechanical "
           "check, not a calibration set."),
      item("const:VALUE",
           "VALUE in every element, in the input's dtype and shape (open dims 1); mostly "
           "as NAME=const:VALUE for one input of several (a sample rate)."),
      item("NAME=SPEC;NAME=SPEC...",
           "One source per model input, read side by side sample by sample: every source "
           "but the constants must have as many samples as the others, and labels come from "
           "the first labelled one. NAME=SPEC|scale=S|shift=B feeds x * S + B. Quote it for "
           "the shell."),
      paragraph("Images are decoded to the channels the model input wants and scaled to "
                "[0,1]; eval also takes --resize, --crop, --mean, --std, --channels, --bgr "
                "and --nhwc. Every sample is converted to its input's dtype (floats for an "
                "integer input must be whole numbers) and checked against the input's shape "
                "before anything runs; a mismatch names the input, the file and the shape. "
                "An input with a fixed batch dim is fed batches of that size."),
      paragraph("How many samples: eval --limit (and --shuffle SEED for a random subset), "
                "verify --limit, quantize --calib-batches times --calib-batch (and "
                "--calib-shuffle SEED for a random subset) and --eval-limit, qat --limit (per "
                "epoch), --calib-batches and --eval-limit."),
      code("qforge eval model.onnx --data folder:val/ --limit 1000\n"
           "qforge quantize model.onnx --backend QDQ --calib list:calib.txt \\\n"
           "    --out out/\n"
           "qforge verify out/ --data 'image=npz:in.npz;rate=const:16000'\n"
           "qforge eval model.onnx --data random:uniform,low=0,high=1,count=8"),
  };
}

std::vector<HelpBlock> backendsBlocks() {
  std::vector<HelpBlock> blocks{
      paragraph("A backend says where a piece of hardware (or a runtime) quantizes and how: the "
                "weight and activation schemes, observers and fake quantizers, which ops are "
                "quantized, the fusions it runs as one kernel, where quantizers go, its "
                "constraints, and the deploy format its toolchain takes. quantize and qat take "
                "--backend NAME, a built-in matched in any case, or --backend FILE.json. The "
                "built-ins, with their deploy format:")};
  for (const std::string& name : backends::builtinBackendNames()) {
    const backends::BackendConfig backend = backends::loadBackend(name);
    blocks.push_back(item(name + " (" + backend.deploy_format + ")", backend.description));
  }
  blocks.push_back(paragraph(
      "A file of your own may start from a built-in (or from another file, relative to it) "
      "named in \"extends\" and give only what differs: objects merge key by key, arrays and "
      "scalars replace, and null removes what the base set (an op mapped to null stays float). "
      "Keys are checked: a misspelt one is an error naming its path."));
  blocks.push_back(
      code("{\n"
           "  \"name\": \"MyChip\",\n"
           "  \"extends\": \"QDQ\",\n"
           "  \"description\": \"QDQ, 4-bit MSE-calibrated weights, Mul in "
           "float\",\n"
           "  \"weight\": {\"bits\": 4, \"observer\": \"Mse\"},\n"
           "  \"ops\": {\"Mul\": null}\n"
           "}"));
  blocks.push_back(paragraph(
      "qforge quantize model.onnx --backend my_chip.json --out out/ then uses it, and the "
      "prepared model keeps the resolved document, so it loads without the file. The schema is "
      "docs/BACKENDS.md in qforge's sources, the built-ins are its backends/*.json."));
  return blocks;
}

std::vector<HelpBlock> configBlocks() {
  return {
      paragraph("quantize --config FILE and qat --config FILE (.json, .yaml or .yml) change "
                "what the backend chooses, for every quantization unit or for the units of "
                "selected nodes. Keys are checked: a misspelt key is an error naming its "
                "path, before the model is loaded."),
      code("weight: {bits: 4, observer: Mse}\n"
           "activation: {bits: 8}\n"
           "extra_quantizable: [Mul]\n"
           "overrides:\n"
           "  - {name: /stem/stem.0/Conv, weight: {bits: 8}}\n"
           "  - {name_regex: \"/fc/.*\", skip: true}\n"
           "  - op_type: MatMul\n"
           "    activation: {observer: Percentile,\n"
           "                 observer_options: {percentile: 99.99}}"),
      item("weight, activation",
           "Changes to the backend's weight and activation specs, for every unit (keys "
           "below)."),
      item("extra_quantizable", "Op types to quantize that the backend leaves in float."),
      item("overrides",
           "A list. Each entry selects units by exactly one of name (a node name), "
           "name_regex (ECMAScript, matching the whole name) or op_type, of the unit's first "
           "node (the Conv of Conv, BatchNormalization, Relu), and sets weight, activation "
           "or skip: true (the unit stays float). Entries apply in file order, a later one "
           "winning where they overlap; one that selects no node is an error naming the "
           "nearest node names."),
      paragraph("The keys of weight and activation, each optional, merged over the "
                "backend's:"),
      item("bits", "The grid's width, 2 to 16."),
      item("symmetric", "Zero point fixed at 0."),
      item("symmetric_range",
           "A signed grid without its lowest value ([-127, 127] for 8 bits). Dropped by "
           "symmetric: false or unsigned: true unless given with them."),
      item("full_range_clamp",
           "With symmetric_range: the scale stays amax / 127 but values clamp to [-128, 127], "
           "as an int8 QuantizeLinear, TensorRT and Sophgo's TPU do. Dropped with "
           "symmetric_range unless given."),
      item("unsigned", "The grid [0, 2^bits - 1]."),
      item("per_channel", "One scale per output channel (the axis comes from the op)."),
      item("power_of_two", "Scales restricted to powers of two."),
      item("rounding", "half_to_even, half_away_from_zero, half_up or floor."),
      item("observer, observer_options",
           "What calibrates the range, and its numeric options (qforge help algorithms). "
           "A new observer starts without the options of the one it replaces."),
      item("fake_quantizer, fake_quantizer_options",
           "What quantizes the values in the simulation and carries their gradients, and "
           "its numeric options (qforge help algorithms); likewise."),
      paragraph("qat --algo picks fake quantizers, but a fake_quantizer the config names "
                "wins. The backend's constraints still hold: a config that makes "
                "TensorRT's activations asymmetric is refused at deploy, naming the tensor, "
                "before any file is written."),
  };
}

std::vector<HelpBlock> algorithmsBlocks() {
  return {
      paragraph("Post-training quantization (quantize): the observers calibrate on "
                "--calib-batches batches; then --algo may reconstruct the model unit by "
                "unit against the float model's outputs:"),
      item("naive", "Calibration only (the default)."),
      item("adaround", "AdaRound: each layer's rounding, up or down, learned layer by layer."),
      item("brecq",
           "BRECQ: the same per block (residual blocks found from the graph, plain layers "
           "three at a time)."),
      item("qdrop",
           "QDrop: per block, each activation quantizer keeping the float value half of the "
           "time."),
      paragraph("All three also learn the activation scales; --iters, --recon-batch, "
                "--seed, --cache-limit and --algo-config FILE (MQBench's "
                "quantize.reconstruction keys) tune them. Around them:"),
      item("--cle",
           "Cross-layer equalization of Conv, Relu, Conv pairs before preparing (folds "
           "BatchNormalization first); --cle-relu6-to-relu also turns the ReLU6 between "
           "pairs into ReLU."),
      item("--bias-correction",
           "Empirical correction of each layer's per-channel output mean, on the "
           "calibration batches."),
      paragraph("Observers turn the values a tensor took during calibration into a range, "
                "hence scale and zero point. A backend or a --config names one as "
                "observer, with observer_options (defaults shown):"),
      item("MinMax", "The running minimum and maximum."),
      item("EmaMinMax {ratio: 0.9}",
           "An exponential moving average of each batch's minimum and maximum."),
      item("Percentile {percentile: 99.99}",
           "Clips at that percentile of |x| over all batches (a histogram); per tensor."),
      item("EmaQuantile {percentile: 99.999, ratio: 0.9, bins: 2048}",
           "The same per batch, averaged over batches; per tensor."),
      item("Mse {p: 2, steps: 95, step: 0.01}",
           "The range, shrunk from [min, max] by factors 1, 1 - step, ..., with the least "
           "Lp error on each batch, united over batches."),
      item("EmaMse {p: 2, steps: 95, step: 0.01, ratio: 0.9}", "The same, averaged over batches."),
      item("ClipStd {std_scale: 2.6}",
           "Mean plus or minus std_scale standard deviations, within [min, max]."),
      item("LsqInit", "LSQ's start: scale = 2 mean(|x|) / sqrt(qmax)."),
      item("Kl {bins: 2048, quantized_bins: 0, keep_first_bin: 0}",
           "TensorRT's entropy calibration on a histogram of |x| (0 quantized bins: from "
           "the grid), its first bin (the zeros of ReLU and padding) discarded as TensorRT "
           "does unless keep_first_bin: 1; per tensor."),
      item("PowerOfTwo {search_steps: 1, most_frequent: 0, min_log2_scale}",
           "The smallest power-of-two scale that covers the range; search_steps > 1 also "
           "tries smaller ones, keeping the least squared error, and most_frequent: 1 keeps "
           "the pick most batches made; per tensor."),
      item("none", "No observer (DoReFa's weights)."),
      paragraph("Fake quantizers quantize values in the simulated model and carry gradients "
                "through for training. Named as fake_quantizer, with "
                "fake_quantizer_options:"),
      item("Fixed", "Scale and zero point from the observer; straight-through gradient."),
      item("LSQ {grad_scaling: 1, grad_scale_per_channel: 1}",
           "Learned step size: the scale trains (gradient scale 1/sqrt(numel * qmax); "
           "grad_scale_per_channel: 0 counts the whole tensor, as PyTorch does)."),
      item("LSQ+ {grad_scaling: 1, grad_scale_per_channel: 1}",
           "LSQ with a learned zero point too."),
      item("PACT {alpha: 10}", "Activations clipped to a learned range; per tensor."),
      item("DSQ {alpha: 0.4, learn_alpha: 1}",
           "Differentiable soft quantization: a tanh curve inside each step for gradients."),
      item("DoReFa", "DoReFa's tanh-normalised weights; takes no observer."),
      item("TQT", "Trained power-of-two thresholds, symmetric; per tensor."),
      item("NNIE", "HiSilicon NNIE's 8-bit logarithmic grid."),
      item("AdaRound", "Learned rounding of weights (what --algo adaround trains)."),
      item("drop_probability: P",
           "An option of any of them: QDrop, each element keeping its float value with "
           "probability P while training."),
      paragraph("Quantization-aware training (qat --algo; default: the backend's own fake "
                "quantizers):"),
      item("lsq", "LSQ weights and activations."),
      item("lsq+", "LSQ weights, LSQ+ activations."),
      item("pact", "LSQ weights, PACT activations."),
      item("dsq", "DSQ weights and activations."),
      item("dorefa", "DoReFa weights (per tensor, no observer), LSQ activations."),
      item("tqt", "TQT weights and activations (per tensor, symmetric)."),
  };
}

std::vector<HelpBlock> exitStatusBlocks() {
  return {
      item("0", "Success."),
      item("1", "verify: a criterion failed; run: an output outside --expect's tolerance."),
      item("2",
           "Bad input: an unknown command or topic, a file, a flag's value, a model or "
           "data qforge refuses. One line on stderr says what and where."),
      item("3", "An internal error (please report it with the command you ran)."),
      item("130, 143",
           "qat stopped by SIGINT or SIGTERM after writing its checkpoint; "
           "--resume continues it."),
      item("100 and above",
           "The command line did not parse (a missing option, an unknown "
           "one, a value of the wrong type); the message says which."),
  };
}

std::vector<HelpBlock> environmentBlocks() {
  return {
      item("QFORGE_NUM_THREADS", "Threads ATen computes with (default: every core)."),
      item("QFORGE_FASHION_MNIST_DIR",
           "Where fashion-mnist:train and fashion-mnist:test are read from (default "
           "/usr/share/datasets/fashion-mnist)."),
      item("QFORGE_ORT_DIR, XDG_CACHE_HOME",
           "Where verify finds onnxruntime-node (default $XDG_CACHE_HOME/qforge/ort, "
           "$XDG_CACHE_HOME defaulting to ~/.cache); verify --ort-dir wins."),
      item("QFORGE_MALLOC_TUNING",
           "0 restores glibc's malloc defaults and ATen's allocator; qforge otherwise keeps "
           "freed memory of large tensors for reuse and hands freed tensor blocks of up to "
           "1 MiB to the next tensor of their size."),
      item("GLOO_SOCKET_IFNAME",
           "qat --world-size across machines: the network interface each rank binds."),
  };
}

}  // namespace

std::vector<HelpTopic> referenceSections() {
  return {
      {"exit-status", "EXIT STATUS", "", exitStatusBlocks},
      {"environment", "ENVIRONMENT", "", environmentBlocks},
  };
}

std::vector<HelpTopic> conceptTopics() {
  return {
      {"data", "DATA SOURCES", "Data sources of --data, --calib, --eval: files, folders, synthetic",
       dataBlocks},
      {"backends", "BACKENDS", "Built-in backends, what each targets, backend files of your own",
       backendsBlocks},
      {"config", "QUANTIZATION CONFIG",
       "--config files (JSON, YAML): bits, schemes, observers, per node", configBlocks},
      {"algorithms", "ALGORITHMS", "Reconstruction, observers, fake quantizers, QAT algorithms",
       algorithmsBlocks},
  };
}

std::vector<HelpExample> commandExamples(const std::string& command) {
  // Command lines stay within 66 columns: man indents them by 11 on an 80-column page.
  static const std::map<std::string, std::vector<HelpExample>> kExamples = {
      {"inspect",
       {
           {"What a model is made of, and whether qforge can run every op",
            "qforge inspect model.onnx"},
           {"The same with the graph as text", "qforge inspect model.onnx --dump"},
       }},
      {"run",
       {
           {"Latency on sample inputs of batch 8", "qforge run model.onnx --batch 8"},
           {"Outputs against reference tensors (exit 1 outside tolerance)",
            "qforge run model.onnx --input x=in.pb --expect y=out.pb \\\n"
            "    --atol 1e-5"},
           {"A QOperator model as ONNX Runtime computes it",
            "qforge run model.qoperator.onnx --arithmetic ort"},
       }},
      {"eval",
       {
           {"Top-1 of the bundled ResNet on Fashion-MNIST's test split",
            "qforge eval models/zoo/resnet.onnx --data fashion-mnist:test"},
           {"An ImageNet classifier on 1000 random images of a class folder",
            "qforge eval model.onnx --data folder:val/ --shuffle 0 \\\n"
            "    --limit 1000 --resize 256 --crop 224 \\\n"
            "    --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225"},
           {"A prepared model's simulated quantization against the float model",
            "qforge eval out/ --reference models/zoo/resnet.onnx"},
           {"A denoiser: PSNR of its output on noisy inputs",
            "qforge eval models/zoo/unet.onnx --data fashion-mnist:test \\\n"
            "    --noise 0.2"},
       }},
      {"quantize",
       {
           {"int8 PTQ for TensorRT: accuracy before and after, deploy files in out/",
            "qforge quantize models/zoo/resnet.onnx --backend TensorRT \\\n"
            "    --calib fashion-mnist:train --eval fashion-mnist:test \\\n"
            "    --out out/"},
           {"4-bit weights and activations with QDrop reconstruction",
            "qforge quantize models/zoo/resnet.onnx --backend Academic \\\n"
            "    --config w4a4.yaml --algo qdrop --iters 2000 --out out/w4a4"},
           {"A backend file of your own, calibration images from a folder",
            "qforge quantize model.onnx --backend my_chip.json \\\n"
            "    --calib folder:calib/ --out out/"},
           {"Autotune: at most 1 point of top-1 lost, sensitive units wider or float",
            "qforge quantize models/zoo/mobilenet.onnx --backend Academic \\\n"
            "    --config w4a4.yaml --eval fashion-mnist:test \\\n"
            "    --target-drop 1.0 --out out/"},
           {"Mixed precision: 5 bits per weight on average, each unit's width chosen",
            "qforge quantize models/zoo/resnet.onnx --backend Academic \\\n"
            "    --eval fashion-mnist:test --bits-budget 5 --report mp.html \\\n"
            "    --out out/"},
       }},
      {"qat",
       {
           {"W4A4 LSQ training from the bundled ResNet, BN frozen for the last epoch",
            "qforge qat models/zoo/resnet.onnx --backend Academic \\\n"
            "    --config w4a4.yaml --algo lsq --epochs 3 --lr 0.002 \\\n"
            "    --freeze-bn-epoch 2 --eval fashion-mnist:test --out out/lsq"},
           {"Continue it after an interruption: the same flags, --resume for --out",
            "qforge qat models/zoo/resnet.onnx --backend Academic \\\n"
            "    --config w4a4.yaml --algo lsq --epochs 3 --lr 0.002 \\\n"
            "    --freeze-bn-epoch 2 --eval fashion-mnist:test --resume out/lsq"},
           {"Rank 0 of two processes training together (start rank 1 alike)",
            "qforge qat model.onnx --backend TensorRT --epochs 5 \\\n"
            "    --world-size 2 --rank 0 --master 127.0.0.1:29500 --out out/"},
       }},
      {"deploy",
       {
           {"Deploy files from a model quantized with --no-deploy",
            "qforge quantize model.onnx --backend SNPE --no-deploy --out out/\n"
            "qforge deploy out/ --out deployed/"},
       }},
      {"verify",
       {
           {"The deployed models in ONNX Runtime against qforge's simulation",
            "qforge verify out/ --data fashion-mnist:test --limit 1000"},
           {"A model of two inputs, an image-to-image output judged by SQNR and IoU",
            "qforge verify out/ --data 'image=folder:val/;rate=const:16000' \\\n"
            "    --min-sqnr 35 --iou-threshold 0.5"},
           {"Deploy files written elsewhere", "qforge verify deployed/ --prepared out/"},
       }},
      {"analyze",
       {
           {"Which quantizers hurt a U-Net on TensorRT, with an HTML report",
            "qforge analyze u2netp.onnx --backend TensorRT \\\n"
            "    --calib folder:images/ --calib-batches 16 --calib-batch 1 \\\n"
            "    --samples 8 --report report.html"},
           {"A model quantized before, its fixes as a config to replay",
            "qforge analyze out/ --eval fashion-mnist:test \\\n"
            "    --write-config fixes.json\n"
            "qforge quantize model.onnx --backend TensorRT \\\n"
            "    --config fixes.json --out fixed/"},
       }},
      {"convert",
       {
           {"SNPE encodings (AIMET legacy) to a TensorRT calibration cache",
            "qforge convert --from aimet_legacy --to tensorrt_cache \\\n"
            "    model.encodings model.cache"},
       }},
      {"help",
       {
           {"A command's options with examples, or a topic",
            "qforge help quantize\nqforge help data"},
           {"A man page, shown by man", "qforge help --man quantize | man -l -"},
           {"Every man page into a folder", "qforge help --man-dir man/"},
       }},
      {"completion",
       {
           {"Complete qforge's commands and options in this shell",
            "source <(qforge completion bash)"},
           {"In every new shell: bash-completion loads it from there",
            "dir=${XDG_DATA_HOME:-~/.local/share}/bash-completion/completions\n"
            "mkdir -p $dir && qforge completion bash > $dir/qforge"},
       }},
  };
  const auto it = kExamples.find(command);
  return it == kExamples.end() ? std::vector<HelpExample>{} : it->second;
}

}  // namespace qforge::cli
