"""The format's vocabulary: dtypes, buffer handles and descriptors, validated by the core."""

import numpy as np
import pytest
import torch

import hurray

ALL_TYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
             "float8_e4m3fn", "float8_e5m2", "int4", "uint4", "nf4", "mxfp4", "float8_e8m0"]
NUMPY_TYPES = {"bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32,
               "int64": np.int64, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
               "uint64": np.uint64, "float16": np.float16, "float32": np.float32,
               "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}
TORCH_TYPES = {"bool": torch.bool, "int8": torch.int8, "int16": torch.int16,
               "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8,
               "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
               "float64": torch.float64, "complex64": torch.complex64,
               "complex128": torch.complex128}


def module_dtype(name):
    return getattr(hurray, "bool_" if name == "bool" else name)


@pytest.mark.parametrize("name", ALL_TYPES)
def test_every_element_type_is_a_dtype(name):
    dtype = module_dtype(name)
    assert dtype.name == name
    assert hurray.dtype(name) is dtype
    assert hurray.dtype(dtype) is dtype
    assert dtype == hurray.dtype(name) and hash(dtype) == hash(hurray.dtype(name))
    assert dtype.itemsize == (None if dtype.bits == 4 else dtype.bits // 8)
    assert repr(dtype).startswith("hurray.")


@pytest.mark.parametrize("name", ALL_TYPES)
def test_numpy_maps_both_ways(name):
    dtype = module_dtype(name)
    if name not in NUMPY_TYPES:
        assert dtype.numpy is None
        return
    assert dtype.numpy == np.dtype(NUMPY_TYPES[name])
    assert hurray.dtype(NUMPY_TYPES[name]) is dtype
    assert hurray.dtype(np.dtype(NUMPY_TYPES[name])) is dtype
    assert hurray.dtype(np.dtype(NUMPY_TYPES[name]).str) is dtype


@pytest.mark.parametrize("name", sorted(TORCH_TYPES))
def test_torch_dtypes_map(name):
    assert hurray.dtype(TORCH_TYPES[name]) is module_dtype(name)


def test_bad_dtypes_are_invalid_arguments():
    for bad in ("float31", object, np.dtype(">f4"), 3.5):
        with pytest.raises(hurray.InvalidArgumentError):
            hurray.dtype(bad)
    with pytest.raises(hurray.InvalidArgumentError, match="float31"):
        hurray.dtype("float31")


def test_buffer_handle_fields_and_core_validation():
    handle = hurray.BufferHandle(1024, 64)
    assert (handle.byte_size, handle.alignment, handle.device_tag, handle.device,
            handle.memory_class, handle.sync_mode) == (1024, 64, 0, "cpu", "standard",
                                                       "producer_synced")
    assert not handle.is_empty and hurray.BufferHandle(0, 1).is_empty
    assert handle == hurray.BufferHandle(1024, 64)
    with pytest.raises(hurray.InvalidArgumentError, match="63"):
        hurray.BufferHandle(512, 63)
    with pytest.raises(hurray.InvalidArgumentError, match="32"):
        hurray.BufferHandle(512, 32)
    with pytest.raises(hurray.InvalidArgumentError, match="sync_mode"):
        hurray.BufferHandle(512, 64, sync_mode="eventually")


def every_descriptor():
    D = hurray.Descriptor
    return {
        "dense": D.dense([2, 3], hurray.float32),
        "strided": D.dense([2, 3], "float32", strides=[1, 2]),
        "scalar": D.dense([], hurray.int64),
        "empty": D.dense([0, 4], hurray.float32),
        "per_tensor": D.per_tensor_affine([8], hurray.int8, 0.5, 3),
        "per_channel": D.per_channel_affine([4, 3], hurray.int8, axis=1),
        "per_channel_zp": D.per_channel_affine([4, 3], "uint8", 0, "float16", hurray.int32),
        "nf4": D.nf4([128], 64, hurray.bfloat16),
        "mxfp": D.mxfp([4, 64], hurray.float8_e4m3fn, 32),
        "coo": D.coo([5, 5], hurray.float64, 7),
        "csr": D.csr([5, 6], hurray.float32, 4),
        "csc": D.csc([5, 6], hurray.float32, 4),
        "paged": D.block_paged([10, 4], hurray.float16, 4, 3, metadata={"k": "v"}),
    }


@pytest.mark.parametrize("kind", sorted(every_descriptor()))
def test_every_layout_and_quantization_round_trips_through_bytes(kind):
    descriptor = every_descriptor()[kind]
    back = hurray.Descriptor.from_bytes(descriptor.to_bytes())
    assert back == descriptor
    assert back.part_buffers == descriptor.part_buffers
    assert len(descriptor.buffer_handles) == len(descriptor.part_buffers)
    assert repr(back) == repr(descriptor)


def test_descriptor_fields():
    d = every_descriptor()
    assert d["dense"].shape == (2, 3) and d["dense"].dtype is hurray.float32
    assert d["dense"].layout == "dense" and d["dense"].quantization is None
    assert d["dense"].buffer_handles[0].byte_size == 24
    assert d["strided"].strides == (1, 2)
    assert d["empty"].buffer_handles[0].is_empty
    assert d["per_tensor"].quantization.kind == "per_tensor_affine"
    assert (d["per_tensor"].quantization.scale, d["per_tensor"].quantization.zero_point) == (0.5, 3)
    q = d["per_channel_zp"].quantization
    assert (q.kind, q.axis, q.scale_dtype, q.zero_point_dtype, q.zero_point_buffer) == (
        "per_channel_affine", 0, hurray.float16, hurray.int32, 2)
    assert d["per_channel_zp"].part_buffers == {"data": 0, "scales": 1, "zero_points": 2}
    assert [h.byte_size for h in d["per_channel_zp"].buffer_handles] == [12, 8, 16]
    assert d["nf4"].quantization.block_size == 64 and d["nf4"].dtype is hurray.nf4
    assert d["mxfp"].quantization.kind == "mxfp"
    assert d["coo"].layout == "coo" and d["coo"].nnz == 7
    assert [h.byte_size for h in d["coo"].buffer_handles] == [56, 7 * 2 * 8]
    assert d["csr"].part_buffers == {"values": 0, "indptr": 1, "indices": 2}
    assert d["csc"].layout == "csc" and d["csc"].buffer_handles[1].byte_size == 7 * 8
    assert (d["paged"].block_size, d["paged"].num_pages) == (4, 3)
    assert d["paged"].metadata == {"k": "v"}


def parts_of(descriptor):
    return [(p.part, p.index, p.dtype, p.shape) for p in descriptor.buffer_parts]


def test_buffer_parts_are_the_cores_table():
    d = every_descriptor()
    assert parts_of(d["dense"]) == [("data", 0, hurray.float32, (2, 3))]
    assert parts_of(d["coo"]) == [("values", 0, hurray.float64, (7,)),
                                  ("indices", 1, hurray.uint64, (7, 2))]
    assert parts_of(d["csc"]) == [("values", 0, hurray.float32, (4,)),
                                  ("indptr", 1, hurray.uint64, (7,)),
                                  ("indices", 2, hurray.uint64, (4,))]
    assert parts_of(d["paged"]) == [("data", 0, hurray.float16, (3, 4, 4)),
                                    ("page_table", 1, hurray.uint64, (3,))]
    assert parts_of(d["per_channel_zp"]) == [("data", 0, hurray.uint8, (4, 3)),
                                             ("scales", 1, hurray.float16, (4,)),
                                             ("zero_points", 2, hurray.int32, (4,))]
    assert parts_of(d["nf4"])[1] == ("scales", 1, hurray.bfloat16, (2,))
    assert parts_of(d["mxfp"])[1] == ("scales", 1, hurray.float8_e8m0, (4, 2))
    strided = d["strided"].buffer_parts[0]
    assert (strided.element_strides, strided.byte_size) == ((1, 2), 24)
    assert d["dense"].buffer_parts[0].element_strides is None
    assert d["coo"].buffer_parts[1].field == "layout.coo.indices_buffer"
    assert d["coo"].buffer_parts[1].name == "COO indices"
    for descriptor in d.values():
        assert [p.byte_size for p in sorted(descriptor.buffer_parts, key=lambda p: p.index)] == [
            h.byte_size for h in descriptor.buffer_handles]
        assert {p.part: p.index for p in descriptor.buffer_parts} == descriptor.part_buffers


def test_core_rules_and_messages():
    D = hurray.Descriptor
    cases = [
        (lambda: D.per_channel_affine([4, 3], hurray.int8, axis=2), "axis 2 is out of range"),
        (lambda: D.per_channel_affine([4], hurray.float32), "integer or float8"),
        (lambda: D.per_channel_affine([4], hurray.int8, 0, hurray.int8), "scale_type int8"),
        (lambda: D.nf4([128], 0), "block_size 0"),
        (lambda: D.csr([2, 2, 2], hurray.float32, 1), "rank-2"),
        (lambda: D.per_tensor_affine([4], hurray.int8, 0.0), "scale 0"),
        (lambda: D.dense([2], hurray.float32, alignment=32), "32"),
        (lambda: D.dense([2, 3], hurray.int4, strides=[3, 1]), "packed"),
        (lambda: D.dense([2], hurray.float32, device_tag=0x09), "0x09|9"),
    ]
    for build, message in cases:
        with pytest.raises(hurray.InvalidArgumentError, match=message):
            build()


def test_delivered_buffers_are_checked_against_the_table():
    descriptor = hurray.Descriptor.per_channel_affine([4, 3], hurray.int8)
    with pytest.raises(hurray.InvalidArgumentError, match="2|3"):
        descriptor.check_buffers([hurray.BufferHandle(12, 64)])
    with pytest.raises(hurray.InvalidArgumentError, match="12|16"):
        descriptor.check_buffers([hurray.BufferHandle(12, 64), hurray.BufferHandle(12, 64)])
    descriptor.check_buffers([hurray.BufferHandle(12, 64), hurray.BufferHandle(16, 128)])


def test_bad_bytes_are_invalid_arguments():
    with pytest.raises(hurray.InvalidArgumentError):
        hurray.Descriptor.from_bytes(b"\xff\xff\xff")


def test_descriptors_pickle():
    import pickle
    for descriptor in every_descriptor().values():
        assert pickle.loads(pickle.dumps(descriptor)) == descriptor
