/*
 * hurray.h — the Hurray C ABI, version 4.
 *
 * The format documents define this ABI: every function, type, constant and status code
 * they name keeps exactly the signature, ownership and meaning they give it, so a program
 * written from them compiles and runs. The project only adds to it (functions and status
 * codes; docs/c-abi.md lists which are whose), and tests/c_abi/abi/libhurray.abi guards it.
 *
 * Conventions (read these once; every function below follows them):
 *
 *  - Handles are opaque: HurrayBuffer, HurrayBufferList, HurrayDescriptor,
 *    HurrayTensorContext, HurrayReader and HurrayWriter are only ever used through pointers
 *    and these functions.
 *  - Every function but hurray_c_abi_version, hurray_status_name, hurray_last_error_message
 *    and hurray_bytes_free returns a HurrayStatus: HURRAY_OK (0) or a negative error.
 *  - Byte lengths of encoded descriptors are size_t; buffer sizes, counts and indices are
 *    uint64_t; ranks are uint32_t, and the in/out capacity of hurray_descriptor_shape is
 *    a size_t, as the documents give them.
 *  - A null required pointer argument returns HURRAY_ERR_NULL_POINTER at once and changes
 *    nothing. Optional context pointers (release_context, owner_context, ...) may be null.
 *  - Out-parameters come last and are written only on HURRAY_OK, except where a function
 *    says otherwise (the capacity/query pattern of hurray_descriptor_shape).
 *  - Every `_new`, `_from_ptr`, `_decode`, `_encode` and `_open` has exactly one matching
 *    `_destroy` / `_free`. Each function states whether a pointer it takes or returns is
 *    OWNED (the receiver must destroy it) or BORROWED (valid while its owner lives; never
 *    destroy it).
 *  - Two destroy forms, as the documents give them. A buffer and a descriptor are destroyed
 *    through their pointer: `hurray_buffer_destroy(handle)`, after which the handle is
 *    invalid (a null handle is HURRAY_ERR_NULL_POINTER). Lists, contexts, readers and
 *    writers take the address of the caller's pointer and write null to it:
 *    `hurray_buffer_list_destroy(&list)`; a null pointer behind the address is a no-op
 *    returning HURRAY_OK, so destroying twice through the same variable is safe.
 *    hurray_bytes_free takes the bytes and returns nothing.
 *  - On failure, hurray_last_error_message() describes the error on this thread, naming
 *    the field and value that were wrong.
 *  - No C++ exception ever crosses this boundary. HURRAY_ERR_INTERNAL_PANIC means the
 *    library hit an unexpected internal failure; the handles involved must not be reused.
 *  - All functions are safe to call from any thread; a single handle must not be used by
 *    two threads at once unless a function says it may.
 */
#ifndef HURRAY_H_
#define HURRAY_H_

#include <stddef.h>
#include <stdint.h>

#if defined(HURRAY_BUILDING_LIBRARY)
#define HURRAY_EXPORT __attribute__((visibility("default")))
#else
#define HURRAY_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. Compare with hurray_c_abi_version() at start-up,
 * and with hurray_tensor_context_abi_version() before touching a received tensor. */
#define HURRAY_C_ABI_VERSION 4u

/* ---- Status codes ---------------------------------------------------------------- */

typedef int32_t HurrayStatus;

#define HURRAY_OK 0
/* A required pointer argument was null. */
#define HURRAY_ERR_NULL_POINTER (-1)
/* An argument broke a rule (bad alignment, reserved tag, invalid descriptor, ...). */
#define HURRAY_ERR_INVALID_ARGUMENT (-2)
/* The caller's array is too small; the needed size was written back (see _shape). */
#define HURRAY_ERR_BUFFER_TOO_SMALL (-3)
/* A sync handoff function does not match the buffer's declared sync mode. */
#define HURRAY_ERR_SYNC_MODE_MISMATCH (-4)
/* An index is past the end (list index, buffer index). */
#define HURRAY_ERR_OUT_OF_RANGE (-5)
/* Memory for a handle could not be allocated. */
#define HURRAY_ERR_OUT_OF_MEMORY (-6)
/* A handle was misused: a list-owned buffer destroyed directly; in debug builds also a
 * handle destroyed twice or a handle of the wrong kind. Only the handle functions of this
 * header return it. */
