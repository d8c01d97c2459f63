"""hurray.Tensor: a tensor in this process's memory, its buffers any buffer-protocol objects.

A Tensor is a validated hurray.Descriptor plus one byte buffer per entry of its buffer table,
in table order (the positional rule: buffer i is table entry i). Buffer handles are measured,
not asserted: each declares the alignment its address really has. A buffer whose address is
below the alignment its table entry declares, or that is not contiguous, is copied into
aligned memory, unless ``copy=False`` asks for an error instead (hurray.CopyRequiredError).

``__hurray__()`` hands every buffer over in one "hurray_tensor" capsule (docs/python.md, "The
in-process protocol"); ``from_hurray(obj)`` takes one over without copying. Tensors are not
thread-safe to mutate, but nothing here mutates after construction.
"""

import numpy as np

from hurray import _hurray
from hurray._errors import CopyRequiredError, InvalidArgumentError

__all__ = ["Tensor", "from_hurray", "from_numpy"]


def _address(view):
    return np.frombuffer(view, dtype=np.uint8).ctypes.data if view.nbytes else 0


def _alignment(address, byte_size):
    """The alignment an address really has (capped at a page); 1 for an empty buffer."""
    if byte_size == 0:
        return 1
    return min(address & -address, _hurray.PAGE_ALIGNMENT)


