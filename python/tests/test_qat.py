"""qforge.qat with a loss written in Python."""

import torch
import torch.nn.functional as F

import qforge


def test_a_python_loss_trains_the_model(tmp_path, fashion, resnet):
    calls = []

    def loss(output, batch):
        calls.append((output.requires_grad, tuple(output.shape), batch["labels"].shape))
        return F.cross_entropy(output, batch["labels"])

    data = torch.utils.data.TensorDataset(
        torch.from_numpy(fashion["train"][:256]), torch.from_numpy(fashion["train_labels"][:256]))
    report = qforge.qat(
        resnet, backend="TensorRT", data=torch.utils.data.DataLoader(data, batch_size=64),
        out=tmp_path / "qat", epochs=1, batch=32, lr=1e-4, loss=loss, calib_batches=2,
        calib_batch=64, eval=(fashion["test"][:200], fashion["test_labels"][:200]), quiet=True)
    assert len(calls) == 256 // 32
    assert all(grad and shape == (32, 10) and labels == (32,) for grad, shape, labels in calls)
    assert "loss" in report["loss"]
    assert report["qat_top1"] > 80  # percent; the zoo ResNet quantized is ~93% on the test set
    assert (tmp_path / "qat" / "deploy.json").exists()
    assert qforge.load(tmp_path / "qat").backend == "TensorRT"


def test_a_loss_that_returns_no_tensor_is_refused(tmp_path, fashion, resnet):
    import pytest

    with pytest.raises(qforge.Error, match="not a torch tensor"):
        qforge.qat(resnet, backend="TensorRT", data=(fashion["train"][:64], fashion["train_labels"][:64]),
                   out=tmp_path / "qat", batch=32, loss=lambda output, batch: 1.0,
                   calib_batches=1, calib_batch=32, quiet=True)


def test_intermediate_values_distil_beside_the_loss(tmp_path, fashion, resnet):
    import pytest

    images = fashion["train"][:64]
    report = qforge.qat(resnet, backend="TensorRT", data=images, out=tmp_path / "qat",
                        batch=32, lr=1e-4, optimizer="adam", calib_batches=1, calib_batch=32,
                        distill_at=["/layer2/Relu_1_output_0"], distill_weight=0.5,
                        deploy=False, quiet=True)
    assert report["loss"] == "distillation (mse) + 0.5 x relative MSE of /layer2/Relu_1_output_0"
    assert report["epochs"][0]["loss"] > 0

    with pytest.raises(qforge.Error, match="--distill-at: the model has no value 'nope'"):
        qforge.qat(resnet, backend="TensorRT", data=images, out=tmp_path / "bad", batch=32,
                   distill_at=["nope"], calib_batches=1, calib_batch=32, quiet=True)
    assert not (tmp_path / "bad").exists()
