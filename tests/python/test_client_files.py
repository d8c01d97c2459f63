"""Client.import_safetensors, Client.save and Client.load through a real hurrayd."""

import json
import struct

import numpy as np
import pytest

import hurray

_DTYPES = {"F32": np.float32, "F64": np.float64, "I8": np.int8, "U8": np.uint8,
           "I16": np.int16, "I32": np.int32, "I64": np.int64, "F16": np.float16}


def write_safetensors(path, tensors, header_override=None):
    """A .safetensors file of `tensors` (name -> (dtype string, ndarray)), in order."""
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, array) in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    header.update(header_override or {})
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def _model():
    rng = np.random.default_rng(5)
    tensors = {}
    for i, (dtype, numpy_dtype) in enumerate(_DTYPES.items()):
        array = (rng.random((3, i + 2)) * 100).astype(numpy_dtype)
        tensors[f"layers.{i}.weight"] = (dtype, array)
    return tensors


def _empty_pool(client):
    stats = client.stats()
    cpu = next(pool for pool in stats.pools if pool.name == "cpu")
    return (stats.tensor_count, stats.pending_allocation_count, cpu.used_bytes) == (0, 0, 0)


def _delete_all(client, prefix):
    for summary in client.list(prefix):
        client.delete(summary.name)


def test_an_import_publishes_every_tensor_byte_for_byte(tmp_path, client):
    path = tmp_path / "model.safetensors"
    model = _model()
    write_safetensors(path, model)
    calls = []
    summary = client.import_safetensors(path, prefix="st/",
                                        progress=lambda done, total: calls.append((done, total)))
    total = sum(array.nbytes for _, array in model.values())
    assert summary["tensors"] == len(model) and summary["bytes"] == total
    assert summary["seconds"] > 0
    assert calls and calls[-1] == (total, total)
    with client.batch_acquire(prefix="st/") as views:
        assert sorted(view.name for view in views) == sorted(f"st/{n}" for n in model)
        for view in views:
            _, array = model[view.name.removeprefix("st/")]
            assert view.descriptor.shape == array.shape
            assert bytes(view.buffer(0)) == array.tobytes()
    _delete_all(client, "st/")


@pytest.mark.parametrize("override, message", [
    ({"layers.0.weight": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 12]}},
     "layers.0.weight"),
    ({"layers.1.weight": {"dtype": "XX", "shape": [3, 3], "data_offsets": [24, 96]}}, "XX"),
    ({"layers.2.weight": {"dtype": "I8", "shape": [3, 4], "data_offsets": [0, 12]}},
     "layers.2.weight"),
])
def test_a_broken_file_publishes_nothing_and_leaves_nothing_allocated(tmp_path, client, override,
                                                                      message):
    path = tmp_path / "broken.safetensors"
    write_safetensors(path, _model(), override)
    with pytest.raises(hurray.InvalidArgumentError, match=message):
        client.import_safetensors(path, prefix="broken/")
    assert _empty_pool(client)


def test_a_prefix_that_makes_a_bad_name_is_refused_before_anything_is_allocated(tmp_path,
                                                                                client):
    path = tmp_path / "model.safetensors"
    write_safetensors(path, _model())
    with pytest.raises(hurray.InvalidArgumentError, match="layers.0.weight"):
        client.import_safetensors(path, prefix="")
    assert _empty_pool(client)


def test_the_wrong_call_for_a_file_is_refused_naming_the_right_one(tmp_path, client):
    with pytest.raises(hurray.InvalidArgumentError, match="load reads those"):
        client.import_safetensors(tmp_path / "x.hrry", prefix="p/")
    with pytest.raises(hurray.InvalidArgumentError, match="import_safetensors reads"):
        client.load(tmp_path / "x.safetensors")
    with pytest.raises(hurray.NotFoundError):
        client.import_safetensors(tmp_path / "missing.safetensors", prefix="p/")


def test_save_then_load_round_trips_multi_buffer_tensors(tmp_path, client):
    rng = np.random.default_rng(9)
    quantized = hurray.Tensor.per_channel_affine(
        rng.integers(-128, 127, size=(4, 8), dtype=np.int8), rng.random(4).astype(np.float32),
        rng.integers(-3, 3, size=4, dtype=np.int8))
    coo = hurray.Tensor.coo(np.array([1.0, 2.0], np.float32), [[0, 1], [2, 2]], (3, 3))
    dense = hurray.from_numpy(np.arange(100, dtype=np.float64))
    saved = {"rt/quantized": quantized, "rt/coo": coo, "rt/dense": dense}
    for name, tensor in saved.items():
        client.publish(name, tensor)
    path = tmp_path / "set.hrry"
    summary = client.save("rt/", path)
    assert summary["tensors"] == 3
    assert summary["bytes"] == sum(b.nbytes for t in saved.values() for b in t.buffers)
    # The file is an ordinary .hrry file: the format-level reader sees the same tensors.
    on_disk = hurray.load(path)
    assert sorted(on_disk) == sorted(saved)
    _delete_all(client, "rt/")

    assert client.load(path, prefix="copy/")["tensors"] == 3
    assert client.load(path)["tensors"] == 3  # Without a prefix: the saved names.
    for name, tensor in saved.items():
        for published in (f"copy/{name}", name):
            with client.acquire(published) as view:
                assert view.descriptor == tensor.descriptor
                assert [bytes(view.buffer(i)) for i in range(len(tensor.buffers))] == [
                    bytes(b) for b in tensor.buffers]
                assert [bytes(b) for b in on_disk[name].buffers] == [
                    bytes(b) for b in tensor.buffers]
    _delete_all(client, "copy/")
    _delete_all(client, "rt/")


def test_saving_an_empty_prefix_is_not_found_and_no_file_appears(tmp_path, client):
    with pytest.raises(hurray.NotFoundError, match="nothing/"):
        client.save("nothing/", tmp_path / "none.hrry")
    assert not (tmp_path / "none.hrry").exists()


def test_an_exception_in_progress_is_raised_after_the_import(tmp_path, client):
    path = tmp_path / "model.safetensors"
    write_safetensors(path, _model())
    calls = []

    def progress(done, total):
        calls.append(done)
        raise KeyError("stop")

    with pytest.raises(KeyError, match="stop"):
        client.import_safetensors(path, prefix="raised/", progress=progress)
    assert len(calls) == 1
    _delete_all(client, "raised/")


def test_a_sharded_model_is_imported_through_its_index(tmp_path, client):
    model = _model()
    names = list(model)
    shards = {"model-1.safetensors": names[:4], "model-2.safetensors": names[4:]}
    weight_map = {}
    for shard, shard_names in shards.items():
        write_safetensors(tmp_path / shard, {name: model[name] for name in shard_names})
        weight_map.update({name: shard for name in shard_names})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    assert client.import_safetensors(index, prefix="sharded/")["tensors"] == len(model)
    with client.batch_acquire(prefix="sharded/") as views:
        for view in views:
            assert bytes(view.buffer(0)) == model[view.name.removeprefix("sharded/")][1].tobytes()
    assert len(views) == len(model)
    _delete_all(client, "sharded/")