def _aligned_copy(data, byte_size, alignment):
    """A writable byte view of a copy of `data` at an address aligned to `alignment`."""
    raw = np.empty(byte_size + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    out = raw[offset:offset + byte_size]
    out[:] = np.frombuffer(data, dtype=np.uint8)
    return memoryview(out)


def _byte_buffer(source, required, copy, what):
    """`source` as a contiguous byte view aligned to `required`, copied when it must be."""
    view = memoryview(source)
    if not view.c_contiguous:
        if copy is False:
            raise CopyRequiredError(
                f"{what} is not contiguous (strides {view.strides}); copy=False forbids "
                "the copy that would make it so")
        return _aligned_copy(view.tobytes(), view.nbytes, required)
    if view.ndim != 1 or view.format != "B":
        # memoryview.cast refuses a shape with a zero in it: an empty buffer is b"".
        view = view.cast("B") if view.nbytes else memoryview(b"")
    alignment = _alignment(_address(view), view.nbytes)
    if copy is True or (view.nbytes and alignment < required):
        if copy is False:
            raise CopyRequiredError(
                f"{what} is {alignment}-byte aligned, below the {required}-byte minimum its "
                "descriptor declares; copy=False forbids the copy that would align it")
        return _aligned_copy(view, view.nbytes, required)
    return view


class Tensor:
    """A tensor in this process: a validated hurray.Descriptor and one byte buffer per entry of
    its buffer table, in table order. Made by Tensor(descriptor, buffers), from_numpy, the
    builders (coo, csr, nf4, ...), from_hurray or load; not thread-safe to mutate."""

    def __init__(self, descriptor, buffers, *, copy=None):
        """A tensor of `descriptor` over `buffers` (buffer-protocol objects, one per entry of
        its buffer table, in table order), each measured into a BufferHandle. A buffer that is
        not contiguous, or whose address is below its entry's alignment, is copied (copy=None),
        or raises hurray.CopyRequiredError (copy=False); copy=True copies every buffer.
        hurray.InvalidArgumentError when the buffers do not fit the table; TypeError when
        `descriptor` is not a hurray.Descriptor."""
        self._build(descriptor, buffers, copy, [f"buffer {i}" for i in range(len(buffers))])

    def _build(self, descriptor, buffers, copy, names):
        if not isinstance(descriptor, _hurray.Descriptor):
            raise TypeError(
                f"descriptor must be a hurray.Descriptor, not {type(descriptor).__name__}")
        table = descriptor.buffer_handles
        views = [
            _byte_buffer(source, table[i].alignment if i < len(table) else
                         _hurray.MIN_BUFFER_ALIGNMENT, copy, names[i])
            for i, source in enumerate(buffers)
        ]
        handles = tuple(
            _hurray.BufferHandle(view.nbytes, _alignment(_address(view), view.nbytes))
            for view in views)
        descriptor.check_buffers(handles)
        self._adopt(descriptor, handles, views)

    def _adopt(self, descriptor, handles, views):
        self._descriptor = descriptor
        self._handles = tuple(handles)
        self._buffers = tuple(views)

    @property
    def descriptor(self):
        """The tensor's hurray.Descriptor."""
        return self._descriptor

    @property
    def buffer_handles(self):
        """One measured hurray.BufferHandle per buffer, in descriptor order."""
        return self._handles

    @property
    def buffers(self):
        """The buffers as byte memoryviews, in descriptor order."""
        return self._buffers

    def buffer(self, index):
        """Buffer `index` (descriptor order) as a byte memoryview; IndexError past the end."""
        return self._buffers[index]

    @property
    def dtype(self):
        """The element type (hurray.DType), the descriptor's."""
        return self._descriptor.dtype

    @property
    def shape(self):
        """The extent of each dimension, in elements: a tuple of ints, the descriptor's."""
        return self._descriptor.shape

    @property
    def layout(self):
        """The layout: "dense", "coo", "csr", "csc" or "block_paged"."""
        return self._descriptor.layout

    @property
    def quantization(self):
        """The descriptor's quantization (hurray.PerTensorAffine, ...), or None."""
        return self._descriptor.quantization

    def numpy(self):
        """The dense data as an ndarray over the buffer (no copy); the buffer's bytes as uint8
        for an element type NumPy lacks. hurray.InvalidArgumentError for a tensor that is not
        dense (read its parts: .values, .indices, ...)."""
        if self.layout != "dense":
            raise InvalidArgumentError(
                f"numpy() needs a dense tensor, not {self.layout}: read its parts "
                "(.values, .indices, ...)")
        return self._part("data")

    def __array__(self, dtype=None):
        """numpy() for np.asarray(tensor); converted to `dtype` when one is given."""
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def _part(self, name):
        """The array part `name` of the descriptor's table (Descriptor.buffer_parts) holds, over
        its buffer: in its element type and shape (with its strides, for strided dense data),
        or its bytes as uint8 for an element type NumPy lacks."""
        part = next((p for p in self._descriptor.buffer_parts if p.part == name), None)
        if part is None:
            raise AttributeError(f"a {self.layout} tensor of quantization "
                                 f"{getattr(self.quantization, 'kind', None)} has no {name}")
        buffer = self._buffers[part.index]
        numpy_dtype = part.dtype.numpy
        if numpy_dtype is None:
            return np.frombuffer(buffer, dtype=np.uint8)
        array = np.frombuffer(buffer, dtype=numpy_dtype)
        if part.element_strides is None:
            return array.reshape(part.shape)
        return np.lib.stride_tricks.as_strided(
            array, part.shape, tuple(s * numpy_dtype.itemsize for s in part.element_strides),
            writeable=array.flags.writeable)

    # The arrays of the parts, over their buffers (no copy): in the part's element type and
    # shape, or its bytes as uint8 for an element type NumPy lacks. AttributeError for a part
    # the descriptor's table does not have.

    @property
    def data(self):
        """The data part: the dense elements (strided as the descriptor says), the quantized
        codes, or a block-paged tensor's pages."""
        return self._part("data")

    @property
    def values(self):
        """A sparse tensor's stored values, [nnz]."""
        return self._part("values")

    @property
    def indices(self):
        """A sparse tensor's indices as uint64: COO coordinates [nnz, rank], or CSR column
        (CSC row) indices [nnz]."""
        return self._part("indices")

    @property
    def indptr(self):
        """A CSR tensor's row offsets [rows + 1] (CSC: column offsets) as uint64."""
        return self._part("indptr")

    @property
    def page_table(self):
        """A block-paged tensor's page table as uint64."""
        return self._part("page_table")

    @property
    def scales(self):
        """A quantized tensor's scales (per channel, or per block)."""
        return self._part("scales")

    @property
    def zero_points(self):
        """A per-channel affine tensor's zero points, when it has them."""
        return self._part("zero_points")

    def __hurray__(self, stream=None):
        """The "hurray_tensor" capsule carrying every buffer; it keeps this tensor alive."""
        if stream is not None:
            raise InvalidArgumentError(
                f"stream {stream!r}: this tensor's buffers are producer-synced CPU memory; "
                "pass None")
        pairs = [(_address(view), handle) for view, handle in zip(self._buffers, self._handles)]
        return _hurray._tensor_capsule(self._descriptor, pairs, self)

    def __repr__(self):
        return f"hurray.Tensor({self._descriptor!r})"

    # ---- Multi-buffer tensors from arrays: the descriptor comes from their dtypes and shapes.

    @classmethod
    def per_channel_affine(cls, data, scales, zero_points=None, axis=0):
        """Per-channel affine: the stored data, one scale per index of `axis`, and optionally
        one zero point per index; the dtypes are the arrays'."""
        data, scales = np.asarray(data), np.asarray(scales)
        buffers = [data, scales]
        zero_point_dtype = None
        if zero_points is not None:
            zero_points = np.asarray(zero_points)
            buffers.append(zero_points)
            zero_point_dtype = _hurray.dtype(zero_points.dtype)
        descriptor = _hurray.Descriptor.per_channel_affine(
            data.shape, _hurray.dtype(data.dtype), axis, _hurray.dtype(scales.dtype),
            zero_point_dtype)
        return cls._of_parts(descriptor, buffers, ["data", "scales", "zero_points"])

    @classmethod
    def nf4(cls, codes, scales, shape, block_size=64):
        """NF4 codes packed two per byte (low nibble first) and one scale per block."""
        scales = np.asarray(scales)
        descriptor = _hurray.Descriptor.nf4(shape, block_size, _hurray.dtype(scales.dtype))
        return cls._of_parts(descriptor, [codes, scales], ["codes", "scales"])

    @classmethod
    def mxfp(cls, data, scales, shape, dtype="mxfp4", block_size=32):
        """Microscaling elements (raw bytes) and their E8M0 scales (one byte each)."""
        descriptor = _hurray.Descriptor.mxfp(shape, dtype, block_size)
        return cls._of_parts(descriptor, [data, scales], ["data", "scales"])

    @classmethod
    def coo(cls, values, indices, shape):
        """COO: values [nnz] and coordinates [nnz, rank] (converted to uint64)."""
        values = np.asarray(values)
        expected = (values.shape[0] if values.ndim else 0, len(shape))
        indices = _index_array("indices", indices)
        if indices.shape != expected:
            raise InvalidArgumentError(
                f"indices has shape {indices.shape}, not (nnz, rank) = {expected}")
        descriptor = _hurray.Descriptor.coo(shape, _hurray.dtype(values.dtype), values.size)
        return cls._of_parts(descriptor, [values, indices], ["values", "indices"])

    @classmethod
    def csr(cls, values, indptr, indices, shape):
        """CSR: values [nnz], row offsets [rows + 1], column indices [nnz] (uint64)."""
        return cls._compressed(_hurray.Descriptor.csr, values, indptr, indices, shape)

    @classmethod
    def csc(cls, values, indptr, indices, shape):
        """CSC: values [nnz], column offsets [columns + 1], row indices [nnz] (uint64)."""
        return cls._compressed(_hurray.Descriptor.csc, values, indptr, indices, shape)

    @classmethod
    def block_paged(cls, pages, page_table, shape, block_size):
        """Block-paged: pages [num_pages, block_size, *shape[1:]] and a page table."""
        pages = np.asarray(pages)
        descriptor = _hurray.Descriptor.block_paged(
            shape, _hurray.dtype(pages.dtype), block_size, pages.shape[0] if pages.ndim else 0)
        return cls._of_parts(descriptor, [pages, _index_array("page_table", page_table)],
                             ["pages", "page_table"])

    @classmethod
    def _compressed(cls, builder, values, indptr, indices, shape):
        values = np.asarray(values)
        descriptor = builder(shape, _hurray.dtype(values.dtype), values.size)
        return cls._of_parts(
            descriptor,
            [values, _index_array("indptr", indptr), _index_array("indices", indices)],
            ["values", "indptr", "indices"])

    @classmethod
    def _of_parts(cls, descriptor, buffers, names, copy=None):
        tensor = cls.__new__(cls)
        tensor._build(descriptor, buffers, copy, names)
        return tensor


def _index_array(name, indices):
    """An index array as uint64, converting (a copy) from any integer dtype."""
    indices = np.asarray(indices)
    if indices.dtype == np.uint64:
        return indices
    if indices.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{name} has dtype {indices.dtype}, not an integer dtype")
    if indices.size and indices.min() < 0:
        raise InvalidArgumentError(f"{name} holds a negative index {indices.min()}")
    return indices.astype(np.uint64)


def from_numpy(array, copy=None):
    """A dense hurray.Tensor over `array`: shared when it is contiguous and its address is
    64-byte aligned; otherwise copied (copy=None), or hurray.CopyRequiredError (copy=False).
    copy=True always copies."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy takes a numpy.ndarray, not {type(array).__name__}")
    descriptor = _hurray.Descriptor.dense(array.shape, _hurray.dtype(array.dtype))
    return Tensor._of_parts(descriptor, [array], ["array"], copy)


def from_hurray(obj):
    """The hurray.Tensor `obj` hands over through __hurray__: zero-copy, read-only views that
    keep the producer's memory alive. TypeError without __hurray__; hurray.BufferError for a
    consumed capsule; hurray.UnsupportedError for another C ABI version (or buffers this
    process cannot read in place); hurray.InvalidArgumentError when the buffers do not fit
    the descriptor's table."""
    method = getattr(type(obj), "__hurray__", None)
    if method is None:
        raise TypeError(f"{type(obj).__name__} object does not support __hurray__")
    descriptor, handles, buffers = _hurray._open_capsule(method(obj))
    tensor = Tensor.__new__(Tensor)
    tensor._adopt(descriptor, handles, [memoryview(buffer) for buffer in buffers])
    return tensor
