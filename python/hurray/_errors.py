"""The exceptions of the hurray module: one base class, one subclass per status code.

Every error the daemon or the client reports is raised as the subclass of its gRPC canonical
code, with the daemon's message kept as the exception's text. The format's own errors
(CopyRequiredError, UnsupportedError, BufferError) derive from Error too.
"""

import builtins

__all__ = [
    "AbortedError", "AlreadyExistsError", "BufferError", "CancelledError", "CopyRequiredError",
    "DataLossError", "DeadlineExceededError", "Error", "FailedPreconditionError",
    "InternalError", "InvalidArgumentError", "NotFoundError", "OutOfRangeError",
    "PermissionDeniedError", "ResourceExhaustedError", "UnauthenticatedError",
    "UnavailableError", "UnimplementedError", "UnknownError", "UnsupportedError", "error_for",
]


class Error(Exception):
    """Base class of every hurray error. ``code`` is the canonical code's name."""

    code = "UNKNOWN"

    def __init__(self, message: str = "") -> None:
        """An error carrying `message`, also kept as ``self.message``."""
        super().__init__(message)
        self.message = message


class CancelledError(Error):
    """The call was cancelled."""
    code = "CANCELLED"


class UnknownError(Error):
    """An error of no known kind."""
    code = "UNKNOWN"


class InvalidArgumentError(Error, ValueError):
    """An argument was wrong; the message names the field and the value."""
    code = "INVALID_ARGUMENT"


class DeadlineExceededError(Error, TimeoutError):
    """A wait ran out (an acquire whose tensor was not published in time)."""
    code = "DEADLINE_EXCEEDED"


class NotFoundError(Error, KeyError):
    """The tensor, version, allocation, pool or segment does not exist."""
    code = "NOT_FOUND"

    def __str__(self) -> str:  # KeyError would quote the message.
        return self.message


class AlreadyExistsError(Error):
    """The thing to create exists already."""
    code = "ALREADY_EXISTS"


class PermissionDeniedError(Error, PermissionError):
    """This process may not do that (socket mode, access policy, a read-only mapping)."""
    code = "PERMISSION_DENIED"


class ResourceExhaustedError(Error, MemoryError):
    """A pool, a quota or a limit is full."""
    code = "RESOURCE_EXHAUSTED"


class FailedPreconditionError(Error):
    """The call does not fit the current state (no CUDA pools, a published tensor)."""
    code = "FAILED_PRECONDITION"


class AbortedError(Error):
    """The call was aborted."""
    code = "ABORTED"


class OutOfRangeError(Error, IndexError):
    """An index past the end."""
    code = "OUT_OF_RANGE"


class UnimplementedError(Error, NotImplementedError):
    """The daemon does not implement the call."""
    code = "UNIMPLEMENTED"


class InternalError(Error):
    """A bug of the daemon or the client, or a reply that breaks the protocol."""
    code = "INTERNAL"


class UnavailableError(Error, ConnectionError):
    """No daemon answers (or it went away, and with it this client's session)."""
    code = "UNAVAILABLE"


class DataLossError(Error):
    """Data was lost: a GPU tensor whose producer ended before its data was ready."""
    code = "DATA_LOSS"


class UnauthenticatedError(Error):
    """The daemon no longer knows this client's session."""
    code = "UNAUTHENTICATED"


class CopyRequiredError(Error):
    """``copy=False`` was asked for, but the data cannot be used in place."""
    code = "FAILED_PRECONDITION"


class UnsupportedError(Error):
    """Something this version of the format cannot represent (an ABI version it lacks)."""
    code = "UNIMPLEMENTED"


class BufferError(Error, builtins.BufferError):  # noqa: A001 - the format's name (docs/python.md).
    """A buffer cannot be used: a released view, a consumed capsule."""
    code = "FAILED_PRECONDITION"


_BY_CODE = {
    cls.code: cls
    for cls in (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
                NotFoundError, AlreadyExistsError, PermissionDeniedError,
                ResourceExhaustedError, FailedPreconditionError, AbortedError,
                OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
                DataLossError, UnauthenticatedError)
}


def error_for(code: str, message: str) -> Error:
    """The exception of canonical code ``code`` ("NOT_FOUND") carrying ``message``."""
    return _BY_CODE.get(code, UnknownError)(message)
