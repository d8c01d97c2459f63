"""hurray.torch against a real hurrayd: state dicts published as one set, read back zero copy,
and modules attached to them, with every refusal naming its tensor."""

import numpy as np
import pytest
import torch

import hurray
import hurray.torch
from conftest import mapped_file_page


class Small(torch.nn.Module):
    """A parameter of each kind attach meets: float32 and bfloat16 weights, a tied pair, a
    persistent int64 buffer, a bool buffer and a non-persistent one."""

    def __init__(self, device=None):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4, device=device)
        self.bf16 = torch.nn.Parameter(torch.empty(3, 5, dtype=torch.bfloat16, device=device))
        self.embed = torch.nn.Embedding(4, 8, device=device)
        self.tied = torch.nn.Linear(8, 4, bias=False, device=device)
        self.tied.weight = self.embed.weight
        self.register_buffer("steps", torch.empty(2, dtype=torch.int64, device=device))
        self.register_buffer("mask", torch.empty(6, dtype=torch.bool, device=device))
        self.register_buffer("scratch", torch.zeros(3, device=device), persistent=False)


def seeded_small():
    torch.manual_seed(5)
    module = Small()
    with torch.no_grad():
        module.bf16.copy_(torch.randn(3, 5))
        module.embed.weight.copy_(torch.randn(4, 8))
        module.steps.copy_(torch.tensor([3, 9]))
        module.mask.copy_(torch.tensor([True, False, True, True, False, False]))
    return module


def test_a_state_dict_round_trips_zero_copy(client):
    module = seeded_small()
    versions = hurray.torch.publish_state_dict(client, "sd/", module)
    assert sorted(versions) == sorted(module.state_dict())
    assert set(versions.values()) == {1}
    tensors = hurray.torch.state_dict(client, "sd/")
    assert sorted(tensors) == sorted(module.state_dict())
    for key, expected in module.state_dict().items():
        assert tensors[key].dtype == expected.dtype, key
        assert torch.equal(tensors[key], expected), key
    with client.acquire("sd/linear.weight") as view:
        assert (mapped_file_page(tensors["linear.weight"].data_ptr())
                == mapped_file_page(view.numpy().ctypes.data))
    assert client.stats().lease_count == len(tensors)
    del tensors
    assert client.stats().lease_count == 0


def test_a_refused_set_publishes_nothing_and_frees_every_allocation(client):
    state = {"ok": torch.ones(4), "bad//name": torch.zeros(4)}
    with pytest.raises(hurray.InvalidArgumentError, match="bad//name"):
        hurray.torch.publish_state_dict(client, "refused/", state)
    assert client.list("refused/") == []
    assert client.stats().pending_allocation_count == 0
    with pytest.raises(TypeError, match="'n' is a int, not a torch.Tensor"):
        hurray.torch.publish_state_dict(client, "refused/", {"t": torch.ones(2), "n": 3})
    assert client.stats().pending_allocation_count == 0
    with pytest.raises(hurray.UnsupportedError, match="refused/s is a torch.sparse_coo"):
        hurray.torch.publish_state_dict(client, "refused/", {"s": torch.eye(3).to_sparse()})
    assert client.stats().pending_allocation_count == 0
    with pytest.raises(hurray.NotFoundError, match="nothing is published under 'refused/'"):
        hurray.torch.state_dict(client, "refused/")


def test_attach_puts_a_meta_module_on_the_published_tensors(client):
    reference = seeded_small()
    hurray.torch.publish_state_dict(client, "att/", reference)
    module = Small(device="meta")
    assert hurray.torch.attach(module, client, "att/") is module
    for key, expected in reference.state_dict().items():
        assert torch.equal(module.state_dict()[key], expected), key
    assert module.tied.weight is module.embed.weight
    assert isinstance(module.linear.weight, torch.nn.Parameter)
    assert module.linear.weight.requires_grad
    assert module.scratch.device.type == "meta"  # Non-persistent: the module's own.
    inputs = torch.randn(2, 8)
    assert torch.equal(module.linear(inputs), reference.linear(inputs))
    # The module's tensors hold the leases, and only they.
    assert client.stats().lease_count == len(reference.state_dict())
    del module
    assert client.stats().lease_count == 0