#define HURRAY_ERR_INTERNAL (-7)
/* The library failed unexpectedly inside; the handles involved must not be reused. */
#define HURRAY_ERR_INTERNAL_PANIC (-8)
/* Client calls (hurray_client.h) add the daemon's outcomes: */
/* The tensor, version, lease or pool does not exist. */
#define HURRAY_ERR_NOT_FOUND (-9)
/* A wait (acquire with a timeout) ran out. */
#define HURRAY_ERR_TIMEOUT (-10)
/* No daemon answers on the socket, or the connection to it is gone. */
#define HURRAY_ERR_UNAVAILABLE (-11)
/* The daemon refused: no right to this segment or name, or an unknown session. */
#define HURRAY_ERR_PERMISSION_DENIED (-12)
/* A pool (or this session's quota) is full. */
#define HURRAY_ERR_RESOURCE_EXHAUSTED (-13)
/* The request does not fit the daemon's state (a CUDA descriptor for a CPU pool, ...). */
#define HURRAY_ERR_FAILED_PRECONDITION (-14)
/* The daemon, or the client's exchange with it, failed for a reason of its own: the
 * daemon reported an internal error, data loss, an unknown error, an aborted or an
 * unimplemented call, or its reply broke the protocol. The message has the details. */
#define HURRAY_ERR_DAEMON_INTERNAL (-15)
/* Bytes that cannot be used: a .hrry buffer or index whose checksum does not match, a file
 * that ends early, or data the daemon gave up on (a poisoned GPU fence). */
#define HURRAY_ERR_DATA_LOSS (-16)

/* The ABI version of the linked library: HURRAY_C_ABI_VERSION of the build. */
HURRAY_EXPORT uint32_t hurray_c_abi_version(void);

/* A static, never-null name for a status ("HURRAY_ERR_NULL_POINTER"); "HURRAY_ERR_UNKNOWN"
 * for a value that is none of the above. */
HURRAY_EXPORT const char* hurray_status_name(HurrayStatus status);

/* The message of the last error returned on the calling thread (BORROWED, valid until the
 * next hurray_ call on this thread); "" when the last call succeeded. Never null. */
HURRAY_EXPORT const char* hurray_last_error_message(void);

/* ---- Byte tags --------------------------------------------------------------------- */

/* Device tags: 0x00-0x08 named, 0x09-0xEF reserved, 0xF0-0xFE private, 0xFF invalid. */
#define HURRAY_DEVICE_CPU 0x00u
#define HURRAY_DEVICE_CUDA 0x01u
#define HURRAY_DEVICE_ROCM 0x02u
#define HURRAY_DEVICE_METAL 0x03u
#define HURRAY_DEVICE_VULKAN 0x04u
#define HURRAY_DEVICE_OPENCL 0x05u
#define HURRAY_DEVICE_ONEAPI 0x06u
#define HURRAY_DEVICE_WEBGPU 0x07u
#define HURRAY_DEVICE_HEXAGON 0x08u

/* Memory classes: 0x00-0x03 named, 0x04-0xEF reserved, 0xF0-0xFE private, 0xFF invalid. */
#define HURRAY_MEMORY_STANDARD 0x00u
#define HURRAY_MEMORY_HOST_PINNED 0x01u
#define HURRAY_MEMORY_UNIFIED 0x02u
#define HURRAY_MEMORY_PEER 0x03u

/* Sync modes. */
#define HURRAY_SYNC_PRODUCER_SYNCED 0x00u
#define HURRAY_SYNC_EVENT 0x01u
#define HURRAY_SYNC_CONSUMER_STREAM 0x02u

/* Element type tags (docs/descriptor.md has widths and packing). */
#define HURRAY_ELEMENT_BOOL 1u
#define HURRAY_ELEMENT_INT8 2u
#define HURRAY_ELEMENT_INT16 3u
#define HURRAY_ELEMENT_INT32 4u
#define HURRAY_ELEMENT_INT64 5u
#define HURRAY_ELEMENT_UINT8 6u
#define HURRAY_ELEMENT_UINT16 7u
#define HURRAY_ELEMENT_UINT32 8u
#define HURRAY_ELEMENT_UINT64 9u
#define HURRAY_ELEMENT_FLOAT16 10u
#define HURRAY_ELEMENT_BFLOAT16 11u
#define HURRAY_ELEMENT_FLOAT32 12u
#define HURRAY_ELEMENT_FLOAT64 13u
#define HURRAY_ELEMENT_COMPLEX64 14u
#define HURRAY_ELEMENT_COMPLEX128 15u
#define HURRAY_ELEMENT_FLOAT8_E4M3FN 16u
#define HURRAY_ELEMENT_FLOAT8_E5M2 17u
#define HURRAY_ELEMENT_INT4 18u
#define HURRAY_ELEMENT_UINT4 19u
#define HURRAY_ELEMENT_NF4 20u
#define HURRAY_ELEMENT_MXFP4 21u
#define HURRAY_ELEMENT_FLOAT8_E8M0 22u

/* ---- Buffers ------------------------------------------------------------------------ */

typedef struct HurrayBuffer HurrayBuffer;

/* Called exactly once, by hurray_buffer_destroy (or by destroying the list that owns the
 * buffer), with the buffer's data pointer and release_context. */
typedef void (*HurrayReleaseCallback)(void* data, void* release_context);

/* Wraps memory the caller owns in a buffer handle (OWNED by the caller through *out).
 * `data` may be null only when byte_size is 0. `alignment` must be a power of two, at least
 * 64 for a non-empty buffer, and `data` must really be aligned to it (it is measured).
 * Tags must be valid (see above). `release` may be null (nothing to release).
 * On error the release callback is not called: the memory stays the caller's. */
HURRAY_EXPORT HurrayStatus hurray_buffer_from_ptr(void* data, uint64_t byte_size,
                                                  uint64_t alignment, uint8_t device_tag,
                                                  uint8_t sync_mode, uint8_t memory_class,
                                                  HurrayReleaseCallback release,
                                                  void* release_context, HurrayBuffer** out);

/* Runs the release callback exactly once, releases an event attached by
 * hurray_buffer_handoff_event, and frees the handle. The handle is invalid afterwards.
 * HURRAY_ERR_INTERNAL (nothing released) for a buffer owned by a list (destroy the list
 * instead) and, in debug builds, for a handle already destroyed. */
HURRAY_EXPORT HurrayStatus hurray_buffer_destroy(HurrayBuffer* buffer);

/* Accessors; `buffer` is BORROWED. */
HURRAY_EXPORT HurrayStatus hurray_buffer_byte_size(const HurrayBuffer* buffer, uint64_t* out);
HURRAY_EXPORT HurrayStatus hurray_buffer_alignment(const HurrayBuffer* buffer, uint64_t* out);
/* The data pointer (BORROWED; null for an empty buffer may be reported: never dereference
 * an empty buffer's pointer). */
HURRAY_EXPORT HurrayStatus hurray_buffer_data_ptr(const HurrayBuffer* buffer, void** out);
HURRAY_EXPORT HurrayStatus hurray_buffer_device_tag(const HurrayBuffer* buffer, uint8_t* out);
HURRAY_EXPORT HurrayStatus hurray_buffer_memory_class(const HurrayBuffer* buffer, uint8_t* out);
HURRAY_EXPORT HurrayStatus hurray_buffer_sync_mode(const HurrayBuffer* buffer, uint8_t* out);

/* ---- Buffer lists ------------------------------------------------------------------- */

typedef struct HurrayBufferList HurrayBufferList;

/* A new, empty list (OWNED through *out) with room reserved for `capacity` handles. */
HURRAY_EXPORT HurrayStatus hurray_buffer_list_new(uint64_t capacity, HurrayBufferList** out);

/* Appends `buffer`, transferring ownership of it to the list: from now on destroy the list,
 * never the buffer. Element i of the list is buffer index i of the descriptor.
 * HURRAY_ERR_INVALID_ARGUMENT (ownership unchanged) when the buffer already belongs to a
 * list. */
HURRAY_EXPORT HurrayStatus hurray_buffer_list_push(HurrayBufferList* list, HurrayBuffer* buffer);

/* Number of buffers in the list. */
HURRAY_EXPORT HurrayStatus hurray_buffer_list_len(const HurrayBufferList* list, uint64_t* out);

/* The buffer at `index` (BORROWED: owned by the list, valid until the list is destroyed;
 * never destroy it). HURRAY_ERR_OUT_OF_RANGE when index >= length. */
HURRAY_EXPORT HurrayStatus hurray_buffer_list_get(const HurrayBufferList* list, uint64_t index,
                                                  HurrayBuffer** out);

/* Destroys the list and every buffer it owns, exactly once each, then writes null to
 * *list. Idempotent: a null *list is a no-op returning HURRAY_OK. */
HURRAY_EXPORT HurrayStatus hurray_buffer_list_destroy(HurrayBufferList** list);

/* ---- Descriptors ------------------------------------------------------------------- */

typedef struct HurrayDescriptor HurrayDescriptor;

/* Decodes and validates an encoded hurray.v1.TensorDescriptor (`bytes` BORROWED for the
 * call; the result, OWNED through *out, keeps its own copy). HURRAY_ERR_INVALID_ARGUMENT,
 * with a message naming the field and value, for bytes that are not a valid descriptor. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_decode(const uint8_t* bytes, size_t len,
                                                    HurrayDescriptor** out);

/* A dense, row-major, unquantized CPU descriptor with one buffer of exactly the size the
 * shape needs, alignment 64, producer-synced (OWNED through *out). `dims` (BORROWED) holds
 * `rank` sizes and may be null when rank is 0 (a scalar). */
HURRAY_EXPORT HurrayStatus hurray_descriptor_new_dense(uint8_t element_type_tag,
                                                       const uint64_t* dims, uint32_t rank,
                                                       HurrayDescriptor** out);

/* The encoding of a descriptor: *bytes (OWNED, free with hurray_bytes_free) holds *len
 * bytes that hurray_descriptor_decode accepts. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_encode(const HurrayDescriptor* descriptor,
                                                    uint8_t** bytes, size_t* len);

/* Frees bytes returned by hurray_descriptor_encode. Null is a no-op. */
HURRAY_EXPORT void hurray_bytes_free(uint8_t* bytes);

/* Frees a descriptor; the handle is invalid afterwards. HURRAY_ERR_INTERNAL in debug builds
 * for one already destroyed. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_destroy(HurrayDescriptor* descriptor);

/* Number of dimensions. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_rank(const HurrayDescriptor* descriptor,
                                                  uint32_t* out);

/* The shape, with the capacity/query pattern: set *in_out_rank to the number of slots in
 * `out_dims`. If that is below the rank (or out_dims is null and the rank is not 0), the
 * call writes the true rank to *in_out_rank and returns HURRAY_ERR_BUFFER_TOO_SMALL;
 * otherwise it fills out_dims[0..rank) and writes the rank to *in_out_rank. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_shape(const HurrayDescriptor* descriptor,
                                                   uint64_t* out_dims, size_t* in_out_rank);

/* The one-byte element type tag (HURRAY_ELEMENT_*). */
HURRAY_EXPORT HurrayStatus hurray_descriptor_element_type_tag(const HurrayDescriptor* descriptor,
                                                              uint8_t* out);

/* Number of entries in the buffer table: the length every buffer list for it must have. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_buffer_count(const HurrayDescriptor* descriptor,
                                                          uint64_t* out);

/* Size in bytes of buffer `index` of the buffer table. HURRAY_ERR_OUT_OF_RANGE past the
 * table's end. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_buffer_byte_size(const HurrayDescriptor* descriptor,
                                                              uint64_t index, uint64_t* out);

/* The consumer's check (docs/descriptor.md, "Checking delivered buffers"): the list has
 * exactly the table's buffer count, and each buffer declares its table entry's size, device
 * tag, memory class and sync mode and at least its alignment. HURRAY_ERR_INVALID_ARGUMENT
 * naming the first difference. Both BORROWED. */
HURRAY_EXPORT HurrayStatus hurray_descriptor_check_buffer_list(const HurrayDescriptor* descriptor,
                                                               const HurrayBufferList* list);

/* ---- Tensor context ----------------------------------------------------------------- */

typedef struct HurrayTensorContext HurrayTensorContext;

/* Called exactly once, when the context is destroyed: the owner may let the tensor go. */
typedef void (*HurrayOwnerRelease)(void* owner_context);

/* A context carrying a copy of the encoded descriptor `bytes` (BORROWED for the call) and
 * the owner's release callback (OWNED through *out). `len` 0 makes a context with no
 * descriptor (bytes may then be null); otherwise the bytes must decode as a valid
 * descriptor (HURRAY_ERR_INVALID_ARGUMENT). `owner_release` may be null. On error the
 * callback is not called. */
HURRAY_EXPORT HurrayStatus hurray_tensor_context_new(const uint8_t* bytes, size_t len,
                                                     HurrayOwnerRelease owner_release,
                                                     void* owner_context,
                                                     HurrayTensorContext** out);

/* The producer's ABI version. Read it before any other accessor; it is the one accessor
 * guaranteed to work across ABI versions. */
HURRAY_EXPORT HurrayStatus hurray_tensor_context_abi_version(const HurrayTensorContext* context,
                                                             uint32_t* out);

/* The encoded descriptor (*bytes BORROWED: valid until the context is destroyed). A context
 * without a descriptor reports a null pointer and length 0. */
HURRAY_EXPORT HurrayStatus hurray_tensor_context_descriptor(const HurrayTensorContext* context,
                                                            const uint8_t** bytes, uint64_t* len);

/* Runs owner_release exactly once, frees the context and writes null to *context.
 * Idempotent: a null *context is a no-op returning HURRAY_OK. */
HURRAY_EXPORT HurrayStatus hurray_tensor_context_destroy(HurrayTensorContext** context);

/* ---- Sync handoff ------------------------------------------------------------------- */

/* Releases an event handed over with hurray_buffer_handoff_event. */
typedef void (*HurrayEventReleaseCallback)(void* sync_handle, void* event_release_context);

/* Event mode: the producer recorded a device event (a cudaEvent_t, say) that completes when
 * the data is ready. */
typedef struct HurraySyncEventPayload {
  void* sync_handle;                           /* The event; never null. */
  uint8_t sync_handle_device_tag;              /* Device the event belongs to. */
  HurrayEventReleaseCallback event_release_fn; /* May be null. */
  void* event_release_context;                 /* Passed to event_release_fn. */
} HurraySyncEventPayload;

/* ConsumerStream mode: the consumer declares the stream the producer must order onto. */
typedef struct HurraySyncConsumerStreamPayload {
  void* consumer_stream;              /* The stream; null means the device's default one. */
  uint8_t consumer_stream_device_tag; /* Device the stream belongs to. */
} HurraySyncConsumerStreamPayload;

/* Cross-checks an Event handoff: HURRAY_ERR_SYNC_MODE_MISMATCH unless the buffer declares
 * HURRAY_SYNC_EVENT; HURRAY_ERR_NULL_POINTER for a null sync_handle;
 * HURRAY_ERR_INVALID_ARGUMENT when the event's device tag differs from the buffer's. On
 * HURRAY_OK the buffer takes the event: event_release_fn runs exactly once, when the buffer
 * is destroyed or another event replaces it. Handing over the event the buffer already holds
 * (recorded again) releases nothing and keeps the newer payload's event_release_fn and
 * context. On error the event stays the caller's. */
HURRAY_EXPORT HurrayStatus hurray_buffer_handoff_event(HurrayBuffer* buffer,
                                                       const HurraySyncEventPayload* payload);

/* The event attached by hurray_buffer_handoff_event (BORROWED), or null. */
HURRAY_EXPORT HurrayStatus hurray_buffer_sync_event(const HurrayBuffer* buffer, void** out);

/* Cross-checks a ConsumerStream handoff: HURRAY_ERR_SYNC_MODE_MISMATCH unless the buffer
 * declares HURRAY_SYNC_CONSUMER_STREAM; HURRAY_ERR_INVALID_ARGUMENT when the stream's device
 * tag differs from the buffer's. Nothing is retained. */
HURRAY_EXPORT HurrayStatus hurray_buffer_handoff_consumer_stream(
    const HurrayBuffer* buffer, const HurraySyncConsumerStreamPayload* payload);

/* Cross-checks a ProducerSynced handoff: HURRAY_ERR_SYNC_MODE_MISMATCH unless the buffer
 * declares HURRAY_SYNC_PRODUCER_SYNCED. */
HURRAY_EXPORT HurrayStatus hurray_buffer_handoff_producer_synced(const HurrayBuffer* buffer);

/* ---- Files (.hrry, docs/file-format.md) ------------------------------------------- */

typedef struct HurrayWriter HurrayWriter;

/* Starts a .hrry file at `path` (BORROWED for the call): the writer (OWNED through *out)
 * writes to a temporary file beside it, which becomes `path` only at hurray_writer_finish.
 * Errors of the file system carry the call and the path in the message (a missing directory
 * is HURRAY_ERR_NOT_FOUND, no right to it HURRAY_ERR_PERMISSION_DENIED). */
HURRAY_EXPORT HurrayStatus hurray_writer_open(const char* path, HurrayWriter** out);

/* Appends a tensor: `name` (1 to 4096 bytes, not yet in the file), `descriptor` and
 * `buffers`, all BORROWED for the call; the bytes are copied into the file. The list must
 * hold exactly one buffer per entry of the descriptor's buffer table, in table order, each
 * of the entry's byte_size and in host memory (device tag CPU): HURRAY_ERR_INVALID_ARGUMENT
 * naming the buffer otherwise, and HURRAY_ERR_FAILED_PRECONDITION for a name already
 * written or a finished writer. Nothing is added on error. */
HURRAY_EXPORT HurrayStatus hurray_writer_write_tensor(HurrayWriter* writer, const char* name,
                                                      const HurrayDescriptor* descriptor,
                                                      const HurrayBufferList* buffers);

/* Writes the index, syncs and moves the file into place at the path given to
 * hurray_writer_open. The writer is finished afterwards, whatever the outcome: later writes
 * and finishes are HURRAY_ERR_FAILED_PRECONDITION; it must still be destroyed. */
HURRAY_EXPORT HurrayStatus hurray_writer_finish(HurrayWriter* writer);

/* Frees the writer and writes null to *writer. A writer not finished (or whose finish
 * failed) removes its temporary file: the file never appears. Idempotent: a null *writer
 * is a no-op returning HURRAY_OK. */
HURRAY_EXPORT HurrayStatus hurray_writer_destroy(HurrayWriter** writer);

typedef struct HurrayReader HurrayReader;

/* Opens the .hrry file at `path` (BORROWED for the call) and checks its whole layout
 * (docs/file-format.md lists every check): the reader (OWNED through *out) holds the file
 * open. HURRAY_ERR_INVALID_ARGUMENT naming the field for a file that breaks a rule,
 * HURRAY_ERR_DATA_LOSS for an index whose checksum does not match. */
HURRAY_EXPORT HurrayStatus hurray_reader_open(const char* path, HurrayReader** out);

/* Number of tensors in the file. */
HURRAY_EXPORT HurrayStatus hurray_reader_tensor_count(const HurrayReader* reader, uint64_t* out);

/* The name of tensor `index`, with the capacity/query pattern: set *in_out_size to the
 * number of bytes `buffer` holds. If that is below the name's length plus its terminating
 * NUL (or buffer is null), the call writes that needed size to *in_out_size and returns
 * HURRAY_ERR_BUFFER_TOO_SMALL; otherwise it copies the name and its NUL into buffer and
 * writes the same size. HURRAY_ERR_OUT_OF_RANGE for an index past the count. */
HURRAY_EXPORT HurrayStatus hurray_reader_tensor_name(const HurrayReader* reader, uint64_t index,
                                                     char* buffer, uint64_t* in_out_size);

/* Reads tensor `index`: its descriptor (OWNED through *out_descriptor) and a list of its
 * buffers in descriptor order (OWNED through *out_buffers), each in fresh host memory
 * aligned to its table entry's alignment and freed by the buffer's release callback when
 * the list is destroyed. Every buffer's checksum is verified: HURRAY_ERR_DATA_LOSS naming
 * the buffer on a mismatch or a file that ended early. A tensor whose buffers are not on
 * the CPU device is HURRAY_ERR_FAILED_PRECONDITION (the reader has only host memory to give).
 * Both out-parameters are written only on HURRAY_OK; `reader` may be used by several threads
 * at once here. */
HURRAY_EXPORT HurrayStatus hurray_reader_read_tensor(const HurrayReader* reader, uint64_t index,
                                                     HurrayDescriptor** out_descriptor,
                                                     HurrayBufferList** out_buffers);

/* Closes the file, frees the reader and writes null to *reader. Idempotent: a null *reader
 * is a no-op returning HURRAY_OK. Lists and descriptors read from it stay valid. */
HURRAY_EXPORT HurrayStatus hurray_reader_destroy(HurrayReader** reader);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HURRAY_H_ */
