"""The warm loop's two calls, client.acquire(name) and view.release(), are methods of
CPython's own (python/src/fast_method.h): they behave exactly as the pybind11-bound ones,
which serve every other form of the call."""

import numpy as np
import pytest

import hurray
from hurray import _hurray


def lease_count(client):
    return client.stats().lease_count


def test_the_two_calls_are_fast_methods():
    assert type(_hurray.Client.__dict__["acquire"]).__name__ == "method_descriptor"
    assert type(_hurray.TensorView.__dict__["release"]).__name__ == "method_descriptor"
    # Their docstrings are the bound methods'.
    assert "wait: Optional[float] = None" in hurray.Client.acquire.__doc__
    assert "Ends this view's access" in hurray.TensorView.release.__doc__


def test_a_warm_acquire_is_a_fast_path_view_with_the_bytes(client):
    data = np.arange(512, dtype=np.uint64)
    client.publish("fast/a", data)
    with client.acquire("fast/a") as first:  # A lease: the version is new to this client.
        assert lease_count(client) == 1
    assert lease_count(client) == 0
    for _ in range(100):
        view = client.acquire("fast/a")
        assert lease_count(client) == 0  # A pin in the lease page, not a lease.
        assert view.version == 1
        assert np.array_equal(view.numpy(), data)
        view.release()
        view.release()  # Again: nothing left to end, as before.
        with pytest.raises(hurray.BufferError):
            view.numpy()
    del first


def test_a_warm_view_released_with_arrays_alive_keeps_them_valid(client):
    client.publish("fast/arrays", np.full(64, 7, dtype=np.int32))
    client.acquire("fast/arrays").release()
    view = client.acquire("fast/arrays")
    array = view.numpy()
    view.release()
    assert array.sum() == 7 * 64
    del array


def test_a_newer_version_is_leased_then_served_fast(client):
    client.publish("fast/next", np.zeros(8))
    client.acquire("fast/next").release()
    client.acquire("fast/next").release()
    client.publish("fast/next", np.ones(8))
    with client.acquire("fast/next") as view:
        assert view.version == 2
        assert view.numpy().sum() == 8
    with client.acquire("fast/next") as view:
        assert view.version == 2


def test_every_other_form_is_the_bound_methods(client):
    client.publish("fast/forms", np.arange(4, dtype=np.int64))
    client.acquire("fast/forms").release()
    for view in (client.acquire("fast/forms", None),
                 client.acquire("fast/forms", wait=0.5),
                 client.acquire(name="fast/forms"),
                 client.acquire("fast/forms", version=1),
                 client.acquire("fast/forms", populate=True)):
        assert view.numpy().tolist() == [0, 1, 2, 3]
        view.release(stream=None)
    with pytest.raises(hurray.NotFoundError, match="fast/none"):
        client.acquire("fast/none")
    with pytest.raises(hurray.NotFoundError):
        client.acquire("fast/forms", version=9)
    with pytest.raises(TypeError):
        client.acquire()
    with pytest.raises(TypeError):
        client.acquire(7)
    with pytest.raises(TypeError):
        client.acquire("fast/forms", bogus=1)
    with pytest.raises(TypeError):
        client.acquire("fast/\ud800")  # Not UTF-8.
    view = client.acquire("fast/forms")
    with pytest.raises(TypeError):
        view.release(1, 2)
    view.release()


def test_a_closed_client_refuses_as_before(daemon):
    client = daemon.connect()
    client.publish("fast/closed", np.zeros(2))
    client.acquire("fast/closed").release()
    view = client.acquire("fast/closed")
    client.close()
    with pytest.raises(hurray.FailedPreconditionError, match="closed"):
        client.acquire("fast/closed")
    view.release()  # The view kept the session; its pin ends here.


def test_a_name_outside_the_alphabet_is_refused_as_before(client):
    with pytest.raises(hurray.InvalidArgumentError, match="outside"):
        client.acquire("fast/\u00e9")
