"""A client outlives its daemon: after kill -9 of hurrayd and a new daemon on the same
directory, the next call reconnects by itself, and a view of the old daemon stays readable."""

import numpy as np
import pytest

import hurray
from conftest import Daemon


def test_next_call_after_daemon_kill_works_and_old_view_stays_readable(tmp_path):
    first = Daemon(tmp_path)
    second = None
    try:
        with first.connect("reconnect") as client:
            before = np.arange(4096, dtype=np.float32)
            client.publish("re/before", before)
            old_epoch = client.stats().daemon_epoch
            with client.acquire("re/before") as old_view:
                first.process.kill()
                first.process.wait()
                second = Daemon(tmp_path)  # The same socket paths.

                after = np.full(1024, 7, dtype=np.int64)
                client.publish("re/after", after)  # The first call after the restart.
                assert client.stats().daemon_epoch != old_epoch
                with client.acquire("re/after") as view:
                    np.testing.assert_array_equal(view.numpy(), after)
                np.testing.assert_array_equal(old_view.numpy(), before)
                with pytest.raises(hurray.UnavailableError, match="restarted"):
                    old_view.release()
            client.delete("re/after")
    finally:
        first.stop()
        if second is not None:
            second.stop()
