"""GPU views of the Python client against a real hurrayd whose CUDA pool "cuda:0" lives on the
software CUDA driver (tests/softcuda/): DLPack export, the stream-ordered handoff, errors.

The CUDA work goes through the driver API by ctypes (_CUDA_PRELUDE), never by dereferencing
a device address from Python, so the same tests hold on a real GPU. This process loads
softcuda by its full path before the client first dlopens "libcuda.so.1", which then finds
it loaded (by its soname); consumers run in child processes whose LD_LIBRARY_PATH names
softcuda. Producers that must write device memory use the C client (libhurray-client.so)
through ctypes: the Python WritableTensor of a CUDA pool exposes no device address (see
test_python_producer_fills_gpu_tensor_through_its_device_address).
"""

import ctypes
import json
import mmap
import os
import queue
import subprocess
import sys
import tempfile
import textwrap
import threading

import numpy as np
import pytest

import hurray
from conftest import Daemon, wait_for

_SOFTCUDA_DIR = os.environ.get("HURRAY_TEST_SOFTCUDA_LIBRARY_DIR", "")
_SOFTCUDA_LIBRARY = os.path.join(_SOFTCUDA_DIR, "libcuda.so.1")
if not _SOFTCUDA_DIR or not os.path.isfile(_SOFTCUDA_LIBRARY):
    pytest.skip("no software CUDA driver: HURRAY_TEST_SOFTCUDA_LIBRARY_DIR is unset or has no "
                "libcuda.so.1 (a build without CUDA support has none)", allow_module_level=True)
_CLIENT_LIBRARY = os.environ.get("HURRAY_TEST_CLIENT_LIBRARY", "")
if not os.path.isfile(_CLIENT_LIBRARY):
    pytest.skip("HURRAY_TEST_CLIENT_LIBRARY names no libhurray-client.so (the producers' C "
                "client)", allow_module_level=True)

# Bounded waits, in seconds: a child's whole run, one line from a child, an acquire.
_CHILD_TIMEOUT = 30
_LINE_TIMEOUT = 10
_ACQUIRE_WAIT = 5

# The device registers host memory read-only (softcuda's default is 0, as on x86 hosts), so
# consumers' relay words are set by a stream waiting on the daemon's fence page: the path of
# a GPU that allows it (the C++ softcuda tests run both). Set for the daemon, this process
# and every child.
_SOFTCUDA_KNOBS = {"HURRAY_SOFTCUDA_ATTR_READ_ONLY_HOST_REGISTER_SUPPORTED": "1"}

