"""torch modules on hurray tensors: a model's weights published once, shared by every worker.

    import hurray, hurray.torch

    with hurray.connect() as client:                       # once, in the loader
        hurray.torch.publish_state_dict(client, "gpt/", model)

    with hurray.connect() as client:                       # in each of N workers
        model = build_model(device="meta")                 # no memory of its own
        hurray.torch.attach(model, client, "gpt/")         # the published weights, zero copy

Names are `prefix + key` of the module's state dict ("gpt/" + "layers.0.linear1.weight"). A
published set is visible all at once or not at all; a worker's tensors are the pages of the
pool, which every worker shares: N workers take the memory of one copy of the weights. A
tensor from a host pool is a private copy-on-write mapping of those pages (see
TensorView.__dlpack__): a write through it (an in-place op on a parameter) copies the page
it touches into that worker alone and never reaches the published tensor or the others.

Quantized tensors: torch's per-tensor and per-channel affine types (qint8, quint8, qint32)
are published as the format's affine quantizations and come back as torch quantized tensors,
which torch builds as copies (it has no quantized tensor over foreign memory). Layouts and
types torch has no tensor for (nf4, mxfp4, float8, 4-bit integers, sparse and block-paged
layouts) raise hurray.UnsupportedError naming the tensor.
"""

from __future__ import annotations

import typing

import numpy as np
import torch

from hurray import _hurray
from hurray._errors import InvalidArgumentError, NotFoundError, UnsupportedError
from hurray._tensor import Tensor

__all__ = ["attach", "publish_state_dict", "state_dict"]

# The format's CUDA device tag (hurray.BufferHandle.device_tag).
_CUDA_DEVICE_TAG = 1
# torch's quantized types and the format's type of their stored integers.
_QUANTIZED_TYPES = {torch.qint8: np.int8, torch.quint8: np.uint8, torch.qint32: np.int32}
_TORCH_QUANTIZED_OF = {"int8": torch.qint8, "uint8": torch.quint8, "int32": torch.qint32}



def publish_state_dict(client: _hurray.Client, prefix: str,
                       module_or_state_dict: torch.nn.Module | typing.Mapping[str, torch.Tensor],
                       *, pool: str | None = None) -> dict[str, int]:
    """Publishes every tensor of a module's state dict (or of a mapping of names to tensors)
    under `prefix` + its key, as one set: all become visible together, or none does.

    Each tensor is copied once, into memory allocated in `pool` (None: "cpu" for CPU tensors,
    "cuda:N" for tensors of CUDA device N). Returns {key: version}. TypeError naming the first
    value that is not a torch.Tensor; hurray.UnsupportedError for a tensor of a layout or
    type the format cannot hold (sparse, float8 of torch versions that have it); the daemon's
    errors (a bad name, a full pool), each naming the first offender. On error nothing is
    published and every allocation is freed.
    """
    state: typing.Mapping[str, torch.Tensor]
    if isinstance(module_or_state_dict, torch.nn.Module):
        state = module_or_state_dict.state_dict()
    else:
        state = module_or_state_dict
    if not state:
        raise InvalidArgumentError(f"publish_state_dict({prefix!r}): the state dict is empty")
    names = [f"{prefix}{key}" for key in state]
    tensors: list[_hurray.WritableTensor] = []
    try:
        for name, (key, value) in zip(names, state.items()):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"publish_state_dict: {key!r} is a {type(value).__name__}, "
                                f"not a torch.Tensor")
            tensors.append(_allocated_copy(client, name, value.detach(), pool))
        versions = client.publish_batch(tensors, names)
    except BaseException:
        for tensor in tensors:
            tensor.cancel()
        raise
    return dict(zip(state, versions))


def state_dict(client: _hurray.Client, prefix: str) -> dict[str, torch.Tensor]:
    """Every tensor published under `prefix`, as {key: torch.Tensor} with the prefix taken
    off each name, acquired as one set (a concurrent publish_state_dict is seen whole or not
    at all).

    No byte is copied: each tensor maps the pool's pages (host tensors privately, see the
    module's text; GPU tensors as the view maps them) and holds its lease until torch frees
    it. Quantized tensors come as torch quantized tensors (copies). NotFoundError when
    nothing is published under `prefix`; hurray.UnsupportedError naming the first tensor
    torch has no type for.
    """
    if not prefix:
        raise InvalidArgumentError("state_dict: the prefix is empty")
    with client.batch_acquire(prefix=prefix) as batch:
        if len(batch) == 0:
            raise NotFoundError(f"state_dict: nothing is published under {prefix!r}")
        return {view.name[len(prefix):]: _torch_tensor(view) for view in batch}


