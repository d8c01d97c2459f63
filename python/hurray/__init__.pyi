"""Type stubs of the hurray module: zero-copy tensor exchange between processes (hurrayd).

The names and contracts are those of docs/python.md. The extension (hurray._hurray) defines
the classes and functions; hurray._errors the exceptions, re-exported here.
"""

import builtins
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, SupportsIndex

import numpy as np
import numpy.typing as npt

from hurray._errors import AbortedError as AbortedError
from hurray._errors import AlreadyExistsError as AlreadyExistsError
from hurray._errors import BufferError as BufferError
from hurray._errors import CancelledError as CancelledError
from hurray._errors import CopyRequiredError as CopyRequiredError
from hurray._errors import DataLossError as DataLossError
from hurray._errors import DeadlineExceededError as DeadlineExceededError
from hurray._errors import Error as Error
from hurray._errors import FailedPreconditionError as FailedPreconditionError
from hurray._errors import InternalError as InternalError
from hurray._errors import InvalidArgumentError as InvalidArgumentError
from hurray._errors import NotFoundError as NotFoundError
from hurray._errors import OutOfRangeError as OutOfRangeError
from hurray._errors import PermissionDeniedError as PermissionDeniedError
from hurray._errors import ResourceExhaustedError as ResourceExhaustedError
from hurray._errors import UnauthenticatedError as UnauthenticatedError
from hurray._errors import UnavailableError as UnavailableError
from hurray._errors import UnimplementedError as UnimplementedError
from hurray._errors import UnknownError as UnknownError
from hurray._errors import UnsupportedError as UnsupportedError
from hurray._errors import error_for as error_for

# The version of the hurray libraries the extension is built against ("0.1.0").
__version__: str

Shape = Sequence[SupportsIndex]
Layout = Literal["dense", "coo", "csr", "csc", "block_paged"]
Capsule = Any  # a PyCapsule named "hurray_tensor"

# --- The format ------------------------------------------------------------------------

