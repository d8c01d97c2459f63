"""hurray: zero-copy tensor exchange between processes, through hurrayd."""

from hurray._errors import *  # noqa: F401,F403
from hurray._errors import BufferError  # noqa: A004 - the format's name (docs/python.md).
from hurray._hurray import *  # noqa: F401,F403
from hurray._file import load, save  # noqa: F401
from hurray._tensor import Tensor, from_hurray, from_numpy  # noqa: F401
