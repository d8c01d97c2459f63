"""hurray.save and hurray.load: tensors to and from a .hrry file (docs/file-format.md), in
this process, without a daemon.

Every buffer of a tensor is saved, in descriptor order, and read back the same way: a
multi-buffer tensor (quantized, sparse, block-paged) round-trips byte for byte. A tensor
whose buffer count or sizes disagree with its descriptor's buffer table is refused on both
paths. The file appears whole or not at all.
"""

import os
import collections.abc

import numpy as np

from hurray import _hurray
from hurray._tensor import Tensor, from_hurray, from_numpy

__all__ = ["load", "save"]

# The name a single tensor given to save() is stored under.
SINGLE_TENSOR_NAME = "tensor"


def _as_tensor(name, value):
    """`value` as an object with .descriptor and .buffers (descriptor order)."""
    if isinstance(value, np.ndarray):
        return from_numpy(value)
    if hasattr(value, "descriptor") and hasattr(value, "buffers"):
        return value
    if hasattr(type(value), "__hurray__"):
        return from_hurray(value)
    raise TypeError(f"save: tensor {name!r} is a {type(value).__name__}, not a hurray.Tensor, "
                    "a numpy.ndarray or an object with __hurray__")


def save(path, tensors):
    """Writes `tensors` to the .hrry file at `path`: a mapping of name to tensor (a
    hurray.Tensor, a numpy.ndarray, or anything with __hurray__, such as a TensorView), or
    one tensor, stored under the name "tensor". Every buffer is written, in descriptor
    order. hurray.InvalidArgumentError naming the tensor when its buffers disagree with its
    descriptor's table; the file never appears half-written."""
    if isinstance(tensors, collections.abc.Mapping):
        items = tensors.items()
    else:
        items = [(SINGLE_TENSOR_NAME, tensors)]
    entries = []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"save: tensor names are str, not {type(name).__name__} ({name!r})")
        tensor = _as_tensor(name, value)
        entries.append((name, tensor.descriptor, list(tensor.buffers)))
    _hurray._save(os.fspath(path), entries)


def load(path):
    """The tensors of the .hrry file at `path`, by name, in file order: each a hurray.Tensor
    over fresh memory, its buffers in descriptor order. The whole layout is checked before
    anything is read (hurray.InvalidArgumentError naming the file, tensor and field), each
    buffer against its checksum (hurray.DataLossError), and each tensor's buffers against its
    descriptor's table before it is handed over."""
    return {
        name: Tensor(descriptor, buffers, copy=False)
        for name, descriptor, buffers in _hurray._load(os.fspath(path))
    }