class DType:
    """One element type of the format (every core ElementType has one)."""

    @property
    def name(self) -> str: ...
    @property
    def itemsize(self) -> int | None:
        """Bytes per element, None for the sub-byte types (int4, uint4, nf4, mxfp4)."""
    @property
    def numpy(self) -> np.dtype[Any] | None:
        """The NumPy dtype, None where NumPy has none (bfloat16, the float8 types)."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

DTypeLike = DType | str | np.dtype[Any] | type[np.generic] | Any  # Any: a torch.dtype

def dtype(x: DTypeLike) -> DType:
    """The hurray dtype of a hurray dtype, a NumPy dtype or name, or a torch.dtype."""

float32: DType
float16: DType
bfloat16: DType
float64: DType
int8: DType
int16: DType
int32: DType
int64: DType
uint8: DType
uint16: DType
uint32: DType
uint64: DType
bool_: DType
float8_e4m3fn: DType
float8_e5m2: DType
float8_e8m0: DType
complex64: DType
complex128: DType
int4: DType
uint4: DType
nf4: DType
mxfp4: DType

class BufferHandle:
    """An entry of a descriptor's buffer table (the format's buffer handle)."""

    @property
    def byte_size(self) -> int: ...
    @property
    def alignment(self) -> int: ...
    @property
    def device_tag(self) -> Any: ...
    @property
    def memory_class(self) -> Any: ...
    @property
    def sync_mode(self) -> Any: ...

class Quantization:
    """A descriptor's quantization: ``kind`` and that kind's fields."""

    @property
    def kind(self) -> Literal["per_tensor_affine", "per_channel_affine", "nf4", "mxfp"]: ...
    def __getattr__(self, field: str) -> Any: ...

class BufferPart:
    """What one buffer of a descriptor's table holds (hurray/buffer_parts.h)."""

    @property
    def index(self) -> int: ...
    @property
    def part(self) -> str: ...
    @property
    def field(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def element_strides(self) -> tuple[int, ...] | None: ...
    @property
    def byte_size(self) -> int: ...

class Descriptor:
    """A tensor descriptor (hurray::TensorDescriptor), validated by the core's rules."""

    @property
    def dtype(self) -> DType: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def layout(self) -> Layout: ...
    @property
    def quantization(self) -> Quantization | None: ...
    @property
    def buffer_handles(self) -> list[BufferHandle]: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def buffer_parts(self) -> tuple[BufferPart, ...]: ...
    @property
    def part_buffers(self) -> dict[str, int]: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> Descriptor: ...
    @staticmethod
    def dense(shape: Shape, dtype: DTypeLike) -> Descriptor: ...
    @staticmethod
    def per_channel_affine(shape: Shape, dtype: DTypeLike, axis: int,
                           scale_dtype: DTypeLike = ...,
                           zero_point_dtype: DTypeLike | None = None) -> Descriptor: ...
    @staticmethod
    def nf4(shape: Shape, block_size: int, scale_dtype: DTypeLike) -> Descriptor: ...
    @staticmethod
    def mxfp(*args: Any, **kwargs: Any) -> Descriptor: ...
    @staticmethod
    def coo(shape: Shape, dtype: DTypeLike, nnz: int,
            index_dtype: DTypeLike = ...) -> Descriptor: ...
    @staticmethod
    def csr(*args: Any, **kwargs: Any) -> Descriptor: ...
    @staticmethod
    def csc(*args: Any, **kwargs: Any) -> Descriptor: ...
    def __eq__(self, other: object) -> bool: ...

class Tensor:
    """An in-process tensor: a descriptor and its buffers (buffer i = table entry i)."""

    def __init__(self, descriptor: Descriptor, buffers: Sequence[Any]) -> None: ...
    @property
    def descriptor(self) -> Descriptor: ...
    @property
    def buffer_handles(self) -> list[BufferHandle]: ...
    @property
    def buffers(self) -> list[memoryview]: ...
    def numpy(self) -> npt.NDArray[Any]: ...
    def __hurray__(self) -> Capsule: ...
    @staticmethod
    def per_channel_affine(data: Any, scales: Any, zero_points: Any | None = None,
                           axis: int = 0) -> Tensor: ...
    @staticmethod
    def nf4(*args: Any, **kwargs: Any) -> Tensor: ...
    @staticmethod
    def mxfp(*args: Any, **kwargs: Any) -> Tensor: ...
    @staticmethod
    def coo(values: Any, indices: Any, shape: Shape) -> Tensor: ...
    @staticmethod
    def csr(values: Any, indptr: Any, indices: Any, shape: Shape) -> Tensor: ...
    @staticmethod
    def csc(values: Any, indptr: Any, indices: Any, shape: Shape) -> Tensor: ...

def from_hurray(obj: Any) -> Tensor:
    """The tensor behind ``obj.__hurray__()``; consumes the capsule."""

def from_numpy(array: npt.NDArray[Any], copy: bool | None = None) -> Tensor:
    """A Tensor over ``array`` (copy=False: never a copy, CopyRequiredError if needed)."""

def save(path: str | os.PathLike[str], tensors: Mapping[str, Any] | Any) -> None:
    """Writes tensors (name -> hurray.Tensor / ndarray / __hurray__ object, or one tensor,
    stored as "tensor") to a .hrry file, every buffer in descriptor order."""

def load(path: str | os.PathLike[str]) -> dict[str, Tensor]:
    """The tensors of a .hrry file by name, every buffer read back and checked."""

# --- The client ------------------------------------------------------------------------

class WritableTensor:
    """A tensor being written in pool memory: fill it in place, then publish (or cancel).

    Its arrays and memoryviews (and arrays derived from them) keep it alive. In the sealed
    pool, publish and cancel unmap the memory: while any of them is alive, publish,
    Client.publish_batch and cancel raise BufferError naming the tensor; release (del) them
    first.
    """

    @property
    def descriptor(self) -> Descriptor: ...
    @property
    def published_or_cancelled(self) -> bool: ...
    def buffer(self, index: int = 0) -> memoryview: ...
    def buffer_array(self, index: int) -> npt.NDArray[Any]: ...
    def numpy(self) -> npt.NDArray[Any]: ...
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...
    def __array__(self, dtype: Any = None) -> npt.NDArray[Any]: ...
    def publish(self, name: str, stream: int | Any | None = None, *,
                evictable: bool = False) -> int:
        """Publishes under name; the version. Sealed pool: BufferError while an array or
        memoryview over the memory is alive."""
    def publish_and_allocate(self, name: str, *,
                             evictable: bool = False) -> tuple[int, WritableTensor]:
        """Publishes under name, producer-synced, and allocates the next tensor of the same
        descriptor in the same pool in one round trip: (version, next tensor). Once the
        publish took effect, a next allocation the pool has no room for raises
        ResourceExhaustedError saying so. UnsupportedError for an Event-handoff tensor."""
    def cancel(self) -> None:
        """Frees the allocation unpublished. Sealed pool: BufferError while an array or
        memoryview over the memory is alive."""
    def __enter__(self) -> WritableTensor: ...
    def __exit__(self, kind: type[builtins.BaseException] | None,
                 value: builtins.BaseException | None, tb: TracebackType | None) -> None: ...

class TensorView:
    """A leased, read-only view of a published tensor; arrays made from it keep the lease."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def descriptor(self) -> Descriptor: ...
    @property
    def buffer_handles(self) -> list[BufferHandle]: ...
    @property
    def released(self) -> bool: ...
    @property
    def values(self) -> npt.NDArray[Any]: ...
    @property
    def indices(self) -> npt.NDArray[Any]: ...
    @property
    def indptr(self) -> npt.NDArray[Any]: ...
    @property
    def scales(self) -> npt.NDArray[Any]: ...
    @property
    def zero_points(self) -> npt.NDArray[Any]: ...
    @property
    def page_table(self) -> npt.NDArray[Any]: ...
    def buffer(self, index: int = 0) -> memoryview: ...
    def buffer_array(self, index: int) -> npt.NDArray[Any]: ...
    def numpy(self) -> npt.NDArray[Any]: ...
    def __array__(self, dtype: Any = None) -> npt.NDArray[Any]: ...
    def __dlpack__(self, *, stream: int | None = None) -> Capsule: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __hurray__(self) -> Capsule: ...
    def release(self, stream: int | Any | None = None) -> None: ...
    def __enter__(self) -> TensorView: ...
    def __exit__(self, kind: type[builtins.BaseException] | None,
                 value: builtins.BaseException | None, tb: TracebackType | None) -> None: ...

class TensorViewBatch(Sequence[TensorView]):
    """The views of one batch_acquire; release() ends every lease in one request."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> TensorView: ...  # type: ignore[override]
    def __iter__(self) -> Iterator[TensorView]: ...
    def release(self, stream: int | Any | None = None) -> None: ...
    def __enter__(self) -> TensorViewBatch: ...
    def __exit__(self, kind: type[builtins.BaseException] | None,
                 value: builtins.BaseException | None, tb: TracebackType | None) -> None: ...

class TensorSummary:
    name: str
    latest_version: int
    version_count: int
    dtype: DType
    shape: list[int]
    byte_size: int
    lease_count: int
    published_at: int  # nanoseconds since the epoch
    owner_uid: int  # The namespace's owner (the default access policy).

class BufferLocation:
    segment_id: int
    segment_size: int
    offset: int
    byte_size: int

class FenceLocation:
    segment_id: int
    segment_size: int
    offset: int
    value: int

class VersionSummary:
    version: int
    lease_count: int
    superseded: bool
    byte_size: int
    published_at: int

class TensorDetails:
    name: str
    version: int
    descriptor: Descriptor
    buffers: list[BufferLocation]
    fence: FenceLocation | None
    ready: bool
    pool: str
    published_at: int
    versions: list[VersionSummary]
    daemon_epoch: int
    owner_uid: int
    owner_user: str  # "" when the uid has no user name.

class PoolStats:
    name: str
    kind: str
    capacity_bytes: int
    used_bytes: int
    largest_free_bytes: int
    fragmentation: float
    segment_count: int
    allocation_count: int
    page_size_bytes: int
    huge_pages: str
    device_uuid: str
    device_name: str
    device_ordinal: int
    mechanism: str
    slab_bytes: int
    gpu_direct_rdma: bool
    slab_mappings: int
    read_only_slab_mappings: int
    fences_in_use: int
    fences_retired: int
    quarantined_bytes: int
    quarantined_ranges: int
    reserved_bytes: int
    namespaces: list[str]

class UidUsage:
    uid: int
    pending_bytes: int
    published_bytes: int
    leases: int
    sessions: int

class FastPathStats:
    directory_entries_used: int
    directory_entries: int
    lease_pages: int
    lease_slots: int
    pinned_versions: int
    pinned_bytes: int
    scans: int
    refused_names: int

class DaemonStats:
    pools: list[PoolStats]
    session_count: int
    lease_count: int
    tensor_count: int
    version_count: int
    pending_allocation_count: int
    daemon_epoch: int
    uptime: int
    published_bytes_total: int
    reclaimed_bytes_total: int
    closed_session_count: int
    closed_session_lease_count: int
    closed_session_allocation_count: int
    closed_session_allocation_bytes: int
    evicted_tensor_count: int
    evicted_bytes_total: int
    uids: list[UidUsage]
    refused_connection_count: int
    lost_tensor_count: int
    adopted_tensor_count: int
    fast_path: FastPathStats
    earlier_epoch_held_versions: int
    earlier_epoch_held_bytes: int
    quarantined_sessions: int

class WatchEvent:
    kind: Literal["published", "deleted", "evicted"]
    name: str
    version: int
    daemon_epoch: int

class Watch(Iterator[WatchEvent]):
    """The publishes, deletes and evictions under a prefix, as they happen."""

    def __iter__(self) -> Watch: ...
    def __next__(self) -> WatchEvent: ...
    def get(self, timeout: float | None = None) -> WatchEvent | None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Watch: ...
    def __exit__(self, kind: type[builtins.BaseException] | None,
                 value: builtins.BaseException | None, tb: TracebackType | None) -> None: ...

class Client:
    """A session with hurrayd. Blocking calls release the GIL."""

    @property
    def socket_path(self) -> str: ...
    @property
    def session_id(self) -> int: ...
    def empty(self, shape: Shape, dtype: DTypeLike, pool: str = "cpu") -> WritableTensor: ...
    def allocate(self, descriptor: Descriptor, pool: str = "cpu") -> WritableTensor: ...
    def publish(self, name: str, obj: Any, pool: str = "cpu", *,
                evictable: bool = False) -> int: ...
    def publish_batch(self, tensors: Sequence[WritableTensor],
                      names: Sequence[str]) -> builtins.list[int]:
        """Publishes tensors[i] under names[i], all visible together or none; the versions.
        BufferError for a sealed-pool tensor with an array or memoryview over it alive."""
    def import_safetensors(self, path: str | os.PathLike[str], prefix: str,
                           pool: str | None = None,
                           progress: Callable[[int, int], object] | None = None
                           ) -> dict[str, int | float]:
        """Publishes every tensor of a .safetensors file (or *.safetensors.index.json) under
        prefix + its name, all at once; {"tensors", "bytes", "seconds"}."""
    def load(self, path: str | os.PathLike[str], prefix: str = "", pool: str | None = None,
             progress: Callable[[int, int], object] | None = None) -> dict[str, int | float]:
        """Publishes every tensor of a .hrry file under prefix + its saved name, all at once."""
    def save(self, prefix: str, path: str | os.PathLike[str],
             progress: Callable[[int, int], object] | None = None) -> dict[str, int | float]:
        """Writes every tensor published under prefix to a .hrry file, as one set."""
    def acquire(self, name: str, wait: float | None = None, version: int | None = None,
                populate: bool = False, spin: float | None = None) -> TensorView: ...
    def batch_acquire(self, names: Sequence[str] = (), prefix: str = "",
                      wait: float | None = None) -> TensorViewBatch: ...
    def list(self, prefix: str = "") -> builtins.list[TensorSummary]: ...
    def describe(self, name: str, version: int = 0) -> TensorDetails: ...
    def stats(self) -> DaemonStats: ...
    def delete(self, name: str, version: int = 0) -> int: ...
    def watch(self, prefix: str = "") -> Watch: ...
    def close(self) -> None: ...
    def __enter__(self) -> Client: ...
    def __exit__(self, kind: type[builtins.BaseException] | None,
                 value: builtins.BaseException | None, tb: TracebackType | None) -> None: ...

def connect(socket: str | None = None, name: str = "python") -> Client:
    """Connects to hurrayd (socket None: $HURRAY_SOCKET or the default path)."""
