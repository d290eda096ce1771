"""Bad input from Python: a clear exception, nothing half-written, the interpreter alive."""

import numpy as np
import pytest

import qforge


def quantize(resnet, out, calib, **kw):
    return qforge.quantize(resnet, backend=kw.pop("backend", "TensorRT"), calib=calib,
                           calib_batches=1, calib_batch=32, out=out, quiet=True, **kw)


def test_an_unknown_backend(tmp_path, fashion, resnet):
    with pytest.raises(qforge.Error, match="NoSuchChip"):
        quantize(resnet, tmp_path / "out", fashion["train"][:32], backend="NoSuchChip")
    assert not (tmp_path / "out").exists()


def test_a_wrong_sample_shape_names_the_input(tmp_path, resnet):
    with pytest.raises(qforge.Error, match=r"\[1,28,27\].*\[1,28,28\]"):
        quantize(resnet, tmp_path / "out", np.zeros((32, 1, 28, 27), np.float32))
    assert not (tmp_path / "out").exists()


def test_a_wrong_dtype(tmp_path, resnet):
    with pytest.raises(qforge.Error, match="calib item 0"):
        quantize(resnet, tmp_path / "out", [["a", "b"]])
    with pytest.raises(qforge.Error, match="not an array"):
        quantize(resnet, tmp_path / "out", [object()])
    assert not (tmp_path / "out").exists()


def test_a_generator_that_raises_midway(tmp_path, fashion, resnet):
    def batches():
        yield fashion["train"][:16]
        raise ValueError("the camera fell off")

    with pytest.raises(ValueError, match="the camera fell off"):
        quantize(resnet, tmp_path / "out", batches())
    assert not (tmp_path / "out").exists()


def test_data_of_the_wrong_kind(tmp_path, resnet):
    with pytest.raises(qforge.Error, match="neither a data source string nor an iterable"):
        quantize(resnet, tmp_path / "out", 42)
    with pytest.raises(qforge.Error, match="holds no samples"):
        quantize(resnet, tmp_path / "out", [])
    with pytest.raises(qforge.Error, match="no model input"):
        quantize(resnet, tmp_path / "out", [{"pixels": np.zeros((1, 28, 28), np.float32)}])
    with pytest.raises(qforge.Error, match="must be a path"):
        qforge.inspect(3.5)
    assert not (tmp_path / "out").exists()


def test_a_missing_model_file(tmp_path):
    with pytest.raises(qforge.Error, match="missing.onnx"):
        qforge.inspect(tmp_path / "missing.onnx")


def test_the_interpreter_keeps_working_after_errors(tmp_path, fashion, resnet):
    for _ in range(3):
        with pytest.raises(qforge.Error):
            quantize(resnet, tmp_path / "out", np.zeros((32, 1, 27, 28), np.float32))
    report = quantize(resnet, tmp_path / "ok", fashion["train"][:32], deploy=False)
    assert report["calibration"]["samples"] == 32


def test_a_name_that_is_not_utf8_is_one_escaped_line(tmp_path, resnet):
    # The zoo ResNet with one byte of its first Conv node's name made 0xFF.
    data = bytearray(open(resnet, "rb").read())
    start = data.find(b"/stem/stem.0/Conv\"")  # the node name field, not a value name
    if start < 0:
        start = next(i for i in range(len(data)) if data.startswith(b"/stem/stem.0/Conv", i)
                     and not data.startswith(b"/stem/stem.0/Conv_", i))
    data[start + 8] = 0xFF
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(bytes(data))
    with pytest.raises(qforge.Error, match=r"name '/stem/st\\xFFm\.0/Conv' is not UTF-8 text"):
        qforge.inspect(bad)
    with pytest.raises(qforge.Error, match="not UTF-8"):
        quantize(str(bad), tmp_path / "out", np.zeros((32, 1, 28, 28), np.float32))
    assert not (tmp_path / "out").exists()