def attach(module: torch.nn.Module, client: _hurray.Client, prefix: str, *,
           strict: bool = True, wait: float | None = None) -> torch.nn.Module:
    """Puts every parameter and persistent buffer of `module` on the tensors published under
    `prefix` (by publish_state_dict or `hurrayctl import --prefix`), without a copy; returns
    `module`.

    The module may be built on the "meta" device, so that it never allocates weights of its
    own: after attach its tensors are the published ones, on their device. Its tensors are
    acquired as one set, waiting up to `wait` seconds for the last of them to be published,
    and all are checked before any is replaced: NotFoundError (DeadlineExceededError after a
    wait) naming the first the module has and nothing is published for;
    InvalidArgumentError naming the first whose shape or dtype differs, or (strict) the
    first name under `prefix` the module has no parameter or buffer for. On error the
    module is as it was. Parameters keep their requires_grad; parameters tied to each other
    (one object under two keys) stay tied. The module's tensors hold the leases: they end
    when the module (or whatever replaced its tensors) lets them go. Non-persistent buffers
    stay the module's own.
    """
    targets = module.state_dict(keep_vars=True)
    if not targets:
        raise InvalidArgumentError("attach: the module has no parameters or buffers")
    if strict:
        own = {f"{prefix}{key}" for key in targets}
        unexpected = [summary.name for summary in client.list(prefix)
                      if summary.name not in own]
        if unexpected:
            raise InvalidArgumentError(
                f"attach: {unexpected[0]} is published but the module has no parameter or "
                f"buffer {unexpected[0][len(prefix):]!r} (strict=False ignores "
                f"{len(unexpected)} such)")
    with client.batch_acquire([f"{prefix}{key}" for key in targets], wait=wait) as batch:
        published = {key: _torch_tensor(view) for key, view in zip(targets, batch)}
    for key, current in targets.items():
        tensor = published[key]
        if tensor.shape != current.shape or tensor.dtype != current.dtype:
            raise InvalidArgumentError(
                f"attach: {prefix}{key} is {_describe(tensor)} but the module's {key} is "
                f"{_describe(current)}")
    replacements: dict[int, torch.nn.Parameter] = {}
    for key, current in targets.items():
        path, _, attribute = key.rpartition(".")
        owner = module.get_submodule(path)
        if owner._parameters.get(attribute) is current:  # pylint: disable=protected-access
            parameter = replacements.get(id(current))
            if parameter is None:
                parameter = torch.nn.Parameter(published[key],
                                               requires_grad=current.requires_grad)
                replacements[id(current)] = parameter
            owner._parameters[attribute] = parameter  # pylint: disable=protected-access
        else:
            owner._buffers[attribute] = published[key]  # pylint: disable=protected-access
    return module


def _describe(tensor: torch.Tensor) -> str:
    return f"{str(tensor.dtype).removeprefix('torch.')} {tuple(tensor.shape)}"


def _pool_of(tensor: torch.Tensor, pool: str | None) -> str:
    if pool is not None:
        return pool
    return f"cuda:{tensor.device.index or 0}" if tensor.is_cuda else "cpu"


def _allocated_copy(client: _hurray.Client, name: str, value: torch.Tensor,
                    pool: str | None) -> _hurray.WritableTensor:
    """`value` copied into a tensor allocated in the pool, ready to publish producer-synced."""
    if value.layout != torch.strided:
        raise UnsupportedError(f"publish_state_dict: {name} is a {value.layout} tensor; the "
                               f"format holds dense and quantized tensors")
    if value.is_quantized:
        return _allocated_quantized(client, name, value, _pool_of(value, pool))
    if value.is_cuda:
        # Producer-synced (not client.empty's Event handoff): the copy is complete, its stream
        # synchronized, before the publish.
        tensor = client.allocate(_hurray.Descriptor.dense(list(value.shape), value.dtype,
                                                          device_tag=_CUDA_DEVICE_TAG),
                                 _pool_of(value, pool))
    else:
        tensor = client.empty(list(value.shape), value.dtype, _pool_of(value, pool))
    try:
        destination = torch.from_dlpack(tensor)
        if value.dtype == torch.bool:
            destination = destination.view(torch.bool)  # DLPack 0.6 carries bool as uint8.
        destination.copy_(value)
        if value.is_cuda:
            torch.cuda.current_stream(value.device).synchronize()
    except BaseException:
        tensor.cancel()
        raise
    return tensor


