"""hurray: zero-copy tensor exchange between processes, through hurrayd."""

from hurray._errors import (  # noqa: A004 - BufferError is the format's name (docs/python.md).
    AbortedError, AlreadyExistsError, BufferError, CancelledError, CopyRequiredError,
    DataLossError, DeadlineExceededError, Error, FailedPreconditionError, InternalError,
    InvalidArgumentError, NotFoundError, OutOfRangeError, PermissionDeniedError,
    ResourceExhaustedError, UnauthenticatedError, UnavailableError, UnimplementedError,
    UnknownError, UnsupportedError, error_for,
)
from hurray._hurray import (
    __version__, BufferHandle, BufferLocation, BufferPart, Client, DType, DaemonStats,
    Descriptor, FastPathStats, FenceLocation, MIN_BUFFER_ALIGNMENT, MxfpQuantization,
    Nf4Quantization, PAGE_ALIGNMENT, PerChannelAffine, PerTensorAffine, PoolStats,
    TensorDetails, TensorSummary, TensorView, TensorViewBatch, UidUsage, VersionSummary, Watch,
    WatchEvent, WritableTensor, bfloat16, bool_, complex128, complex64, connect, dtype,
    float16, float32, float64, float8_e4m3fn, float8_e5m2, float8_e8m0, int16, int32, int4,
    int64, int8, mxfp4, nf4, uint16, uint32, uint4, uint64, uint8,
)
from hurray._file import load, save
from hurray._tensor import Tensor, from_hurray, from_numpy

# Every public name; `__version__` is the version of the hurray libraries the extension is
# built against.
__all__ = [
    "AbortedError", "AlreadyExistsError", "bfloat16", "bool_", "BufferError", "BufferHandle",
    "BufferLocation", "BufferPart", "CancelledError", "Client", "complex128", "complex64",
    "connect", "CopyRequiredError", "DaemonStats", "DataLossError", "DeadlineExceededError",
    "Descriptor", "DType", "dtype", "Error", "error_for", "FailedPreconditionError",
    "FastPathStats", "FenceLocation", "float16", "float32", "float64", "float8_e4m3fn",
    "float8_e5m2", "float8_e8m0", "from_hurray", "from_numpy", "int16", "int32", "int4",
    "int64", "int8", "InternalError", "InvalidArgumentError", "load", "MIN_BUFFER_ALIGNMENT",
    "mxfp4", "MxfpQuantization", "nf4", "Nf4Quantization", "NotFoundError", "OutOfRangeError",
    "PAGE_ALIGNMENT", "PerChannelAffine", "PermissionDeniedError", "PerTensorAffine",
    "PoolStats", "ResourceExhaustedError", "save", "Tensor", "TensorDetails", "TensorSummary",
    "TensorView", "TensorViewBatch", "UidUsage", "uint16", "uint32", "uint4", "uint64",
    "uint8", "UnauthenticatedError", "UnavailableError", "UnimplementedError", "UnknownError",
    "UnsupportedError", "VersionSummary", "Watch", "WatchEvent", "WritableTensor",
]
