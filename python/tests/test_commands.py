"""qforge.quantize / eval / inspect / deploy / verify against the CLI on the same job."""

import json
import os

import numpy as np
import pytest
import torch

import qforge


def test_numpy_calibration_gives_the_clis_float_and_int8_top1(tmp_path, fashion, resnet, cli):
    # The same 256 calibration images and 1000 test images, once as numpy arrays from Python,
    # once as the CLI's fashion-mnist source: the same data must give the same report.
    report = qforge.quantize(
        resnet,
        backend="TensorRT",
        calib=fashion["train"][:256],
        calib_batches=4,
        calib_batch=64,
        eval=(fashion["test"][:1000], fashion["test_labels"][:1000]),
        out=tmp_path / "py",
        quiet=True,
    )
    cli(
        "quantize", resnet, "--backend", "TensorRT", "--calib", "fashion-mnist:train",
        "--calib-batches", 4, "--calib-batch", 64, "--eval", "fashion-mnist:test",
        "--eval-limit", 1000, "--out", tmp_path / "cli", "--quiet",
    )
    expected = json.loads((tmp_path / "cli" / "report.json").read_text())
    assert report["calibration"]["samples"] == 256
    assert report["float"]["top1"] == expected["float"]["top1"]
    assert report["quantized"]["top1"] == expected["quantized"]["top1"]
    assert report["float"]["top1"] > 0.85  # the zoo ResNet: 93% on the whole test set
    # The same parameters, quantizer by quantizer.
    assert report["quantizers"] == expected["quantizers"]
    # What the pipeline wrote, report.json last, as the CLI does.
    assert report["files"][-1].endswith("report.json")
    assert json.loads((tmp_path / "py" / "report.json").read_text())["quantizers"] == report["quantizers"]


def test_a_dataloader_of_labelled_batches_calibrates_and_evaluates(tmp_path, fashion, resnet):
    train = torch.utils.data.TensorDataset(
        torch.from_numpy(fashion["train"][:128]), torch.from_numpy(fashion["train_labels"][:128]))
    test = torch.utils.data.TensorDataset(
        torch.from_numpy(fashion["test"][:200]), torch.from_numpy(fashion["test_labels"][:200]))
    report = qforge.quantize(
        resnet, backend="Academic",
        calib=torch.utils.data.DataLoader(train, batch_size=32),
        calib_batches=4, calib_batch=32,
        eval=torch.utils.data.DataLoader(test, batch_size=50),
        out=tmp_path / "dl", quiet=True)
    assert report["calibration"]["samples"] == 128
    assert report["float"]["samples"] == 200
    assert report["quantized"]["top1"] > 0.8


def test_one_sample_per_item_and_dicts_by_input_name(tmp_path, fashion, resnet):
    name = qforge.inspect(resnet)["inputs"][0]["name"]
    samples = [{name: fashion["train"][i], "label": int(fashion["train_labels"][i])} for i in range(64)]
    report = qforge.eval(resnet, data=iter(samples), quiet=True)
    assert report["samples"] == 64 and report["metric"] == "top1"
    # The same 64 samples as one array: the same score.
    again = qforge.eval(resnet, data=(fashion["train"][:64], fashion["train_labels"][:64]), quiet=True)
    assert again["top1_correct"] == report["top1_correct"]


def test_eval_matches_the_cli_on_a_prepared_model(tmp_path, fashion, resnet, cli):
    qforge.quantize(resnet, backend="TensorRT", calib=fashion["train"][:128], calib_batches=2,
                    calib_batch=64, out=tmp_path / "q", quiet=True)
    report = qforge.eval(tmp_path / "q", data="fashion-mnist:test", limit=500, quiet=True)
    expected = json.loads(cli("eval", tmp_path / "q", "--limit", 500, "--json").stdout)
    for key in ("samples", "metric", "top1", "top1_correct", "top5"):
        assert report[key] == expected[key]


def test_inspect_and_deploy(tmp_path, fashion, resnet, cli):
    info = qforge.inspect(resnet)
    expected = json.loads(cli("inspect", resnet, "--json").stdout)
    # Both carry the peak memory of their own process; the rest is the same.
    assert info.pop("peak_rss_bytes") > 0 and expected.pop("peak_rss_bytes") > 0
    assert info == expected
    qforge.quantize(resnet, backend="ONNXRuntime", calib=fashion["train"][:64], calib_batches=1,
                    calib_batch=64, out=tmp_path / "q", deploy=False, quiet=True)
    assert not (tmp_path / "q" / "deploy.json").exists()
    result = qforge.deploy(tmp_path / "q", out=tmp_path / "d")
    assert result["backend"] == "ONNXRuntime"
    assert (tmp_path / "d" / "deploy.json").exists()
    assert all(os.path.exists(f) for f in result["files"])


def test_verify_from_python(tmp_path, fashion, resnet):
    qforge.quantize(resnet, backend="TensorRT", calib=fashion["train"][:128], calib_batches=2,
                    calib_batch=64, out=tmp_path / "q", quiet=True)
    report = qforge.verify(tmp_path / "q", data=(fashion["test"][:64], fashion["test_labels"][:64]))
    assert report["samples"] == 64
    assert report["passed"], report.get("failures")


def test_progress_events_reach_a_callable(tmp_path, fashion, resnet):
    events = []
    qforge.quantize(resnet, backend="TensorRT", calib=fashion["train"][:128], calib_batches=2,
                    calib_batch=64, eval=(fashion["test"][:100], fashion["test_labels"][:100]),
                    out=tmp_path / "q", deploy=False, progress=events.append)
    stages = {e["stage"] for e in events}
    assert "calibrate" in stages and "evaluate float" in stages
    calibrate = [e for e in events if e["stage"] == "calibrate" and not e["last"]]
    assert calibrate[-1]["done"] == calibrate[-1]["total"] == 128


def test_torch_is_imported_only_when_a_tensor_crosses(resnet, fashion):
    import subprocess
    import sys

    code = """
import sys, numpy as np, qforge
assert "torch" not in sys.modules, "import qforge imported torch"
qforge.inspect(sys.argv[1])
qforge.eval(sys.argv[1], data="fashion-mnist:test", limit=10, quiet=True)
assert "torch" not in sys.modules, "a job by source string imported torch"
r = qforge.eval(sys.argv[1], data=np.zeros((4, 1, 28, 28), np.float32), metric="none", quiet=True)
assert "torch" in sys.modules and r["samples"] == 4
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code, resnet], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr
