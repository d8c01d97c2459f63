"""The format's C ABI through ctypes, with the signatures the format documents give (version 4).

A binding written from the documents declares its functions as these tests do; they run
the documents' sequences against the libhurray.so the hurray module loaded, build a capsule
the way a version-4 producer following the documents does and hand it to hurray.from_hurray,
and hand the module's own capsules to the documents' C consumer (the cookbook's "Reading a
capsule from outside Python" blocks, built by tests/c_abi as a library).
"""
import ctypes
import gc
import os
import sys

import numpy as np
import pytest

import hurray
from conftest import aligned

HURRAY_OK = 0
HURRAY_ERR_BUFFER_TOO_SMALL = -3
HURRAY_ERR_SYNC_MODE_MISMATCH = -4

c_void_p, c_uint8, c_uint32, c_uint64, c_size_t = (
    ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t)
POINTER, byref = ctypes.POINTER, ctypes.byref
STATUS = ctypes.c_int32
RELEASE = ctypes.CFUNCTYPE(None, c_void_p, c_void_p)
OWNER_RELEASE = ctypes.CFUNCTYPE(None, c_void_p)


def documented_library():
    """libhurray.so with the documents' signatures: buffers and descriptors are destroyed
    through their handle, lists and contexts through the address of their pointer."""
    library = ctypes.CDLL("libhurray.so.0")  # The one the hurray module loaded.
    signatures = {
        "hurray_c_abi_version": (c_uint32, []),
        "hurray_buffer_from_ptr": (STATUS, [c_void_p, c_uint64, c_uint64, c_uint8, c_uint8,
                                            c_uint8, RELEASE, c_void_p, POINTER(c_void_p)]),
        "hurray_buffer_destroy": (STATUS, [c_void_p]),
        "hurray_buffer_byte_size": (STATUS, [c_void_p, POINTER(c_uint64)]),
        "hurray_buffer_data_ptr": (STATUS, [c_void_p, POINTER(c_void_p)]),
        "hurray_buffer_list_new": (STATUS, [c_uint64, POINTER(c_void_p)]),
        "hurray_buffer_list_push": (STATUS, [c_void_p, c_void_p]),
        "hurray_buffer_list_len": (STATUS, [c_void_p, POINTER(c_uint64)]),
        "hurray_buffer_list_get": (STATUS, [c_void_p, c_uint64, POINTER(c_void_p)]),
        "hurray_buffer_list_destroy": (STATUS, [POINTER(c_void_p)]),
        "hurray_descriptor_decode": (STATUS, [c_void_p, c_size_t, POINTER(c_void_p)]),
        "hurray_descriptor_rank": (STATUS, [c_void_p, POINTER(c_uint32)]),
        "hurray_descriptor_shape": (STATUS, [c_void_p, POINTER(c_uint64), POINTER(c_size_t)]),
        "hurray_descriptor_element_type_tag": (STATUS, [c_void_p, POINTER(c_uint8)]),
        "hurray_descriptor_destroy": (STATUS, [c_void_p]),
        "hurray_descriptor_encode": (STATUS, [c_void_p, POINTER(c_void_p), POINTER(c_size_t)]),
        "hurray_bytes_free": (None, [c_void_p]),
        "hurray_tensor_context_new": (STATUS, [c_void_p, c_size_t, OWNER_RELEASE, c_void_p,
                                               POINTER(c_void_p)]),
        "hurray_tensor_context_abi_version": (STATUS, [c_void_p, POINTER(c_uint32)]),
        "hurray_tensor_context_descriptor": (STATUS, [c_void_p, POINTER(c_void_p),
                                                      POINTER(c_uint64)]),
        "hurray_tensor_context_destroy": (STATUS, [POINTER(c_void_p)]),
        "hurray_buffer_handoff_producer_synced": (STATUS, [c_void_p]),
    }
    for name, (result, arguments) in signatures.items():
        function = getattr(library, name)
        function.restype, function.argtypes = result, arguments
    return library


@pytest.fixture(scope="module")
def lib():
    return documented_library()


def test_the_library_is_version_4(lib):
    assert lib.hurray_c_abi_version() == 4


def test_buffer_from_ptr_then_destroy_through_the_handle(lib):
    released = []
    release = RELEASE(lambda data, context: released.append(data))
    memory = aligned(4096)
    handle = c_void_p()
    assert lib.hurray_buffer_from_ptr(memory.ctypes.data, 4096, 64, 0x00, 0x00, 0x00, release,
                                      None, byref(handle)) == HURRAY_OK
    size = c_uint64()
    assert lib.hurray_buffer_byte_size(handle, byref(size)) == HURRAY_OK
    assert size.value == 4096
    assert lib.hurray_buffer_destroy(handle) == HURRAY_OK  # The handle, not its address.
    assert released == [memory.ctypes.data]


def test_decode_shape_query_and_destroy_through_the_handle(lib):
    encoded = hurray.Descriptor.dense([2, 3, 4], hurray.float32).to_bytes()
    desc = c_void_p()
    assert lib.hurray_descriptor_decode(encoded, len(encoded), byref(desc)) == HURRAY_OK
    rank = c_uint32()
    assert lib.hurray_descriptor_rank(desc, byref(rank)) == HURRAY_OK
    assert rank.value == 3

    cap = c_size_t(0)  # The documents' query-only call, then the one that fills.
    assert lib.hurray_descriptor_shape(desc, None, byref(cap)) == HURRAY_ERR_BUFFER_TOO_SMALL
    assert cap.value == 3
    dims = (c_uint64 * cap.value)()
    assert lib.hurray_descriptor_shape(desc, dims, byref(cap)) == HURRAY_OK
    assert list(dims) == [2, 3, 4]

    tag = c_uint8()
    assert lib.hurray_descriptor_element_type_tag(desc, byref(tag)) == HURRAY_OK
    assert tag.value == 12  # HURRAY_ELEMENT_FLOAT32

    again, length = c_void_p(), c_size_t()
    assert lib.hurray_descriptor_encode(desc, byref(again), byref(length)) == HURRAY_OK
    assert ctypes.string_at(again, length.value) == encoded
    lib.hurray_bytes_free(again)
    assert lib.hurray_descriptor_destroy(desc) == HURRAY_OK


class CapsuleApi:
    """The CPython capsule calls a producer and a consumer outside the module use."""

    def __init__(self):
        api = ctypes.pythonapi
        api.PyCapsule_New.restype = ctypes.py_object
        api.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
        api.PyCapsule_SetContext.argtypes = [ctypes.py_object, c_void_p]
        api.PyCapsule_GetPointer.restype = c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        api.PyCapsule_GetContext.restype = c_void_p
        api.PyCapsule_GetContext.argtypes = [ctypes.py_object]
        api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
        self.api = api


def test_a_capsule_from_a_documents_producer_is_read_by_the_hurray_module(lib):
    """A version-4 producer written from the documents: its buffer wrapped with
    hurray_buffer_from_ptr, a list, and a context carrying the descriptor."""
    values = aligned(6 * 4).view(np.float32)
    values[:] = np.arange(6, dtype=np.float32) * 1.5
    data_released, owner_released = [], []
    release = RELEASE(lambda data, context: data_released.append(data))
    owner_release = OWNER_RELEASE(lambda context: owner_released.append(context))

    buffer, buffer_list, context = c_void_p(), c_void_p(), c_void_p()
    assert lib.hurray_buffer_from_ptr(values.ctypes.data, values.nbytes, 64, 0x00, 0x00, 0x00,
                                      release, None, byref(buffer)) == HURRAY_OK
    assert lib.hurray_buffer_list_new(1, byref(buffer_list)) == HURRAY_OK
    assert lib.hurray_buffer_list_push(buffer_list, buffer) == HURRAY_OK
    encoded = hurray.Descriptor.dense([2, 3], hurray.float32).to_bytes()
    assert lib.hurray_tensor_context_new(encoded, len(encoded), owner_release, None,
                                         byref(context)) == HURRAY_OK

    capi = CapsuleApi()
    capsule = capi.api.PyCapsule_New(buffer_list, b"hurray_tensor", None)
    assert capi.api.PyCapsule_SetContext(capsule, context) == 0
    producer = type("Producer", (), {"__hurray__": lambda self, stream=None: capsule})()

    tensor = hurray.from_hurray(producer)
    np.testing.assert_array_equal(tensor.numpy(), values.reshape(2, 3))
    assert tensor.numpy().ctypes.data == values.ctypes.data  # Zero copy.
    del tensor, producer, capsule
    gc.collect()
    # The consumer owned the list and the context: each released exactly once.
    assert owner_released == [None]
    assert data_released == [values.ctypes.data]


def test_a_context_of_another_abi_version_is_refused(lib):
    """Every ABI version keeps the context's version first; a consumer reads only that."""
    foreign_context = (c_uint32 * 8)(3)  # A version-3 producer's context.
    buffer_list = c_void_p()
    assert lib.hurray_buffer_list_new(0, byref(buffer_list)) == HURRAY_OK
    capi = CapsuleApi()
    capsule = capi.api.PyCapsule_New(buffer_list, b"hurray_tensor", None)
    assert capi.api.PyCapsule_SetContext(capsule, ctypes.addressof(foreign_context)) == 0
    producer = type("Producer", (), {"__hurray__": lambda self, stream=None: capsule})()
    with pytest.raises(hurray.UnsupportedError, match="version 3"):
        hurray.from_hurray(producer)
    assert capi.api.PyCapsule_GetPointer(capsule, b"hurray_tensor") == buffer_list.value
    assert lib.hurray_buffer_list_destroy(byref(buffer_list)) == HURRAY_OK


@pytest.mark.skipif("HURRAY_TEST_DOCUMENT_CONSUMER" not in os.environ,
                    reason="the documents' C consumer is built by tests/c_abi (ctest sets it)")
def test_the_modules_capsule_is_read_by_the_documents_c_consumer():
    consumer = ctypes.CDLL(os.environ["HURRAY_TEST_DOCUMENT_CONSUMER"])
    consumer.hurray_document_consume.restype = ctypes.c_int
    consumer.hurray_document_consume.argtypes = [c_void_p, c_void_p]
    owner = hurray.Tensor.coo(np.array([5.0, 7.0], np.float32), [[0, 0], [1, 1]], [2, 2])
    before = sys.getrefcount(owner)

    capsule = owner.__hurray__()
    capi = CapsuleApi()
    buffer_list = capi.api.PyCapsule_GetPointer(capsule, b"hurray_tensor")
    context = capi.api.PyCapsule_GetContext(capsule)
    # Consumed, as the protocol does it: the C consumer now owns the list and the context.
    assert capi.api.PyCapsule_SetName(capsule, b"used_hurray_tensor") == 0
    assert sys.getrefcount(owner) == before + 1  # The context holds the producer.

    assert consumer.hurray_document_consume(buffer_list, context) == 0
    assert sys.getrefcount(owner) == before  # Its owner_release ran, once.
    del capsule
    gc.collect()
    assert sys.getrefcount(owner) == before
