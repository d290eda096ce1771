#include "pipelines/scoring.h"

#include <cstdio>

#include "algos/calibrate.h"
#include "algos/model_feeds.h"
#include "core/error.h"

namespace qforge::pipelines {

double psnrOf(const at::Tensor& per_image_mse, double peak) {
  // An exact reconstruction has no finite PSNR; cap it where float32 noise would be anyway.
  return (10.0 * at::log10(peak * peak / per_image_mse.clamp_min(1e-20))).sum().item<double>();
}

void scoreBatch(const data::Batch& batch, const at::Tensor& output, double peak,
                const std::string& data_name, Scores& s) {
  const int64_t n = static_cast<int64_t>(batch.indices.size());
  if (s.metric == "none") {
    s.samples += n;
    return;
  }
  if (s.metric == "top1") {
    require(output.dim() == 2,
            "--metric top1 needs class scores [batch, classes]; the model output has shape " +
                c10::str(output.sizes()));
    const int64_t classes = output.size(1);
    const at::Tensor outside = (batch.labels >= classes).nonzero();
    if (outside.numel() > 0) {
      const int64_t k = outside[0][0].item<int64_t>();
      throw Error(data_name + " sample " + std::to_string(batch.indices[k]) + ": label " +
                  std::to_string(batch.labels[k].item<int64_t>()) + " is outside the model's " +
                  std::to_string(classes) + " classes");
    }
    at::Tensor scores = output.to(at::kFloat);
    s.top1 += (scores.argmax(1) == batch.labels).sum().item<int64_t>();
    if (classes >= 5) {
      s.has_top5 = true;
      at::Tensor top5 = std::get<1>(scores.topk(5, 1));
      s.top5 += (top5 == batch.labels.unsqueeze(1)).any(1).sum().item<int64_t>();
    }
  } else {
    const at::Tensor& target = batch.targets.defined() ? batch.targets : batch.inputs;
    require(target.defined() && output.sizes() == target.sizes(),
            "--metric psnr compares the output with the clean input; output shape " +
                c10::str(output.sizes()) + " differs from the input's " +
                (target.defined() ? c10::str(target.sizes()) : std::string("(no float input)")) +
                " (--metric none only runs the model)");
    at::Tensor mse = (output.to(at::kDouble) - target.to(at::kDouble)).pow(2).reshape({n, -1});
    mse = mse.mean(1);
    s.mse_sum += mse.sum().item<double>();
    s.psnr_sum += psnrOf(mse, peak);
    if (batch.targets.defined()) {
      at::Tensor in_mse = (batch.inputs.to(at::kDouble) - target.to(at::kDouble)).pow(2);
      s.input_psnr_sum += psnrOf(in_mse.reshape({n, -1}).mean(1), peak);
      s.has_input_psnr = true;
    }
  }
  s.samples += n;
}

std::string scoreText(const Scores& s) {
  char buf[64];
  if (s.metric == "top1") {
    std::snprintf(buf, sizeof(buf), "top-1 %.2f%%", 100.0 * s.top1 / s.samples);
  } else if (s.metric == "none") {
    std::snprintf(buf, sizeof(buf), "not scored");
  } else {
    std::snprintf(buf, sizeof(buf), "psnr %.2f dB", s.psnr_sum / s.samples);
  }
  return buf;
}

Scores scoreModel(Executor& executor, const Graph& graph, data::BatchLoader& loader,
                  const std::string& data_name, const ProgressCallback& progress,
                  const std::string& stage) {
  Scores scores;
  scores.metric = "auto";
  const std::string output = graph.outputs().front()->name();
  const int64_t fixed_batch = algos::fixedBatch(graph);
  ProgressEvent event;
  event.stage = stage;
  event.total = loader.size();
  event.unit = "img";
  const auto start = Clock::now();
  loader.reset();
  while (auto batch = loader.next()) {
    at::Tensor y =
        algos::runInBatches(executor, algos::feedsOf(*batch, graph), {output}, fixed_batch)
            .at(output);
    if (scores.metric == "auto") {
      const at::Tensor& target = batch->targets.defined() ? batch->targets : batch->inputs;
      scores.metric = y.dim() == 2 && batch->labels.defined()           ? "top1"
                      : target.defined() && y.sizes() == target.sizes() ? "psnr"
                                                                        : "none";
    }
    scoreBatch(*batch, y, 1.0, data_name, scores);
    if (progress) {
      event.done = scores.samples;
      event.seconds = secondsSince(start);
      progress(event);
    }
  }
  if (progress) {
    event.last = true;
    progress(event);
  }
  return scores;
}

std::function<at::Tensor(const at::Tensor&)> forwardOf(Executor& executor, const Graph& graph) {
  const std::string input = algos::dataInput(graph).name();
  const std::string output = graph.outputs().front()->name();
  return [&executor, input, output](const at::Tensor& x) {
    return executor.run({{input, x}}, {output}).at(output);
  };
}

double top1Percent(data::BatchLoader& loader,
                   const std::function<at::Tensor(const at::Tensor&)>& forward,
                   const std::string& flag) {
  Scores scores;
  scores.metric = "top1";
  loader.reset();
  while (auto batch = loader.next()) {
    const at::Tensor out = forward(batch->inputs);
    require(out.dim() == 2 && batch->labels.defined(),
            flag + " needs a classifier and labelled data (top-1)");
    scoreBatch(*batch, out, 1.0, loader.dataset().describe(), scores);
  }
  return scores.samples > 0 ? 100.0 * static_cast<double>(scores.top1) / scores.samples : -1;
}

}  // namespace qforge::pipelines
