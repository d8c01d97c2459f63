"""WritableTensor.publish_and_allocate: a publish that allocates the next tensor like it."""

import numpy as np
import pytest

import hurray


def pending(client):
    return client.stats().pending_allocation_count


def test_a_stream_of_versions_each_read_back(client):
    before = pending(client)
    tensor = client.empty([256], np.float32)
    descriptor = tensor.descriptor
    for version in range(1, 6):
        tensor.numpy()[:] = version
        published, following = tensor.publish_and_allocate("stream/x")
        assert published == version
        assert tensor.published_or_cancelled
        assert not following.published_or_cancelled
        assert following.descriptor == descriptor
        with client.acquire("stream/x", version=version) as view:
            assert np.array_equal(view.numpy(), np.full(256, version, np.float32))
        tensor = following
    assert pending(client) == before + 1
    tensor.cancel()
    assert pending(client) == before
    client.delete("stream/x")


def test_no_room_for_the_next_raises_after_the_publish(client):
    # 40 MiB of the daemon's 64 MiB pool: the published tensor leaves no room for another.
    before = pending(client)
    tensor = client.empty([40 << 20], np.uint8)
    tensor.numpy()[:7] = 7
    with pytest.raises(hurray.ResourceExhaustedError,
                       match=r"'stream/big' version 1 was published; the next allocation"):
        tensor.publish_and_allocate("stream/big")
    assert tensor.published_or_cancelled
    with client.acquire("stream/big") as view:
        assert view.numpy()[:7].tolist() == [7] * 7
    assert pending(client) == before
    client.delete("stream/big")


def test_a_refused_publish_keeps_the_tensor(client):
    before = pending(client)
    tensor = client.empty([16], np.int32)
    with pytest.raises(hurray.InvalidArgumentError, match="bad name"):
        tensor.publish_and_allocate("bad name")
    assert not tensor.published_or_cancelled
    assert pending(client) == before + 1
    version, following = tensor.publish_and_allocate("stream/ok", evictable=True)
    assert version == 1
    with pytest.raises(hurray.BufferError):
        tensor.publish_and_allocate("stream/ok")
    following.cancel()
    assert pending(client) == before
    client.delete("stream/ok")
