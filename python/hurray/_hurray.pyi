"""Type stubs of the extension module hurray._hurray.

Its public names are typed once, where users see them (hurray/__init__.pyi), and re-exported
here; this file adds the private helpers that the package's own modules call (_tensor.py,
_file.py). mypy.stubtest checks both files against the extension (scripts/lint.sh stubs).
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from hurray import _Pybind11Type
from hurray import MIN_BUFFER_ALIGNMENT as MIN_BUFFER_ALIGNMENT
from hurray import PAGE_ALIGNMENT as PAGE_ALIGNMENT
from hurray import BufferHandle as BufferHandle
from hurray import BufferLocation as BufferLocation
from hurray import BufferPart as BufferPart
from hurray import Client as Client
from hurray import DaemonStats as DaemonStats
from hurray import Descriptor as Descriptor
from hurray import DType as DType
from hurray import FastPathStats as FastPathStats
from hurray import FenceLocation as FenceLocation
from hurray import MxfpQuantization as MxfpQuantization
from hurray import Nf4Quantization as Nf4Quantization
from hurray import PerChannelAffine as PerChannelAffine
from hurray import PerTensorAffine as PerTensorAffine
from hurray import PoolStats as PoolStats
from hurray import TensorDetails as TensorDetails
from hurray import TensorSummary as TensorSummary
from hurray import TensorView as TensorView
from hurray import TensorViewBatch as TensorViewBatch
from hurray import UidUsage as UidUsage
from hurray import VersionSummary as VersionSummary
from hurray import Watch as Watch
from hurray import WatchEvent as WatchEvent
from hurray import WritableTensor as WritableTensor
from hurray import __version__ as __version__
from hurray import bfloat16 as bfloat16
from hurray import bool_ as bool_
from hurray import complex64 as complex64
from hurray import complex128 as complex128
from hurray import connect as connect
from hurray import dtype as dtype
from hurray import float8_e4m3fn as float8_e4m3fn
from hurray import float8_e5m2 as float8_e5m2
from hurray import float8_e8m0 as float8_e8m0
from hurray import float16 as float16
from hurray import float32 as float32
from hurray import float64 as float64
from hurray import int4 as int4
from hurray import int8 as int8
from hurray import int16 as int16
from hurray import int32 as int32
from hurray import int64 as int64
from hurray import mxfp4 as mxfp4
from hurray import nf4 as nf4
from hurray import uint4 as uint4
from hurray import uint8 as uint8
from hurray import uint16 as uint16
from hurray import uint32 as uint32
from hurray import uint64 as uint64

class _CapsuleBuffer(metaclass=_Pybind11Type):
    """One buffer of a consumed capsule: read-only bytes, through the buffer protocol."""


def _tensor_capsule(descriptor: Descriptor, buffers: Sequence[tuple[int, BufferHandle]],
                    owner: object) -> Any:
    """The "hurray_tensor" capsule over (address, BufferHandle) pairs that owner keeps alive."""

def _open_capsule(capsule: Any) -> tuple[Descriptor, tuple[BufferHandle, ...],
                                         tuple[_CapsuleBuffer, ...]]:
    """Consumes a "hurray_tensor" capsule: (descriptor, buffer handles, buffers)."""

def _save(path: str, tensors: Sequence[tuple[str, Descriptor, Sequence[Any]]]) -> None:
    """Writes (name, descriptor, buffers) tuples to the .hrry file at path."""

def _load(path: str) -> list[tuple[str, Descriptor, list[npt.NDArray[np.uint8]]]]:
    """The (name, descriptor, [uint8 ndarray per buffer]) tuples of the .hrry file at path."""
