"""Resource limits from Python: qforge.set_limits is the CLI's --max-* flags, qforge.limits reads
them back, and a model past one is refused with the CLI's line."""

import pytest

import qforge


@pytest.fixture
def saved_limits():
    before = qforge.limits()
    yield before
    qforge.set_limits(**before)


def test_limits_read_back_what_was_set(saved_limits):
    qforge.set_limits(max_tensor_bytes="512M", max_nodes=1000)
    now = qforge.limits()
    assert now["max_tensor_bytes"] == 512 * 2**20
    assert now["max_nodes"] == 1000
    # None leaves a limit as it was.
    assert now["max_model_bytes"] == saved_limits["max_model_bytes"]
    assert now["max_subgraph_depth"] == saved_limits["max_subgraph_depth"]
    qforge.set_limits(max_model_bytes=4096)
    assert qforge.limits()["max_model_bytes"] == 4096


def test_a_model_past_a_limit_is_refused_naming_it(saved_limits, resnet):
    assert qforge.inspect(resnet)["nodes"] > 0
    qforge.set_limits(max_tensor_bytes="1K")
    with pytest.raises(qforge.Error, match=r"above the limit of 1\.0 KiB for one tensor.*--max-tensor-bytes"):
        qforge.inspect(resnet)
    qforge.set_limits(max_tensor_bytes=saved_limits["max_tensor_bytes"], max_nodes=3)
    with pytest.raises(qforge.Error, match=r"nodes.*--max-nodes"):
        qforge.inspect(resnet)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"max_tensor_bytes": "lots"}, "max_tensor_bytes"),
        ({"max_tensor_bytes": 0}, "max_tensor_bytes must be from 1 byte"),
        ({"max_model_bytes": 2**70}, "max_model_bytes must be from 1 byte"),
        ({"max_model_bytes": True}, "max_model_bytes must be a number of bytes"),
        ({"max_nodes": 0}, "max_nodes must be a whole number of at least 1"),
        ({"max_subgraph_depth": "3"}, "max_subgraph_depth must be a whole number"),
    ],
)
def test_bad_values_are_refused_and_change_nothing(saved_limits, bad, message):
    with pytest.raises(qforge.Error, match=message):
        qforge.set_limits(**bad)
    assert qforge.limits() == saved_limits