# The driver API through ctypes and a DLPack reader: run in this process and prepended to
# every child's code.
_CUDA_PRELUDE = textwrap.dedent('''
    import ctypes
    import mmap

    CUDA_SUCCESS = 0
    CUDA_ERROR_NOT_READY = 600
    CU_STREAM_NON_BLOCKING = 0x1
    CU_STREAM_WAIT_VALUE_GEQ = 0x0
    CU_MEMHOSTREGISTER_DEVICEMAP = 0x2
    KDLCUDA = 2


    class PinnedMemory:
        """Page-aligned host memory registered with the driver (DEVICEMAP): .host, .device."""

        def __init__(self, cuda, size):
            self.size = size
            self.memory = mmap.mmap(-1, size)
            self.host = ctypes.addressof(ctypes.c_char.from_buffer(self.memory))
            cuda.check("cuMemHostRegister_v2", ctypes.c_void_p(self.host),
                       ctypes.c_size_t(size), ctypes.c_uint(CU_MEMHOSTREGISTER_DEVICEMAP))
            device = ctypes.c_uint64()
            cuda.check("cuMemHostGetDevicePointer_v2", ctypes.byref(device),
                       ctypes.c_void_p(self.host), ctypes.c_uint(0))
            self.device = device.value

        def bytes(self):
            return ctypes.string_at(self.host, self.size)

        def write(self, data):
            ctypes.memmove(self.host, data, len(data))

        def close(self, cuda):
            """Unregisters and unmaps: a later mmap at the same address registers anew."""
            cuda.check("cuMemHostUnregister", ctypes.c_void_p(self.host))
            self.memory.close()


    class Cuda:
        """The CUDA driver API through ctypes, device 0's primary context current."""

        def __init__(self, library="libcuda.so.1"):
            self.lib = ctypes.CDLL(library)
            self.check("cuInit", ctypes.c_uint(0))
            device = ctypes.c_int()
            self.check("cuDeviceGet", ctypes.byref(device), ctypes.c_int(0))
            self.context = ctypes.c_void_p()
            self.check("cuDevicePrimaryCtxRetain", ctypes.byref(self.context), device)
            self.check("cuCtxSetCurrent", self.context)

        def check(self, name, *args):
            result = getattr(self.lib, name)(*args)
            if result != CUDA_SUCCESS:
                raise RuntimeError(f"{name} failed with CUresult {result}")

        def stream(self):
            stream = ctypes.c_void_p()
            self.check("cuStreamCreate", ctypes.byref(stream),
                       ctypes.c_uint(CU_STREAM_NON_BLOCKING))
            return stream.value

        def copy_to_device(self, address, data):
            self.check("cuMemcpyHtoD_v2", ctypes.c_uint64(address), data,
                       ctypes.c_size_t(len(data)))

        def copy_to_host(self, address, size):
            out = ctypes.create_string_buffer(size)
            self.check("cuMemcpyDtoH_v2", out, ctypes.c_uint64(address), ctypes.c_size_t(size))
            return out.raw

        def copy_to_device_async(self, address, host, size, stream):
            self.check("cuMemcpyHtoDAsync_v2", ctypes.c_uint64(address), ctypes.c_void_p(host),
                       ctypes.c_size_t(size), ctypes.c_void_p(stream))

        def copy_to_host_async(self, host, address, size, stream):
            self.check("cuMemcpyDtoHAsync_v2", ctypes.c_void_p(host), ctypes.c_uint64(address),
                       ctypes.c_size_t(size), ctypes.c_void_p(stream))

        def wait_value(self, stream, address, value):
            self.check("cuStreamWaitValue64_v2", ctypes.c_void_p(stream),
                       ctypes.c_uint64(address), ctypes.c_uint64(value),
                       ctypes.c_uint(CU_STREAM_WAIT_VALUE_GEQ))

        def record(self, stream):
            """An event recorded on `stream` (softcuda has no cuStreamQuery: query this)."""
            event = ctypes.c_void_p()
            self.check("cuEventCreate", ctypes.byref(event), ctypes.c_uint(0))
            self.check("cuEventRecord", event, ctypes.c_void_p(stream))
            return event.value

        def query(self, event):
            return self.lib.cuEventQuery(ctypes.c_void_p(event))

        def synchronize(self, stream):
            self.check("cuStreamSynchronize", ctypes.c_void_p(stream))


    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]


    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                    ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64)]


    class DLManagedTensor(ctypes.Structure):
        pass


    DLManagedTensor._fields_ = [
        ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]

    _capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    _capsule_pointer.restype = ctypes.c_void_p
    _capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    _capsule_rename = ctypes.pythonapi.PyCapsule_SetName
    _capsule_rename.restype = ctypes.c_int
    _capsule_rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
    _USED_NAME = ctypes.c_char_p(b"used_dltensor")  # Must outlive the capsule.


    class ConsumedDLPack:
        """A "dltensor" capsule taken over as a DLPack consumer does; release() calls its
        deleter (which ends the capsule's share of the lease)."""

        def __init__(self, capsule):
            pointer = _capsule_pointer(capsule, b"dltensor")
            if _capsule_rename(capsule, _USED_NAME) != 0:
                raise RuntimeError("PyCapsule_SetName failed")
            self.managed = ctypes.cast(pointer, ctypes.POINTER(DLManagedTensor))
            tensor = self.managed.contents.dl_tensor
            self.data = tensor.data or 0
            self.device = (tensor.device.device_type, tensor.device.device_id)
            self.dtype = (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
            self.shape = [tensor.shape[i] for i in range(tensor.ndim)]
            self.strides = ([tensor.strides[i] for i in range(tensor.ndim)]
                            if tensor.strides else None)
            self.byte_offset = tensor.byte_offset

        def summary(self):
            return {"data": self.data, "device": list(self.device), "dtype": list(self.dtype),
                    "shape": self.shape, "strides": self.strides,
                    "byte_offset": self.byte_offset}

        def release(self):
            if self.managed is not None:
                self.managed.contents.deleter(self.managed)
                self.managed = None


    class CProducer:
        """A producer through the C client (libhurray-client.so) by ctypes. Never in a process
        that imported hurray (see test_c_client_and_python_module_share_a_process)."""

        def __init__(self, library, socket):
            self.lib = ctypes.CDLL(library)
            self.lib.hurray_last_error_message.restype = ctypes.c_char_p
            self.client = ctypes.c_void_p()
            self.check("hurray_client_connect", socket.encode(), b"gpu-producer",
                       ctypes.byref(self.client))

        def check(self, name, *args):
            status = getattr(self.lib, name)(*args)
            if status != 0:
                message = (self.lib.hurray_last_error_message() or b"").decode()
                raise RuntimeError(f"{name}: status {status}: {message}")

        def allocate(self, descriptor_bytes, pool="cuda:0"):
            """(allocation, device address of buffer 0, its size)."""
            descriptor = ctypes.c_void_p()
            self.check("hurray_descriptor_decode", descriptor_bytes,
                       ctypes.c_size_t(len(descriptor_bytes)), ctypes.byref(descriptor))
            allocation = ctypes.c_void_p()
            try:
                self.check("hurray_client_allocate", self.client, descriptor, pool.encode(),
                           ctypes.byref(allocation))
            finally:
                self.lib.hurray_descriptor_destroy(descriptor)
            data = ctypes.c_void_p()
            size = ctypes.c_uint64()
            self.check("hurray_allocation_buffer", allocation, ctypes.c_uint64(0),
                       ctypes.byref(data), ctypes.byref(size))
            return allocation, data.value, size.value

        def publish(self, allocation, name):
            version = ctypes.c_uint64()
            self.check("hurray_allocation_publish", ctypes.byref(allocation), name.encode(),
                       ctypes.byref(version))
            return version.value

        def publish_after(self, allocation, name, stream):
            version = ctypes.c_uint64()
            self.check("hurray_allocation_publish_after", ctypes.byref(allocation),
                       name.encode(), ctypes.c_void_p(stream), ctypes.byref(version))
            return version.value

        def close(self):
            self.lib.hurray_client_close(ctypes.byref(self.client))
''')
exec(_CUDA_PRELUDE)  # pylint: disable=exec-used  # The same source runs in the children.


