"""Client.publish_batch: a set of tensors published all at once, or not at all."""

import numpy as np
import pytest

import hurray


def _filled(client, count, shape=(16,)):
    tensors = []
    for i in range(count):
        tensor = client.empty(shape, np.float32)
        tensor.numpy()[:] = i
        tensors.append(tensor)
    return tensors


def _nothing_published(client, prefix):
    return client.list(prefix) == [] and client.stats().tensor_count == 0


def test_a_batch_publishes_every_tensor_with_one_version_each(client):
    tensors = _filled(client, 5)
    names = [f"batch/t{i}" for i in range(5)]
    assert client.publish_batch(tensors, names) == [1] * 5
    assert all(tensor.published_or_cancelled for tensor in tensors)
    with client.batch_acquire(prefix="batch/") as views:
        seen = {view.name: view.numpy().copy() for view in views}
    assert sorted(seen) == names
    for i, name in enumerate(names):
        np.testing.assert_array_equal(seen[name], np.full(16, i, np.float32))
    assert client.publish_batch(_filled(client, 1), ["batch/t0"]) == [2]
    for name in names:
        client.delete(name)


def test_watchers_see_one_event_per_name_in_request_order(client):
    names = [f"watched/t{i}" for i in range(3)]
    with client.watch(prefix="watched/") as events:
        client.publish_batch(_filled(client, 3), names)
        got = [events.get(timeout=5) for _ in names]
    assert [(event.kind, event.name, event.version) for event in got] == [
        ("published", name, 1) for name in names]
    for name in names:
        client.delete(name)


def test_a_duplicate_name_refuses_the_whole_batch_and_the_tensors_stay_yours(client):
    tensors = _filled(client, 3)
    with pytest.raises(hurray.InvalidArgumentError, match="dup/b"):
        client.publish_batch(tensors, ["dup/a", "dup/b", "dup/b"])
    assert _nothing_published(client, "dup/")
    assert not any(tensor.published_or_cancelled for tensor in tensors)
    # Still writable and publishable, one by one.
    tensors[2].numpy()[:] = 9
    assert [t.publish(f"dup/{n}") for t, n in zip(tensors, "abc")] == [1, 1, 1]
    np.testing.assert_array_equal(client.acquire("dup/c").numpy(), np.full(16, 9, np.float32))
    for name in ("dup/a", "dup/b", "dup/c"):
        client.delete(name)


def test_a_bad_name_is_refused_naming_it_and_nothing_is_published(client):
    tensors = _filled(client, 2)
    with pytest.raises(hurray.InvalidArgumentError, match="no-namespace"):
        client.publish_batch(tensors, ["bad/ok", "no-namespace"])
    assert _nothing_published(client, "bad/")
    for tensor in tensors:
        tensor.cancel()
    assert client.stats().pending_allocation_count == 0


def test_mismatched_lengths_and_an_empty_batch_are_refused(client):
    tensors = _filled(client, 2)
    with pytest.raises(hurray.InvalidArgumentError):
        client.publish_batch(tensors, ["len/a"])
    with pytest.raises(hurray.InvalidArgumentError):
        client.publish_batch([], [])
    assert _nothing_published(client, "len/")
    for tensor in tensors:
        tensor.cancel()


def test_a_tensor_listed_twice_or_already_published_is_refused_by_position(client):
    first, second = _filled(client, 2)
    with pytest.raises(hurray.InvalidArgumentError, match=r"tensors\[1\] is tensors\[0\]"):
        client.publish_batch([first, first], ["twice/a", "twice/b"])
    first.publish("twice/a")
    with pytest.raises(hurray.BufferError, match=r"tensors\[0\] was already published"):
        client.publish_batch([first, second], ["twice/a", "twice/b"])
    assert [summary.name for summary in client.list("twice/")] == ["twice/a"]
    second.cancel()
    client.delete("twice/a")


def test_a_tensor_of_another_client_is_refused(daemon, client):
    with daemon.connect(name="other") as other:
        foreign = other.empty((4,), np.uint8)
        mine = client.empty((4,), np.uint8)
        with pytest.raises(hurray.InvalidArgumentError):
            client.publish_batch([mine, foreign], ["foreign/a", "foreign/b"])
        assert _nothing_published(client, "foreign/")
        foreign.cancel()
        mine.cancel()
