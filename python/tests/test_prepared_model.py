"""qforge.PreparedModel: run, list and change quantizers, save and load."""

import json

import numpy as np
import pytest
import torch

import qforge


@pytest.fixture(scope="module")
def prepared_dir(tmp_path_factory, fashion, resnet):
    out = tmp_path_factory.mktemp("prepared")
    qforge.quantize(resnet, backend="TensorRT", calib=fashion["train"][:128], calib_batches=2,
                    calib_batch=64, out=out, deploy=False, quiet=True)
    return out


def test_run_on_numpy_input_gives_the_clis_outputs(tmp_path, prepared_dir, fashion, cli):
    model = qforge.load(prepared_dir)
    assert model.backend == "TensorRT"
    x = fashion["test"][:100]
    out = model.run(x)
    logits = out[model.outputs[0]]
    assert isinstance(logits, torch.Tensor) and logits.shape == (100, 10)
    # `qforge eval --dump-outputs` on the same directory writes the same rows.
    cli("eval", prepared_dir, "--limit", 100, "--metric", "none", "--dump-outputs",
        tmp_path / "y.npy", "--quiet")
    np.testing.assert_array_equal(logits.numpy(), np.load(tmp_path / "y.npy"))


def test_every_quantizer_switched_off_is_the_float_model(prepared_dir, fashion, resnet):
    model = qforge.load(prepared_dir)
    x = torch.from_numpy(fashion["test"][:16])
    quantized = model.run(x)[model.outputs[0]]
    float_out = model.run(x, quantized=False)[model.outputs[0]]
    assert not torch.equal(quantized, float_out)
    for q in model.quantizers():
        model.set_quantizer(q["name"], enabled=False)
    assert torch.equal(model.run(x)[model.outputs[0]], float_out)
    # The float model itself, through qforge.eval of the ONNX file: the same top-1.
    ours = (float_out.argmax(1) == torch.from_numpy(fashion["test_labels"][:16])).sum().item()
    ref = qforge.eval(resnet, data=(fashion["test"][:16], fashion["test_labels"][:16]), quiet=True)
    assert ref["top1_correct"] == ours


def test_quantizers_list_the_saved_parameters(prepared_dir):
    model = qforge.load(prepared_dir)
    saved = json.loads((prepared_dir / "quantizers.json").read_text())["quantizers"]
    rows = model.quantizers()
    assert [r["name"] for r in rows] == [r["name"] for r in saved]
    for row, expected in zip(rows, saved):
        assert row["scale"] == expected["scale"]
        assert row["zero_point"] == expected["zero_point"]
        assert row["enabled"]
    first = rows[0]
    assert torch.allclose(first["state"]["scale"].double(), torch.tensor(first["scale"], dtype=torch.double))


def test_a_changed_scale_changes_the_output_and_survives_save_and_load(tmp_path, prepared_dir, fashion):
    model = qforge.load(prepared_dir)
    x = fashion["test"][:8]
    before = model.run(x)[model.outputs[0]]
    # The input quantizer: the graph input's grid. Doubling its scale halves its resolution.
    q = next(r for r in model.quantizers() if r["kind"] == "activation")
    doubled = [2 * s for s in q["scale"]]
    model.set_quantizer(q["name"], state={"scale": doubled})
    after = model.run(x)[model.outputs[0]]
    assert not torch.equal(before, after)
    model.save(tmp_path / "edited")
    again = qforge.load(tmp_path / "edited")
    row = next(r for r in again.quantizers() if r["name"] == q["name"])
    assert row["scale"] == pytest.approx(doubled)
    assert torch.equal(again.run(x)[again.outputs[0]], after)


def test_bad_edits_raise_with_the_reason(prepared_dir):
    model = qforge.load(prepared_dir)
    with pytest.raises(qforge.Error, match="no quantizer 'nope'"):
        model.set_quantizer("nope", enabled=False)
    name = model.quantizers()[0]["name"]
    with pytest.raises(qforge.Error, match="has no parameter 'gain'"):
        model.set_quantizer(name, state={"gain": 1.0})
    with pytest.raises(qforge.Error, match=r"takes \d+ values, not 2"):
        model.set_quantizer(name, state={"scale": [1.0, 2.0]})
    with pytest.raises(qforge.Error, match="not an input of the model"):
        model.run({"x": np.zeros((1, 1, 28, 28), np.float32), "y": np.zeros(1, np.float32)})
    with pytest.raises(qforge.Error, match="not a prepared model directory"):
        qforge.load(prepared_dir / "missing")
