/*
 * hurray_client.h — the C client of hurrayd, extending hurray.h (C ABI version 4).
 *
 * Shipped as libhurray-client.so (CMake target `hurray-client`), which depends on
 * libhurray.so; a program that never talks to a daemon links libhurray.so alone.
 *
 * A C producer allocates a tensor's buffers in a daemon pool, writes them in place and
 * publishes the tensor; a C consumer acquires it and gets the same memory, read-only, as a
 * HurrayBufferList plus a HurrayTensorContext — exactly what an in-process producer hands
 * over (see the C ABI cookbook in docs/c-abi.md):
 *
 *   HurrayBufferList* list = NULL;
 *   HurrayTensorContext* context = NULL;
 *   hurray_client_acquire(client, "model/w", 0, 1000, &list, &context);
 *   ... check hurray_tensor_context_abi_version, decode the descriptor, read the buffers ...
 *   hurray_buffer_list_destroy(&list);
 *   hurray_tensor_context_destroy(&context);   // owner_release ends the lease
 *
 * Every convention of hurray.h holds: status returns, HURRAY_ERR_NULL_POINTER for null
 * required pointers, out-parameters last, OWNED/BORROWED stated per function, and
 * hurray_last_error_message() naming what went wrong. Daemon outcomes map to
 * HURRAY_ERR_NOT_FOUND, _TIMEOUT, _UNAVAILABLE, _PERMISSION_DENIED, _RESOURCE_EXHAUSTED,
 * _FAILED_PRECONDITION and _INVALID_ARGUMENT; a failure of the daemon's own (or a reply
 * that breaks the protocol) is HURRAY_ERR_DAEMON_INTERNAL.
 *
 * Threads: a HurrayClient may be used from several threads at once. A HurrayAllocation is
 * for one thread at a time.
 */
#ifndef HURRAY_CLIENT_H_
#define HURRAY_CLIENT_H_

#include "hurray.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HurrayClient HurrayClient;
typedef struct HurrayAllocation HurrayAllocation;

/* Connects to hurrayd and opens this process's session (OWNED through *out; close it with
 * hurray_client_close). `socket_path` is the daemon's gRPC socket; NULL means
 * $HURRAY_SOCKET or the default location. `client_name` (may be NULL) names the process in
 * the daemon's logs. HURRAY_ERR_UNAVAILABLE when no daemon listens. */
HURRAY_EXPORT HurrayStatus hurray_client_connect(const char* socket_path, const char* client_name,
                                                 HurrayClient** out);

/* Closes the client and writes null to *client. Idempotent: a null *client is a no-op.
 * Allocations and tensor contexts obtained through it keep its connection open until they
 * are published, cancelled or destroyed; when the last of them is gone the session ends and
 * the daemon releases its leases and frees its unpublished allocations. */
HURRAY_EXPORT HurrayStatus hurray_client_close(HurrayClient** client);

/* Allocates every buffer of `descriptor`'s buffer table in `pool` (NULL or "": the daemon's default
 * pool, "cpu") and maps them read-write into this process (OWNED through *out). `descriptor` is
 * BORROWED. */
HURRAY_EXPORT HurrayStatus hurray_client_allocate(HurrayClient* client,
                                                  const HurrayDescriptor* descriptor,
                                                  const char* pool, HurrayAllocation** out);

/* Number of buffers of an allocation (its descriptor's buffer count). */
HURRAY_EXPORT HurrayStatus hurray_allocation_buffer_count(const HurrayAllocation* allocation,
                                                          uint64_t* out);

/* Buffer `index`, writable: *data (BORROWED, valid until publish or cancel; null for an
 * empty buffer) and *byte_size. For a pool "cuda:N", *data is a device address (a
 * CUdeviceptr of the device hurray_allocation_device names), never to be dereferenced on
 * the host. HURRAY_ERR_OUT_OF_RANGE past the last buffer. */
HURRAY_EXPORT HurrayStatus hurray_allocation_buffer(const HurrayAllocation* allocation,
                                                    uint64_t index, void** data,
                                                    uint64_t* byte_size);

/* Where the allocation's buffers live: *device_tag HURRAY_DEVICE_CPU or HURRAY_DEVICE_CUDA,
 * and for CUDA *device_ordinal, this process's CUDA ordinal of the pool's GPU (found by its
 * UUID, so right whatever CUDA_VISIBLE_DEVICES is); 0 for the CPU. */
HURRAY_EXPORT HurrayStatus hurray_allocation_device(const HurrayAllocation* allocation,
                                                    uint8_t* device_tag, int32_t* device_ordinal);

/* Publishes the allocation under `name` ("namespace/name"), producer-synced: every byte is
 * written. On HURRAY_OK the allocation is consumed and *allocation set to null; *version
 * (may be NULL) receives the version created. On error the allocation is still the
 * caller's (publish again, or cancel). */
HURRAY_EXPORT HurrayStatus hurray_allocation_publish(HurrayAllocation** allocation,
                                                     const char* name, uint64_t* version);

/* Publishes as hurray_allocation_publish does, then allocates the next tensor of the same
 * descriptor in the same pool in the same round trip (OWNED through *next): a producer that
 * streams tensors of one shape makes one call per tensor. A refused publish: its error, the
 * allocation still the caller's and *next untouched. Once the publish took effect,
 * *allocation is null and *version set whatever follows; HURRAY_OK with *next set, or the
 * next allocation's error (HURRAY_ERR_RESOURCE_EXHAUSTED when the pool has no room) with
 * *next null. */
HURRAY_EXPORT HurrayStatus hurray_allocation_publish_and_allocate(HurrayAllocation** allocation,
                                                                  const char* name,
                                                                  uint64_t* version,
                                                                  HurrayAllocation** next);