def _allocated_quantized(client: _hurray.Client, name: str, value: torch.Tensor,
                         pool: str) -> _hurray.WritableTensor:
    """A torch per-tensor or per-channel affine tensor as the format's affine quantization."""
    if value.is_cuda or value.dtype not in _QUANTIZED_TYPES:
        raise UnsupportedError(f"publish_state_dict: {name} is a {value.dtype} tensor on "
                               f"{value.device}; the format holds CPU qint8, quint8 and qint32")
    stored = value.int_repr().contiguous().numpy()
    scheme = value.qscheme()
    if scheme == torch.per_tensor_affine:
        descriptor = _hurray.Descriptor.per_tensor_affine(
            list(stored.shape), stored.dtype, value.q_scale(), value.q_zero_point())
        buffers = [stored]
    elif scheme in (torch.per_channel_affine, torch.per_channel_affine_float_qparams):
        packed = Tensor.per_channel_affine(
            stored, value.q_per_channel_scales().numpy(),
            value.q_per_channel_zero_points().numpy(), axis=value.q_per_channel_axis())
        descriptor = packed.descriptor
        buffers = [np.frombuffer(buffer, dtype=np.uint8) for buffer in packed.buffers]
    else:
        raise UnsupportedError(f"publish_state_dict: {name} is quantized {scheme}; the format "
                               f"holds per-tensor and per-channel affine quantizations")
    tensor = client.allocate(descriptor, pool)
    try:
        for index, source in enumerate(buffers):
            destination = np.frombuffer(tensor.buffer(index), dtype=np.uint8)
            destination[:] = np.frombuffer(np.ascontiguousarray(source), dtype=np.uint8)
    except BaseException:
        tensor.cancel()
        raise
    return tensor


def _torch_tensor(view: _hurray.TensorView) -> torch.Tensor:
    """The view as a torch tensor: its pages (DLPack) for dense data, a copy for torch's
    quantized types; UnsupportedError naming the tensor for what torch has no tensor for."""
    descriptor = view.descriptor
    quantization = descriptor.quantization
    if descriptor.layout != "dense":
        raise UnsupportedError(f"{view.name}: torch has no tensor for the {descriptor.layout} "
                               f"layout; read its parts (view.values, view.indices, ...)")
    if quantization is None:
        try:
            tensor = torch.from_dlpack(view)
        except UnsupportedError as error:
            raise UnsupportedError(f"{view.name}: {error}") from None
        if tensor.dtype == torch.uint8 and descriptor.dtype == _hurray.bool_:
            return tensor.view(torch.bool)  # DLPack 0.6 carries bool as uint8.
        return tensor
    quantized_type = _TORCH_QUANTIZED_OF.get(descriptor.dtype.name)
    if quantized_type is None or quantization.kind not in ("per_tensor_affine",
                                                           "per_channel_affine"):
        raise UnsupportedError(f"{view.name}: torch has no tensor for {quantization.kind} "
                               f"{descriptor.dtype.name} data")
    stored = torch.from_numpy(np.array(view.values))
    if isinstance(quantization, _hurray.PerTensorAffine):
        return torch._make_per_tensor_quantized_tensor(  # pylint: disable=protected-access
            stored, quantization.scale, quantization.zero_point)
    assert isinstance(quantization, _hurray.PerChannelAffine)
    scales = torch.from_numpy(np.array(view.scales, dtype=np.float64))
    zero_points = (torch.zeros(scales.shape, dtype=torch.int64) if view.zero_points is None
                   else torch.from_numpy(np.array(view.zero_points, dtype=np.int64)))
    return torch._make_per_channel_quantized_tensor(  # pylint: disable=protected-access
        stored, scales, zero_points, quantization.axis)
