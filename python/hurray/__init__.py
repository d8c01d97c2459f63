"""hurray: zero-copy tensor exchange between processes, through hurrayd."""

from hurray._hurray import *  # noqa: F401,F403
