"""WritableTensors of the sealed pool: publish and cancel unmap the memory, so they refuse
while an array or memoryview over it is alive; the CPU pool's arrays outlive publish."""

import gc
import textwrap

import numpy as np
import pytest

import hurray


def read_back(daemon, name):
    """The bytes of `name`, as a consumer in another process reads them."""
    code = textwrap.dedent(f"""
        import sys, hurray
        with hurray.connect(name="consumer") as client, client.acquire({name!r}) as view:
            sys.stdout.write(view.numpy().tobytes().hex())
    """)
    result = daemon.run_python(code)
    assert result.returncode == 0, result.stderr
    return bytes.fromhex(result.stdout)


def test_publish_is_refused_while_an_array_lives_and_succeeds_after_del(daemon, client):
    data = np.arange(256, dtype=np.float32)
    tensor = client.empty([256], "float32", pool="sealed")
    array = tensor.numpy()
    array[:] = data
    with pytest.raises(hurray.BufferError, match=r"publish 'sealed/refused'.*sealed pool.*del"):
        tensor.publish("sealed/refused")
    assert not tensor.published_or_cancelled
    assert float(array[3]) == 3.0  # Still mapped: the refusal changed nothing.
    del array
    assert tensor.publish("sealed/refused") == 1
    assert read_back(daemon, "sealed/refused") == data.tobytes()


@pytest.mark.parametrize("export", [
    lambda t: t.buffer(0),
    lambda t: t.buffer_array(0),
    lambda t: np.asarray(t),
    lambda t: t.numpy()[2:5],
    lambda t: memoryview(t.numpy()),
], ids=["buffer", "buffer_array", "__array__", "slice", "memoryview_of_array"])
def test_every_kind_of_export_holds_publish_back(client, export):
    tensor = client.empty([8], "int32", pool="sealed")
    held = export(tensor)
    with pytest.raises(hurray.BufferError, match="release"):
        tensor.publish("sealed/held")
    del held
    gc.collect()
    assert tensor.publish("sealed/held") >= 1


def test_a_temporary_array_fills_the_tensor_and_publish_works(daemon, client):
    data = np.arange(12, dtype=np.int16).reshape(3, 4)
    tensor = client.empty([3, 4], "int16", pool="sealed")
    tensor.numpy()[:] = data
    tensor.buffer(0)[:2] = b"\x07\x00"
    assert tensor.publish("sealed/temporary") == 1
    expected = data.copy()
    expected[0, 0] = 7
    assert read_back(daemon, "sealed/temporary") == expected.tobytes()


def test_cancel_is_refused_while_an_array_lives(client):
    tensor = client.empty([4], "uint8", pool="sealed")
    view = tensor.buffer(0)
    with pytest.raises(hurray.BufferError, match="cancel: .*sealed pool"):
        tensor.cancel()
    assert not tensor.published_or_cancelled
    view[0] = 1  # Still mapped and writable.
    del view
    tensor.cancel()
    assert tensor.published_or_cancelled


def test_publish_batch_names_the_tensor_with_an_array_alive(daemon, client):
    first = client.empty([4], "uint8", pool="sealed")
    second = client.empty([4], "uint8", pool="sealed")
    first.numpy()[:] = 1
    held = second.numpy()
    held[:] = 2
    with pytest.raises(hurray.BufferError, match=r"tensors\[1\] \('sealed/b'\)"):
        client.publish_batch([first, second], ["sealed/a", "sealed/b"])
    assert not first.published_or_cancelled and not second.published_or_cancelled
    del held
    assert client.publish_batch([first, second], ["sealed/a", "sealed/b"]) == [1, 1]
    assert read_back(daemon, "sealed/b") == b"\x02" * 4


def test_an_array_keeps_its_tensor_alive(client):
    array = client.empty([16], "uint8", pool="sealed").numpy()
    gc.collect()
    array[:] = 9  # The tensor (and its mapping) lives through the array's token.
    assert bytes(array) == b"\x09" * 16


def test_the_cpu_pool_still_publishes_with_arrays_alive(daemon, client):
    tensor = client.empty([5], "uint8", pool="cpu")
    array = tensor.numpy()
    array[:] = 5
    assert tensor.publish("cpu/with-array") == 1
    assert array.tolist() == [5] * 5  # Still mapped after publish.
    assert read_back(daemon, "cpu/with-array") == b"\x05" * 5