def _path_without(path_list, directory):
    return ":".join(entry for entry in path_list.split(":") if entry and entry != directory)


def _softcuda_environment(**extra):
    """This process's environment with softcuda first on LD_LIBRARY_PATH and its knobs."""
    rest = _path_without(os.environ.get("LD_LIBRARY_PATH", ""), _SOFTCUDA_DIR)
    return dict(os.environ, LD_LIBRARY_PATH=f"{_SOFTCUDA_DIR}:{rest}".rstrip(":"),
                **_SOFTCUDA_KNOBS, **extra)


def _child_command(code, *args):
    return [sys.executable, "-c", _CUDA_PRELUDE + textwrap.dedent(code), *map(str, args)]


def _run_child(env, code, *args):
    """Runs `code` (after the prelude) in a separate /usr/bin/python3; its result."""
    return subprocess.run(_child_command(code, *args), env=env, timeout=_CHILD_TIMEOUT,
                          capture_output=True, text=True, check=False)


class _Child:
    """A child process (the prelude, then `code`) spoken to line by line: it prints one JSON
    object a line, and reads a line of stdin where it waits for the test. Every read is
    bounded by _LINE_TIMEOUT; its stderr goes to a file, read when it ends."""

    def __init__(self, env, code, *args):
        self._errors = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(_child_command(code, *args), env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._errors, text=True)
        self._lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def read_json(self):
        try:
            line = self._lines.get(timeout=_LINE_TIMEOUT)
        except queue.Empty:
            line = None
        if line is None:
            status, errors = self.finish()
            pytest.fail(f"the child gave no line within {_LINE_TIMEOUT} s; exit status "
                        f"{status}; stderr:\n{errors}")
        return json.loads(line)

    def send(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def finish(self):
        """Closes its stdin and waits for its exit (killing it past _CHILD_TIMEOUT):
        (exit status, stderr)."""
        if not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.process.wait(_CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._errors.seek(0)
        return self.process.returncode, self._errors.read()


# --- Descriptors: Python builds dense CPU ones only; a CUDA one with an Event handoff is
# the same protobuf with device_tag and sync_mode set on its buffer (descriptor.proto).

_BUFFERS_FIELD = 12  # TensorDescriptor.buffers
_DEVICE_TAG_FIELD = 3  # BufferHandle.device_tag
_SYNC_MODE_FIELD = 5  # BufferHandle.sync_mode
_DEVICE_CUDA = 1
_SYNC_PRODUCER_SYNCED = 0
_SYNC_EVENT = 1


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _read_varint(message, position):
    value = 0
    shift = 0
    while True:
        byte = message[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _fields(message):
    """(field number, whole field's bytes, payload of a length-delimited field or None)."""
    position = 0
    while position < len(message):
        start = position
        key, position = _read_varint(message, position)
        payload = None
        if key & 7 == 0:
            _, position = _read_varint(message, position)
        elif key & 7 == 2:
            length, position = _read_varint(message, position)
            payload = message[position:position + length]
            position += length
        else:
            raise ValueError(f"wire type {key & 7} is not in descriptors")
        yield key >> 3, message[start:position], payload


def _cuda_descriptor(shape, dtype, sync_mode):
    """The encoding of a dense descriptor whose one buffer is CUDA, with `sync_mode`."""
    out = bytearray()
    for number, raw, payload in _fields(hurray.Descriptor.dense(shape, dtype).to_bytes()):
        if number != _BUFFERS_FIELD:
            out += raw
            continue
        handle = b"".join(field for field_number, field, _ in _fields(payload)
                          if field_number not in (_DEVICE_TAG_FIELD, _SYNC_MODE_FIELD))
        handle += _varint(_DEVICE_TAG_FIELD << 3) + _varint(_DEVICE_CUDA)
        if sync_mode:
            handle += _varint(_SYNC_MODE_FIELD << 3) + _varint(sync_mode)
        out += _varint(_BUFFERS_FIELD << 3 | 2) + _varint(len(handle)) + handle
    encoded = bytes(out)
    handles = hurray.Descriptor.from_bytes(encoded).buffer_handles  # Validates it.
    expected_mode = "event" if sync_mode == _SYNC_EVENT else "producer_synced"
    assert handles[0].device_tag == _DEVICE_CUDA and handles[0].sync_mode == expected_mode
    return encoded


# --- Fixtures and helpers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def cuda():
    """softcuda in this process, loaded by full path before the client first needs the
    driver (its dlopen("libcuda.so.1") then finds this one by soname)."""
    os.environ.update(_SOFTCUDA_KNOBS)
    return Cuda(_SOFTCUDA_LIBRARY)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory, cuda):  # pylint: disable=redefined-outer-name,unused-argument
    """A hurrayd of this module whose CUDA pool "cuda:0" is on softcuda."""
    running = Daemon(tmp_path_factory.mktemp("hurrayd-gpu"), env=_softcuda_environment())
    with running.connect(name="gpu-stats") as client:
        pools = {pool.name: pool.kind for pool in client.stats().pools}
    if pools.get("cuda:0") != "cuda":
        running.stop()
        pytest.fail(f"hurrayd on softcuda made no CUDA pool cuda:0 (pools {pools}); log:\n"
                    f"{running.log()}")
    yield running
    running.stop()


def _child_environment(daemon):  # pylint: disable=redefined-outer-name
    """A child's: softcuda, the daemon's socket and the C client's library."""
    return _softcuda_environment(HURRAY_SOCKET=daemon.socket,
                                 HURRAY_CLIENT_LIBRARY=_CLIENT_LIBRARY)


def _data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# A producer through the C client (it does not import hurray): allocates `descriptor` in
# cuda:0, fills it with `data` and publishes it as `name`. "synced": copies, then publishes
# producer-synced. "held": queues on its stream a wait for a private host word, then the
# copy, publishes after that stream, and writes the word when the test sends a line. Then
# waits for stdin to close (EOF releases the word as well: no hang if the test dies).
_PRODUCER = """
    import json, os, sys
    name, descriptor, data, mode = sys.argv[1], bytes.fromhex(sys.argv[2]), \\
        bytes.fromhex(sys.argv[3]), sys.argv[4]
    cuda = Cuda()
    producer = CProducer(os.environ["HURRAY_CLIENT_LIBRARY"], os.environ["HURRAY_SOCKET"])
    allocation, address, size = producer.allocate(descriptor)
    assert address and size == len(data), (address, size, len(data))
    if mode == "synced":
        cuda.copy_to_device(address, data)
        print(json.dumps({"version": producer.publish(allocation, name)}), flush=True)
    else:
        word = PinnedMemory(cuda, mmap.PAGESIZE)
        stream = cuda.stream()
        cuda.wait_value(stream, word.device, 1)
        source = PinnedMemory(cuda, size)
        source.write(data)
        cuda.copy_to_device_async(address, source.host, size, stream)
        version = producer.publish_after(allocation, name, stream)
        print(json.dumps({"version": version}), flush=True)
        sys.stdin.readline()
        ctypes.c_uint64.from_address(word.host).value = 1
        cuda.synchronize(stream)
        print(json.dumps({"released": True}), flush=True)
    sys.stdin.read()
    producer.close()
"""


class _Producer:
    """A _PRODUCER child; stop() ends it (releasing a held stream) and checks its exit."""

    def __init__(self, daemon, name, data, sync_mode, mode):  # pylint: disable=redefined-outer-name
        descriptor = _cuda_descriptor(data.shape, data.dtype, sync_mode)
        self.child = _Child(_child_environment(daemon), _PRODUCER, name, descriptor.hex(),
                            data.tobytes().hex(), mode)
        self.version = self.child.read_json()["version"]

    def release(self):
        self.child.send("release")
        assert self.child.read_json() == {"released": True}

    def stop(self):
        status, errors = self.child.finish()
        assert status == 0, errors


# --- Producer-synced ----------------------------------------------------------------------

# Acquires argv[1] and reads it back through every kind of __dlpack__ stream argument;
# prints what the view and each capsule said, and the bytes read.
_READ_BACK_CONSUMER = """
    import json, sys, hurray
    name, size = sys.argv[1], int(sys.argv[2])
    cuda = Cuda()
    out = {"capsules": {}}
    with hurray.connect(name="gpu-consumer") as client, \\
            client.acquire(name, wait=float(sys.argv[3])) as view:
        out["dlpack_device"] = list(view.__dlpack_device__())
        try:
            view.numpy()
            out["numpy_error"] = None
        except hurray.Error as error:
            out["numpy_error"] = type(error).__name__
        own = cuda.stream()
        for label, stream in (("none", None), ("legacy", 1), ("per_thread", 2),
                              ("no_sync", -1), ("own", own)):
            tensor = ConsumedDLPack(view.__dlpack__(stream=stream))
            summary = tensor.summary()
            if label == "own":
                landing = PinnedMemory(cuda, size)
                cuda.copy_to_host_async(landing.host, tensor.data, size, own)
                cuda.synchronize(own)
                summary["bytes"] = landing.bytes().hex()
            else:
                summary["bytes"] = cuda.copy_to_host(tensor.data, size).hex()
            tensor.release()
            out["capsules"][label] = summary
    print(json.dumps(out))
"""


def test_producer_synced_gpu_tensor_reads_back_through_dlpack_in_another_process(daemon):  # pylint: disable=redefined-outer-name
    data = _data((16, 33), seed=1)
    producer = _Producer(daemon, "gpu/synced", data, _SYNC_PRODUCER_SYNCED, "synced")
    try:
        assert producer.version == 1
        result = _run_child(_child_environment(daemon), _READ_BACK_CONSUMER, "gpu/synced",
                            data.nbytes, _ACQUIRE_WAIT)
    finally:
        producer.stop()
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["dlpack_device"] == [KDLCUDA, 0]
    assert out["numpy_error"] == "UnsupportedError"
    pointers = set()
    for label, capsule in out["capsules"].items():
        assert capsule["device"] == [KDLCUDA, 0], label
        assert capsule["dtype"] == [2, 32, 1], label  # kDLFloat, 32 bits, 1 lane.
        assert capsule["shape"] == list(data.shape), label
        assert capsule["strides"] is None, label  # Row-major.
        assert capsule["byte_offset"] == 0, label
        assert capsule["data"] != 0 and capsule["data"] % 64 == 0, label
        assert bytes.fromhex(capsule["bytes"]) == data.tobytes(), label
        pointers.add(capsule["data"])
    assert len(pointers) == 1  # Every capsule of one view points at its one mapping.


_CUDA_ARRAY_INTERFACE_CONSUMER = """
    import json, sys, hurray
    cuda = Cuda()
    with hurray.connect(name="gpu-consumer") as client, \\
            client.acquire(sys.argv[1], wait=float(sys.argv[2])) as view:
        if not hasattr(view, "__cuda_array_interface__"):
            print(json.dumps(None))
            sys.exit(0)
        interface = dict(view.__cuda_array_interface__)
        tensor = ConsumedDLPack(view.__dlpack__(stream=-1))
        interface["dlpack_data"] = tensor.data
        interface["bytes"] = cuda.copy_to_host(interface["data"][0], int(sys.argv[3])).hex()
        tensor.release()
    print(json.dumps(interface))
"""


def test_view_cuda_array_interface_describes_the_device_memory(daemon):  # pylint: disable=redefined-outer-name
    data = _data((5, 7), seed=3)
    producer = _Producer(daemon, "gpu/interface", data, _SYNC_PRODUCER_SYNCED, "synced")
    try:
        result = _run_child(_child_environment(daemon), _CUDA_ARRAY_INTERFACE_CONSUMER,
                            "gpu/interface", _ACQUIRE_WAIT, data.nbytes)
    finally:
        producer.stop()
    assert result.returncode == 0, result.stderr
    interface = json.loads(result.stdout)
    if interface is None:
        pytest.skip("hurray.TensorView has no __cuda_array_interface__ (only DLPack)")
    assert interface["version"] == 3
    assert tuple(interface["shape"]) == data.shape
    assert interface["typestr"] == "<f4"
    assert interface["data"] == [interface["dlpack_data"], True]  # (pointer, read-only)
    assert interface.get("strides") is None
    # CUDA Array Interface v3: "stream" absent or None means no synchronization is needed
    # (this tensor is producer-synced); an int is a stream to wait on, and 0 is disallowed.
    assert interface.get("stream") in (None, 1, 2) or interface["stream"] > 2
    assert bytes.fromhex(interface["bytes"]) == data.tobytes()


# --- The stream-ordered handoff -----------------------------------------------------------

# Acquires argv[1], which is not ready yet, and queues a copy of it on a stream it gave to
# __dlpack__(stream=...); prints whether that copy ran (it must not) and whether a stream
# given stream=-1 was held (it must not be); after a line on stdin (the producer's stream
# released) synchronizes and prints what it read.
_HELD_CONSUMER = """
    import json, sys, time, hurray
    name, size = sys.argv[1], int(sys.argv[2])
    sentinel = b"\\xab" * size
    cuda = Cuda()
    with hurray.connect(name="gpu-consumer") as client, \\
            client.acquire(name, wait=float(sys.argv[3])) as view:
        device = list(view.__dlpack_device__())
        waiting = cuda.stream()
        tensor = ConsumedDLPack(view.__dlpack__(stream=waiting))
        landing = PinnedMemory(cuda, size)
        landing.write(sentinel)
        cuda.copy_to_host_async(landing.host, tensor.data, size, waiting)
        copied = cuda.record(waiting)
        unsynced = cuda.stream()
        ConsumedDLPack(view.__dlpack__(stream=-1)).release()
        unheld = cuda.record(unsynced)
        interface = view.__cuda_array_interface__  # Holds the legacy default stream.
        legacy = cuda.record(None)
        deadline = time.monotonic() + 5
        while cuda.query(unheld) == CUDA_ERROR_NOT_READY and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # Time enough for a copy that nothing held.
        print(json.dumps({"device": device, "capsule": tensor.summary(),
                          "held_query": cuda.query(copied),
                          "landing_untouched": landing.bytes() == sentinel,
                          "unheld_query": cuda.query(unheld),
                          "interface": [interface["stream"], interface["data"][0] == tensor.data,
                                        interface["data"][1]],
                          "legacy_query": cuda.query(legacy)}), flush=True)
        sys.stdin.readline()
        cuda.synchronize(waiting)
        cuda.synchronize(None)
        out = {"released_query": cuda.query(copied), "bytes": landing.bytes().hex(),
               "legacy_released_query": cuda.query(legacy)}
        tensor.release()
    print(json.dumps(out), flush=True)
"""


def _check_held(held, shape):
    assert held["device"] == [KDLCUDA, 0]
    assert held["capsule"]["device"] == [KDLCUDA, 0]
    assert held["capsule"]["shape"] == list(shape)
    assert held["unheld_query"] == CUDA_SUCCESS, "__dlpack__(stream=-1) must enqueue no wait"
    assert held["held_query"] == CUDA_ERROR_NOT_READY, \
        "the consumer's stream ran before the producer's stream reached the tensor's fence"
    assert held["landing_untouched"]
    # __cuda_array_interface__ of a tensor not ready yet: read-only, on the legacy default
    # stream (1), which waits for the producer's fence.
    assert held["interface"] == [1, True, True]
    assert held["legacy_query"] == CUDA_ERROR_NOT_READY, \
        "the legacy default stream ran before the producer's stream reached the fence"


def _release_and_check(producer, consumer, data):
    """Lets the held producer's stream reach its fence; the consumer's stream then copies
    the data, which must be `data`."""
    producer.release()
    consumer.send("released")
    released = consumer.read_json()
    assert released["released_query"] == CUDA_SUCCESS
    assert released.get("legacy_released_query", CUDA_SUCCESS) == CUDA_SUCCESS
    assert bytes.fromhex(released["bytes"]) == data.tobytes()


def _stop(producer, consumer):
    producer.stop()
    if consumer is not None:
        status, errors = consumer.finish()
        assert status == 0, errors


def test_dlpack_stream_waits_for_producer_stream(daemon, client):  # pylint: disable=redefined-outer-name
    data = _data((8, 129), seed=2)
    producer = _Producer(daemon, "gpu/held", data, _SYNC_EVENT, "held")
    consumer = None
    try:
        assert not client.describe("gpu/held").ready
        consumer = _Child(_child_environment(daemon), _HELD_CONSUMER, "gpu/held", data.nbytes,
                          _ACQUIRE_WAIT)
        _check_held(consumer.read_json(), data.shape)
        assert not client.describe("gpu/held").ready
        _release_and_check(producer, consumer, data)
    finally:
        _stop(producer, consumer)


_DEFAULT_STREAM_CONSUMER = """
    import json, sys, threading, time, hurray
    name, size = sys.argv[1], int(sys.argv[2])
    cuda = Cuda()  # Device 0's primary context, current on this (the main) thread only.
    legacy = 1  # CU_STREAM_LEGACY, DLPack's stream=None.
    with hurray.connect(name="gpu-consumer") as client, \\
            client.acquire(name, wait=float(sys.argv[3])) as view:
        exported = {}

        def export():
            # A thread with no current context: the view's wait on the legacy stream goes
            # to the tensor's device's primary context all the same.
            try:
                exported["tensor"] = ConsumedDLPack(view.__dlpack__(stream=None))
            except hurray.Error as error:
                exported["error"] = f"{type(error).__name__}: {error}"

        thread = threading.Thread(target=export)
        thread.start()
        thread.join()
        if "error" in exported:
            print(json.dumps({"error": exported["error"]}), flush=True)
            sys.exit(0)
        waited = cuda.record(legacy)
        time.sleep(0.2)
        print(json.dumps({"error": None, "held_query": cuda.query(waited)}), flush=True)
        sys.stdin.readline()
        # Synchronous, on the legacy stream: after the wait.
        data = cuda.copy_to_host(exported["tensor"].data, size)
        out = {"released_query": cuda.query(waited), "bytes": data.hex()}
        exported["tensor"].release()
    print(json.dumps(out), flush=True)
"""


def test_dlpack_default_stream_waits_in_the_tensors_context_from_any_thread(daemon):  # pylint: disable=redefined-outer-name
    data = _data((5, 33), seed=6)
    producer = _Producer(daemon, "gpu/legacy", data, _SYNC_EVENT, "held")
    consumer = None
    try:
        consumer = _Child(_child_environment(daemon), _DEFAULT_STREAM_CONSUMER, "gpu/legacy",
                          data.nbytes, _ACQUIRE_WAIT)
        held = consumer.read_json()
        assert held["error"] is None, held["error"]
        assert held["held_query"] == CUDA_ERROR_NOT_READY, \
            "the legacy stream ran before the producer's stream reached the tensor's fence"
        _release_and_check(producer, consumer, data)
    finally:
        _stop(producer, consumer)


def test_python_publish_with_stream_hands_off_to_consumer_stream(daemon, cuda, client):  # pylint: disable=redefined-outer-name
    # The Python client's publish(name, stream=...) of a client.empty GPU tensor (whose
    # buffer declares the Event handoff): the consumer's stream is held as long as the
    # producer's stream is. The ordering is checked here, the bytes by the tests above.
    word = PinnedMemory(cuda, mmap.PAGESIZE)
    stream = cuda.stream()
    cuda.wait_value(stream, word.device, 1)
    consumer = None
    try:
        with client.empty((4, 8), "float32", pool="cuda:0") as tensor:
            version = tensor.publish("gpu/python-after", stream=stream)
        assert version == 1
        assert not client.describe("gpu/python-after").ready
        consumer = _Child(_child_environment(daemon), _HELD_CONSUMER, "gpu/python-after",
                          4 * 8 * 4, _ACQUIRE_WAIT)
        _check_held(consumer.read_json(), (4, 8))
        ctypes.c_uint64.from_address(word.host).value = 1
        consumer.send("released")
        assert consumer.read_json()["released_query"] == CUDA_SUCCESS
    finally:
        ctypes.c_uint64.from_address(word.host).value = 1
        cuda.synchronize(stream)
        word.close(cuda)
        if consumer is not None:
            status, errors = consumer.finish()
            assert status == 0, errors


def _lease_count(client, name):
    return next(tensor.lease_count for tensor in client.list(name) if tensor.name == name)


def test_release_with_stream_ends_the_lease_once_the_stream_is_done(daemon, cuda, client):  # pylint: disable=redefined-outer-name
    # view.release(stream=s) returns at once; the lease ends only once the work queued on s
    # by then is done, also when an array of the view (here a DLPack capsule) outlives the
    # call and is dropped later.
    with client.empty((4, 8), "float32", pool="cuda:0") as tensor:
        tensor.publish("gpu/release-after")
    word = PinnedMemory(cuda, mmap.PAGESIZE)
    stream = cuda.stream()
    try:
        cuda.wait_value(stream, word.device, 1)
        view = client.acquire("gpu/release-after", wait=_ACQUIRE_WAIT)
        # DLPack disallows stream 0 for CUDA (either default stream): refused, nothing taken.
        with pytest.raises(hurray.InvalidArgumentError, match="stream=0"):
            view.__dlpack__(stream=0)
        view.release(stream=stream)
        assert view.released
        assert _lease_count(client, "gpu/release-after") == 1
        ctypes.c_uint64.from_address(word.host).value = 1
        cuda.synchronize(stream)
        assert wait_for(lambda: _lease_count(client, "gpu/release-after") == 0)

        cuda.wait_value(stream, word.device, 2)
        view = client.acquire("gpu/release-after", wait=_ACQUIRE_WAIT)
        exported = ConsumedDLPack(view.__dlpack__(stream=None))
        view.release(stream=stream)
        exported.release()  # The last share: the lease ends after the stream's work.
        assert _lease_count(client, "gpu/release-after") == 1
        ctypes.c_uint64.from_address(word.host).value = 2
        cuda.synchronize(stream)
        assert wait_for(lambda: _lease_count(client, "gpu/release-after") == 0)

        # A batch's views, likewise.
        cuda.wait_value(stream, word.device, 3)
        batch = client.batch_acquire(["gpu/release-after"], wait=_ACQUIRE_WAIT)
        batch.release(stream=stream)
        assert _lease_count(client, "gpu/release-after") == 1
        ctypes.c_uint64.from_address(word.host).value = 3
        cuda.synchronize(stream)
        assert wait_for(lambda: _lease_count(client, "gpu/release-after") == 0)
    finally:
        ctypes.c_uint64.from_address(word.host).value = 3
        cuda.synchronize(stream)
        word.close(cuda)


# --- A Python producer ---------------------------------------------------------------------


def test_writable_gpu_tensor_describes_itself_with_the_cuda_array_interface(cuda, client):  # pylint: disable=redefined-outer-name
    with client.empty((6, 10), "float32", pool="cuda:0") as tensor:
        interface = tensor.__cuda_array_interface__
        assert interface["version"] == 3
        assert interface["shape"] == (6, 10)
        assert interface["typestr"] == "<f4"
        assert interface["strides"] is None
        assert interface["stream"] is None
        address, read_only = interface["data"]
        assert address != 0 and address % 64 == 0 and read_only is False
    with client.empty((4,), "float32") as host:
        assert not hasattr(host, "__cuda_array_interface__")


def test_python_producer_fills_gpu_tensor_through_its_device_address(daemon, cuda, client):  # pylint: disable=redefined-outer-name
    data = _data((6, 10), seed=4)
    with client.empty(data.shape, "float32", pool="cuda:0") as tensor:
        cuda.copy_to_device(tensor.__cuda_array_interface__["data"][0], data.tobytes())
        # No stream: the legacy default stream, after the synchronous copy above.
        tensor.publish("gpu/python-filled")
    result = _run_child(_child_environment(daemon), _READ_BACK_CONSUMER, "gpu/python-filled",
                        data.nbytes, _ACQUIRE_WAIT)
    assert result.returncode == 0, result.stderr
    for capsule in json.loads(result.stdout)["capsules"].values():
        assert bytes.fromhex(capsule["bytes"]) == data.tobytes()


def test_empty_gpu_tensor_publishes_after_a_stream(cuda, client):  # pylint: disable=redefined-outer-name
    stream = cuda.stream()
    with client.empty([4], "float32", pool="cuda:0") as tensor:
        tensor.publish("gpu/empty-after", stream=stream)
    cuda.synchronize(stream)
    assert wait_for(lambda: client.describe("gpu/empty-after").ready, timeout=_ACQUIRE_WAIT)


def test_describe_reports_event_tensor_ready_once_its_fence_is_reached(cuda, client):  # pylint: disable=redefined-outer-name
    stream = cuda.stream()
    descriptor = hurray.Descriptor.from_bytes(_cuda_descriptor((4,), "float32", _SYNC_EVENT))
    with client.allocate(descriptor, pool="cuda:0") as tensor:
        tensor.publish("gpu/ready-after", stream=stream)
    cuda.synchronize(stream)
    assert wait_for(lambda: client.describe("gpu/ready-after").ready, timeout=_ACQUIRE_WAIT)


# --- Errors -------------------------------------------------------------------------------

_DRIVERLESS_CONSUMER = """
    import ctypes, json, sys, hurray
    try:
        ctypes.CDLL("libcuda.so.1")
        driver = True
    except OSError:
        driver = False
    out = {"driver": driver}
    with hurray.connect(name="driverless") as client:
        try:
            with client.acquire(sys.argv[1], wait=float(sys.argv[2])) as view:
                view.__dlpack__()
            out["error"] = None
        except hurray.Error as error:
            out["error"] = type(error).__name__
            out["message"] = str(error)
    print(json.dumps(out))
"""


def test_acquire_without_cuda_driver_raises_failed_precondition(daemon):  # pylint: disable=redefined-outer-name
    data = _data((3, 3), seed=5)
    producer = _Producer(daemon, "gpu/driverless", data, _SYNC_PRODUCER_SYNCED, "synced")
    try:
        environment = dict(os.environ, HURRAY_SOCKET=daemon.socket, LD_LIBRARY_PATH=_path_without(
            os.environ.get("LD_LIBRARY_PATH", ""), _SOFTCUDA_DIR))
        result = _run_child(environment, _DRIVERLESS_CONSUMER, "gpu/driverless", _ACQUIRE_WAIT)
    finally:
        producer.stop()
    assert result.returncode == 0, f"the consumer without a driver crashed:\n{result.stderr}"
    out = json.loads(result.stdout)
    assert out["error"] == "FailedPreconditionError", out
    if not out["driver"]:
        assert "libcuda.so.1" in out["message"], out