/* Publishes a CUDA allocation whose buffers all declare HURRAY_SYNC_EVENT under `name`
 * without waiting for the GPU: enqueues on `stream` (a CUstream / cudaStream_t of the
 * allocation's device in this process; NULL: the legacy default stream) the signal that the
 * data is ready, after the work already queued there, then publishes. Consumers' streams
 * wait for that signal; no host blocks. HURRAY_ERR_FAILED_PRECONDITION when the allocation
 * has no fence (a CPU pool, or a buffer that does not declare Event). Consumes the
 * allocation as hurray_allocation_publish does. */
HURRAY_EXPORT HurrayStatus hurray_allocation_publish_after(HurrayAllocation** allocation,
                                                           const char* name, void* stream,
                                                           uint64_t* version);

/* Publishes `count` allocations of `client` at once, producer-synced, allocations[i] under
 * names[i]: all of them become visible together, or none does (one version each; watchers
 * get one event per name once the whole set is visible; a consumer's batch acquire sees all
 * or none). `allocations`, `names` and each names[i] are BORROWED; each allocations[i] must
 * be one of `client`'s, listed once. On HURRAY_OK every allocations[i] is consumed and set to
 * null, and versions_out[i] receives the version it created. On error nothing is published,
 * every allocation and versions_out are unchanged, and hurray_last_error_message() names
 * the first offender by its index and name: HURRAY_ERR_NULL_POINTER for a null
 * allocations[i] or names[i]; HURRAY_ERR_INVALID_ARGUMENT for a count of 0 or
 * above 100000, a bad name, a name or an allocation listed twice, or an allocation of
 * another client; HURRAY_ERR_NOT_FOUND when the daemon no longer holds an allocation;
 * HURRAY_ERR_RESOURCE_EXHAUSTED when the request is too large for the daemon. */
HURRAY_EXPORT HurrayStatus hurray_client_publish_batch(HurrayClient* client,
                                                       HurrayAllocation** allocations,
                                                       const char* const* names, uint64_t count,
                                                       uint64_t* versions_out);

/* Frees an unpublished allocation and writes null to *allocation. Idempotent. */
HURRAY_EXPORT HurrayStatus hurray_allocation_cancel(HurrayAllocation** allocation);

/* hurray_allocation_cancel in stream order: the allocation is freed once the work queued on
 * `stream` (a CUstream / cudaStream_t of the allocation's device in this process; NULL: the
 * legacy default stream) so far is done, so that kernels still writing its buffers never
 * write memory handed to another tensor. Returns at once and writes null to *allocation; the
 * daemon's answer is not reported. A host-memory allocation is cancelled now, as by
 * hurray_allocation_cancel. On a CUDA error enqueuing that point the allocation stays the
 * caller's. Idempotent. */
HURRAY_EXPORT HurrayStatus hurray_allocation_cancel_after(HurrayAllocation** allocation,
                                                          void* stream);

/* Leases tensor `name` (version 0: the latest), waiting up to `wait_timeout_ms` for it to be
 * published, and maps it read-only. On HURRAY_OK, *out_list (OWNED) holds one
 * HurrayBuffer per entry of the descriptor's buffer table, in table order, each pointing
 * into the shared mapping (writes fault), and *out_context (OWNED) carries the encoded
 * descriptor; destroying the context runs its owner_release, which ends the lease. Destroy
 * the list before the context, or at least stop reading its buffers: once the lease ends the
 * daemon may reuse the memory. HURRAY_ERR_NOT_FOUND, or HURRAY_ERR_TIMEOUT after a wait.
 *
 * A tensor of a CUDA pool: each HurrayBuffer has device tag HURRAY_DEVICE_CUDA, memory class
 * HURRAY_MEMORY_STANDARD and a device address as data (mapped read-only where the driver
 * allows). When its buffers declare HURRAY_SYNC_EVENT, each buffer holds its own CUDA event
 * (hurray_buffer_sync_event: a CUevent / cudaEvent_t) that completes once the producer's
 * data is ready: make a stream wait on it (cudaStreamWaitEvent) before reading; the host
 * never waits. The event is released with the buffer. HURRAY_ERR_FAILED_PRECONDITION when
 * this process has no CUDA driver or does not see the pool's GPU. */
HURRAY_EXPORT HurrayStatus hurray_client_acquire(HurrayClient* client, const char* name,
                                                 uint64_t version, uint32_t wait_timeout_ms,
                                                 HurrayBufferList** out_list,
                                                 HurrayTensorContext** out_context);

/* hurray_tensor_context_destroy for a context of hurray_client_acquire, in stream order: the
 * lease ends once the work queued on `stream` (a CUstream / cudaStream_t of the tensor's
 * device in this process; NULL: the legacy default stream) so far is done, so that kernels
 * still reading the buffers never read memory the daemon handed to another tensor. Returns
 * at once and writes null to *context; destroy the buffer list first. A host-memory tensor's
 * lease ends now. HURRAY_ERR_INVALID_ARGUMENT for a context that hurray_client_acquire did
 * not make; on that or a CUDA error enqueuing the point, *context is left as it was.
 * Idempotent: a null *context is a no-op. */
HURRAY_EXPORT HurrayStatus hurray_client_release_after(HurrayTensorContext** context, void* stream);

/* Deletes `name` (version 0: every version); *deleted (may be NULL) receives how many.
 * Memory returns to the pool when the last lease of each version ends. */
HURRAY_EXPORT HurrayStatus hurray_client_delete(HurrayClient* client, const char* name,
                                                uint64_t version, uint32_t* deleted);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HURRAY_CLIENT_H_ */
