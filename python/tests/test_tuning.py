"""qforge.analyze and quantize's tuning options (autotune, mixed precision, calib_shuffle)
against the CLI on the same job: the same figures, the same files."""

import json

import pytest

import qforge


def test_analyze_gives_the_clis_report_and_writes_its_files(tmp_path, resnet, cli):
    settings = dict(backend="TensorRT", calib_batches=2, calib_batch=32, calib_shuffle=2,
                    samples=16, batch=8, fisher_probes=2)
    report = qforge.analyze(resnet, **settings, report=tmp_path / "py.html",
                            write_config=tmp_path / "py.json", quiet=True)
    done = cli("analyze", resnet, "--backend", "TensorRT", "--calib-batches", 2, "--calib-batch",
               32, "--calib-shuffle", 2, "--samples", 16, "--batch", 8, "--fisher-probes", 2, "--json",
               "--write-config", tmp_path / "cli.json")
    expected = json.loads(done.stdout)
    assert report["calibration"]["shuffle_seed"] == expected["calibration"]["shuffle_seed"] == 2
    assert report["ranking"] == expected["ranking"]
    by_name = {q["name"]: q for q in expected["quantizers"]}
    assert len(report["quantizers"]) == len(by_name) > 10
    for q in report["quantizers"]:
        for key in ("isolated", "leave_one_out", "fisher"):
            assert q[key] == pytest.approx(by_name[q["name"]][key], rel=1e-6, abs=1e-9), key
    assert json.loads((tmp_path / "py.json").read_text()) == \
        json.loads((tmp_path / "cli.json").read_text())
    page = (tmp_path / "py.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and report["ranking"][0] in page


def test_a_bits_budget_chooses_what_the_cli_chooses(tmp_path, resnet, cli):
    report = qforge.quantize(resnet, backend="Academic", calib_batches=2, calib_shuffle=3,
                             eval="fashion-mnist:test", eval_limit=500, bits_budget=5,
                             out=tmp_path / "py", deploy=False, quiet=True)
    cli("quantize", resnet, "--backend", "Academic", "--calib-batches", 2, "--calib-shuffle", 3,
        "--eval", "fashion-mnist:test", "--eval-limit", 500, "--bits-budget", 5,
        "--out", tmp_path / "cli", "--no-deploy", "--quiet")
    expected = json.loads((tmp_path / "cli" / "report.json").read_text())
    assert report["calibration"]["shuffle_seed"] == 3
    mixed, cli_mixed = report["mixed_precision"], expected["mixed_precision"]
    assert mixed["average_bits"] <= 5.0
    assert mixed["units"] == cli_mixed["units"]
    assert [t["metric"] for t in mixed["trials"]] == [t["metric"] for t in cli_mixed["trials"]]
    assert (tmp_path / "py" / "tuned_config.json").read_text() == \
        (tmp_path / "cli" / "tuned_config.json").read_text()


def test_a_target_sqnr_tunes_as_the_cli_does(tmp_path, resnet, cli):
    report = qforge.quantize(resnet, backend="Academic", calib_batches=2, eval="fashion-mnist:test",
                             eval_limit=200, target_sqnr=30, tune_metric="sqnr", max_trials=4,
                             out=tmp_path / "py",
                             deploy=False, quiet=True)
    cli("quantize", resnet, "--backend", "Academic", "--calib-batches", 2, "--eval",
        "fashion-mnist:test", "--eval-limit", 200, "--target-sqnr", 30, "--tune-metric", "sqnr", "--max-trials", 4,
        "--out", tmp_path / "cli", "--no-deploy", "--quiet")
    expected = json.loads((tmp_path / "cli" / "report.json").read_text())
    trials = report["autotune"]["trials"]
    assert 1 <= len(trials) <= 4
    assert [t["metric"] for t in trials] == [t["metric"] for t in expected["autotune"]["trials"]]
    assert [t["change"] for t in trials] == [t["change"] for t in expected["autotune"]["trials"]]


def test_tuning_refusals_raise_the_clis_line(tmp_path, resnet):
    with pytest.raises(qforge.Error, match="--eval"):
        qforge.quantize(resnet, backend="Academic", calib_batches=1, bits_budget=5,
                        out=tmp_path / "a", quiet=True)
    with pytest.raises(qforge.Error, match="backend"):
        qforge.analyze(resnet, calib_batches=1, quiet=True)
    assert not (tmp_path / "a").exists()