def test_a_write_into_an_attached_parameter_stays_in_the_module(client):
    hurray.torch.publish_state_dict(client, "own/", seeded_small())
    module = hurray.torch.attach(Small(device="meta"), client, "own/")
    with torch.no_grad():
        module.linear.weight.mul_(0.0)
    assert module.linear.weight.abs().sum().item() == 0.0
    fresh = hurray.torch.state_dict(client, "own/")
    assert torch.equal(fresh["linear.weight"], seeded_small().linear.weight.detach())


def test_attach_refuses_a_mismatch_by_name_and_changes_nothing(client):
    hurray.torch.publish_state_dict(client, "mis/", seeded_small())

    class Wider(Small):
        def __init__(self, device=None):
            super().__init__(device)
            self.linear = torch.nn.Linear(8, 5, device=device)

    module = Wider(device="meta")
    with pytest.raises(hurray.InvalidArgumentError,
                       match=r"mis/linear.weight is float32 \(4, 8\) but the module's "
                             r"linear.weight is float32 \(5, 8\)"):
        hurray.torch.attach(module, client, "mis/")
    assert module.linear.weight.device.type == "meta" and module.bf16.device.type == "meta"
    assert client.stats().lease_count == 0

    class Extra(Small):
        def __init__(self, device=None):
            super().__init__(device)
            self.more = torch.nn.Linear(2, 2, device=device)

    with pytest.raises(hurray.NotFoundError, match="mis/more.weight is not published"):
        hurray.torch.attach(Extra(device="meta"), client, "mis/")
    client.publish("mis/unused", np.zeros(2, dtype=np.float32))
    with pytest.raises(hurray.InvalidArgumentError,
                       match="mis/unused is published but the module has no"):
        hurray.torch.attach(Small(device="meta"), client, "mis/")
    relaxed = hurray.torch.attach(Small(device="meta"), client, "mis/", strict=False)
    assert relaxed.linear.weight.device.type == "cpu"
    with pytest.raises(hurray.DeadlineExceededError):
        hurray.torch.attach(Extra(device="meta"), client, "mis/", strict=False, wait=0.05)


def test_quantized_tensors_round_trip_as_torch_quantized_tensors(client):
    values = torch.randn(4, 6)
    per_tensor = torch.quantize_per_tensor(values, 0.05, 3, torch.qint8)
    per_channel = torch.quantize_per_channel(values, torch.tensor([0.1, 0.2, 0.3, 0.4]),
                                             torch.tensor([0, 1, 2, 3]), 0, torch.quint8)
    hurray.torch.publish_state_dict(client, "q/", {"t": per_tensor, "c": per_channel})
    back = hurray.torch.state_dict(client, "q/")
    assert back["t"].dtype == torch.qint8 and back["t"].q_scale() == pytest.approx(0.05)
    assert back["t"].q_zero_point() == 3
    assert torch.equal(back["t"].int_repr(), per_tensor.int_repr())
    assert back["c"].dtype == torch.quint8 and back["c"].q_per_channel_axis() == 0
    assert torch.equal(back["c"].int_repr(), per_channel.int_repr())
    assert torch.allclose(back["c"].q_per_channel_scales(), per_channel.q_per_channel_scales())
    assert torch.equal(back["c"].dequantize(), per_channel.dequantize())


def test_what_torch_has_no_tensor_for_is_refused_by_name(client):
    codes = np.arange(32, dtype=np.uint8)
    scales = np.ones(1, dtype=np.float32)
    client.publish("un/nf4", hurray.Tensor.nf4(codes, scales, shape=[64], block_size=64))
    with pytest.raises(hurray.UnsupportedError, match="un/nf4: torch has no tensor for nf4"):
        hurray.torch.state_dict(client, "un/")
    client.delete("un/nf4")
    client.publish("un/f8", np.zeros(4, dtype=np.uint8).view(np.uint8))
    with client.empty([4], "float8_e4m3fn") as tensor:
        tensor.publish("un/f8")
    with pytest.raises(hurray.UnsupportedError, match="un/f8: .*float8_e4m3fn"):
        hurray.torch.state_dict(client, "un/")
