/*
 * Tests the C ABI of hurray.h from C (C11, no C++), linked against the shared library
 * libhurray.so, so it also proves that every function it calls is exported.
 *
 * It walks the C ABI cookbook in order: version check, buffers and their release callbacks,
 * buffer lists, descriptors and the shape capacity/query pattern, the tensor context, the
 * sync handoff checks, and finally a consumer reading a capsule end to end. Each CHECK
 * asserts something the library could get wrong; the first failure prints where, what, and
 * hurray_last_error_message(), and exits non-zero.
 */
/* POSIX 2008 for mkdtemp, rmdir, unlink; the feature-test macro is spelled as POSIX names
 * it. NOLINTNEXTLINE(bugprone-reserved-identifier) */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "hurray.h"
#include "hurray/c_abi_private.h" /* hurray_set_last_error, for libraries built on this one. */

static int checks_passed = 0;

static void Fail(const char* file, int line, const char* what) {
  fprintf(stderr, "%s:%d: CHECK failed: %s\n  hurray_last_error_message(): \"%s\"\n", file, line,
          what, hurray_last_error_message());
  exit(EXIT_FAILURE);
}

/* Asserts a condition. */
#define CHECK(condition)                                    \
  do {                                                      \
    if (!(condition)) Fail(__FILE__, __LINE__, #condition); \
    ++checks_passed;                                        \
  } while (0)

/* Asserts that a call returns the expected status, naming both on failure. */
#define CHECK_STATUS(expected, call)                                                     \
  do {                                                                                   \
    const HurrayStatus check_status_got = (call);                                        \
    if (check_status_got != (expected)) {                                                \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call, \
              hurray_status_name(check_status_got), hurray_status_name(expected));       \
      Fail(__FILE__, __LINE__, #call " == " #expected);                                  \
    }                                                                                    \
    ++checks_passed;                                                                     \
  } while (0)

#define CHECK_OK(call) CHECK_STATUS(HURRAY_OK, call)

/* Asserts that the last call left a message mentioning `text`. */
#define CHECK_MESSAGE_MENTIONS(text) CHECK(strstr(hurray_last_error_message(), (text)) != NULL)

/* ---- Callback recorders ------------------------------------------------------------- */

/* What a release callback saw: how often it ran, and its last arguments. */
typedef struct {
  int calls;
  void* data;
  void* context;
} CallLog;

/* A HurrayReleaseCallback that records its call and frees aligned_alloc'd memory. */
static void FreeAndRecord(void* data, void* release_context) {
  CallLog* log = release_context;
  ++log->calls;
  log->data = data;
  log->context = release_context;
  free(data);
}

/* A HurrayReleaseCallback that only records (for memory the test owns, or none). */
static void RecordRelease(void* data, void* release_context) {
  CallLog* log = release_context;
  ++log->calls;
  log->data = data;
  log->context = release_context;
}

/* A HurrayOwnerRelease that records its call. */
static void RecordOwnerRelease(void* owner_context) {
  CallLog* log = owner_context;
  ++log->calls;
  log->context = owner_context;
}

/* A HurrayEventReleaseCallback that records its call. */
static void RecordEventRelease(void* sync_handle, void* event_release_context) {
  CallLog* log = event_release_context;
  ++log->calls;
  log->data = sync_handle;
  log->context = event_release_context;
}

/* Stand-ins for device events and streams: the library never dereferences them. */
static int fake_event_a;
static int fake_event_b;
static int fake_stream;

/* ---- Helpers ------------------------------------------------------------------------ */

/* Allocates `byte_size` bytes aligned to 64 and wraps them in a CPU/standard buffer with the
 * given sync mode, freed (and recorded in `log`) by FreeAndRecord. */
static HurrayBuffer* NewCpuBuffer(uint64_t byte_size, uint8_t device_tag, uint8_t sync_mode,
                                  CallLog* log) {
  void* data = aligned_alloc(64, (size_t)((byte_size + 63) / 64 * 64));
  CHECK(data != NULL);
  HurrayBuffer* buffer = NULL;
  CHECK_OK(hurray_buffer_from_ptr(data, byte_size, 64, device_tag, sync_mode,
                                  HURRAY_MEMORY_STANDARD, FreeAndRecord, log, &buffer));
  CHECK(buffer != NULL);
  return buffer;
}

/* The encoding of a dense float32 {2, 3, 4} descriptor; free with hurray_bytes_free. */
static uint8_t* EncodeDense234(size_t* len) {
  const uint64_t dims[] = {2, 3, 4};
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT32, dims, 3, &descriptor));
  uint8_t* bytes = NULL;
  CHECK_OK(hurray_descriptor_encode(descriptor, &bytes, len));
  CHECK_OK(hurray_descriptor_destroy(descriptor));
  return bytes;
}

/* ---- Version and status names ------------------------------------------------------- */

static void TestAbiVersionMatchesHeader(void) {
  CHECK(HURRAY_C_ABI_VERSION == 4u);
  CHECK(hurray_c_abi_version() == HURRAY_C_ABI_VERSION);
}

static void TestStatusNames(void) {
  CHECK(strcmp(hurray_status_name(HURRAY_OK), "HURRAY_OK") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_NULL_POINTER), "HURRAY_ERR_NULL_POINTER") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_INVALID_ARGUMENT), "HURRAY_ERR_INVALID_ARGUMENT") ==
        0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_BUFFER_TOO_SMALL), "HURRAY_ERR_BUFFER_TOO_SMALL") ==
        0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_SYNC_MODE_MISMATCH),
               "HURRAY_ERR_SYNC_MODE_MISMATCH") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_OUT_OF_RANGE), "HURRAY_ERR_OUT_OF_RANGE") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_OUT_OF_MEMORY), "HURRAY_ERR_OUT_OF_MEMORY") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_INTERNAL), "HURRAY_ERR_INTERNAL") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_INTERNAL_PANIC), "HURRAY_ERR_INTERNAL_PANIC") == 0);
  CHECK(strcmp(hurray_status_name(1), "HURRAY_ERR_UNKNOWN") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_NOT_FOUND), "HURRAY_ERR_NOT_FOUND") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_TIMEOUT), "HURRAY_ERR_TIMEOUT") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_UNAVAILABLE), "HURRAY_ERR_UNAVAILABLE") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_PERMISSION_DENIED), "HURRAY_ERR_PERMISSION_DENIED") ==
        0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_RESOURCE_EXHAUSTED),
               "HURRAY_ERR_RESOURCE_EXHAUSTED") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_FAILED_PRECONDITION),
               "HURRAY_ERR_FAILED_PRECONDITION") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_DAEMON_INTERNAL), "HURRAY_ERR_DAEMON_INTERNAL") == 0);
  CHECK(strcmp(hurray_status_name(HURRAY_ERR_DATA_LOSS), "HURRAY_ERR_DATA_LOSS") == 0);
  CHECK(strcmp(hurray_status_name(-17), "HURRAY_ERR_UNKNOWN") == 0);
  CHECK(strcmp(hurray_status_name(INT32_MIN), "HURRAY_ERR_UNKNOWN") == 0);
}

/* A library built on libhurray (libhurray-client) reports through the same last error as
 * libhurray's own calls, with the private hurray_set_last_error. */
static void TestSetLastErrorIsTheSharedChannel(void) {
  CHECK(hurray_set_last_error(HURRAY_ERR_TIMEOUT, "wait for model/w ran out") ==
        HURRAY_ERR_TIMEOUT);
  CHECK(strcmp(hurray_last_error_message(), "wait for model/w ran out") == 0);
  CHECK(hurray_set_last_error(HURRAY_ERR_UNAVAILABLE, NULL) == HURRAY_ERR_UNAVAILABLE);
  CHECK(strcmp(hurray_last_error_message(), "") == 0);

  /* Any status-returning call clears it on entry; a failing one writes its own. */
  CHECK(hurray_set_last_error(HURRAY_ERR_NOT_FOUND, "no tensor") == HURRAY_ERR_NOT_FOUND);
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_new(0, NULL));
  CHECK_MESSAGE_MENTIONS("hurray_buffer_list_new: out is null");
  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_buffer_list_new(0, &list));
  CHECK(strcmp(hurray_last_error_message(), "") == 0);
  CHECK_OK(hurray_buffer_list_destroy(&list));
}

/* ---- Buffers ------------------------------------------------------------------------ */

static void TestBufferFromAlignedPointerReleasesOnce(void) {
  CallLog log = {0};
  void* data = aligned_alloc(64, 4096);
  CHECK(data != NULL);
  HurrayBuffer* buffer = NULL;
  CHECK_OK(hurray_buffer_from_ptr(data, 4096, 64, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED,
                                  HURRAY_MEMORY_STANDARD, FreeAndRecord, &log, &buffer));
  CHECK(buffer != NULL);
  CHECK(strcmp(hurray_last_error_message(), "") == 0);

  uint64_t byte_size = 0;
  uint64_t alignment = 0;
  void* data_ptr = NULL;
  uint8_t device_tag = 0xAA;
  uint8_t memory_class = 0xAA;
  uint8_t sync_mode = 0xAA;
  CHECK_OK(hurray_buffer_byte_size(buffer, &byte_size));
  CHECK(byte_size == 4096);
  CHECK_OK(hurray_buffer_alignment(buffer, &alignment));
  CHECK(alignment == 64);
  CHECK_OK(hurray_buffer_data_ptr(buffer, &data_ptr));
  CHECK(data_ptr == data);
  CHECK_OK(hurray_buffer_device_tag(buffer, &device_tag));
  CHECK(device_tag == HURRAY_DEVICE_CPU);
  CHECK_OK(hurray_buffer_memory_class(buffer, &memory_class));
  CHECK(memory_class == HURRAY_MEMORY_STANDARD);
  CHECK_OK(hurray_buffer_sync_mode(buffer, &sync_mode));
  CHECK(sync_mode == HURRAY_SYNC_PRODUCER_SYNCED);
  CHECK(log.calls == 0);

  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(log.calls == 1);
  CHECK(log.data == data);
  CHECK(log.context == &log);

#ifdef HURRAY_TEST_LIBRARY_TRACKS_HANDLES
  /* A debug library knows the handle is gone: a second destroy releases nothing. */
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_buffer_destroy(buffer));
  CHECK_MESSAGE_MENTIONS("not a live handle");
  CHECK(log.calls == 1);
#endif
}

/* Every rejected hurray_buffer_from_ptr leaves *out alone and never runs the callback: the
 * memory stays the caller's. */
static void CheckFromPtrRefused(HurrayStatus expected, void* data, uint64_t byte_size,
                                uint64_t alignment, uint8_t device_tag, uint8_t sync_mode,
                                uint8_t memory_class, const char* mentions, int line) {
  CallLog log = {0};
  HurrayBuffer* buffer = NULL;
  const HurrayStatus status =
      hurray_buffer_from_ptr(data, byte_size, alignment, device_tag, sync_mode, memory_class,
                             RecordRelease, &log, &buffer);
  if (status != expected) {
    fprintf(stderr, "%s:%d: hurray_buffer_from_ptr returned %s, expected %s\n", __FILE__, line,
            hurray_status_name(status), hurray_status_name(expected));
    Fail(__FILE__, line, "hurray_buffer_from_ptr refused");
  }
  ++checks_passed;
  if (buffer != NULL) Fail(__FILE__, line, "buffer == NULL after a refusal");
  ++checks_passed;
  if (log.calls != 0) Fail(__FILE__, line, "release not called after a refusal");
  ++checks_passed;
  if (strstr(hurray_last_error_message(), mentions) == NULL) {
    fprintf(stderr, "%s:%d: the message does not mention \"%s\"\n", __FILE__, line, mentions);
    Fail(__FILE__, line, "the error message names the field and value");
  }
  ++checks_passed;
}

#define CHECK_FROM_PTR_REFUSED(expected, data, size, alignment, device, sync, memory, mentions) \
  CheckFromPtrRefused(expected, data, size, alignment, device, sync, memory, mentions, __LINE__)

static void TestBufferFromPtrRefusesBadArguments(void) {
  /* 128-aligned storage: base is aligned to 128, base + 64 only to 64, base + 1 to nothing. */
  unsigned char* base = aligned_alloc(128, 256);
  CHECK(base != NULL);
  const uint8_t cpu = HURRAY_DEVICE_CPU;
  const uint8_t synced = HURRAY_SYNC_PRODUCER_SYNCED;
  const uint8_t standard = HURRAY_MEMORY_STANDARD;

  /* Alignment is measured on the pointer, not taken on trust. */
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base + 1, 64, 64, cpu, synced, standard,
                         "not aligned");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base + 32, 64, 64, cpu, synced, standard,
                         "not aligned");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base + 64, 64, 128, cpu, synced, standard,
                         "128");
  /* Alignment rules: at least 64 when non-empty, always a power of two. */
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 32, cpu, synced, standard,
                         "alignment 32");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 96, cpu, synced, standard,
                         "alignment 96");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 0, cpu, synced, standard,
                         "alignment 0");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, NULL, 0, 3, cpu, synced, standard,
                         "alignment 3");
  /* Tags: reserved and invalid bytes. */
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 64, 0x09, synced, standard,
                         "device_tag 0x09");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 64, 0xEF, synced, standard,
                         "device_tag 0xEF");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 64, 0xFF, synced, standard,
                         "device_tag 0xFF");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 64, cpu, synced, 0x04,
                         "memory_class 0x04");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 64, cpu, synced, 0xFF,
                         "memory_class 0xFF");
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_INVALID_ARGUMENT, base, 64, 64, cpu, 0x03, standard,
                         "sync_mode 0x03");
  /* Null pointers: data may be null only for an empty buffer; out is always required. */
  CHECK_FROM_PTR_REFUSED(HURRAY_ERR_NULL_POINTER, NULL, 64, 64, cpu, synced, standard, "data");

  CallLog log = {0};
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_from_ptr(base, 64, 64, cpu, synced, standard,
                                                               RecordRelease, &log, NULL));
  CHECK_MESSAGE_MENTIONS("out");
  CHECK(log.calls == 0);

  /* The same storage is accepted once the declaration is true; private tags are allowed. */
  HurrayBuffer* buffer = NULL;
  CHECK_OK(hurray_buffer_from_ptr(base + 64, 64, 64, 0xF0, HURRAY_SYNC_CONSUMER_STREAM, 0xFE,
                                  RecordRelease, &log, &buffer));
  uint8_t device_tag = 0;
  uint8_t memory_class = 0;
  CHECK_OK(hurray_buffer_device_tag(buffer, &device_tag));
  CHECK(device_tag == 0xF0);
  CHECK_OK(hurray_buffer_memory_class(buffer, &memory_class));
  CHECK(memory_class == 0xFE);
  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(log.calls == 1);
  CHECK(log.data == base + 64);

  /* A null release callback means there is nothing to release. */
  CHECK_OK(hurray_buffer_from_ptr(base, 256, 128, cpu, synced, standard, NULL, NULL, &buffer));
  CHECK_OK(hurray_buffer_destroy(buffer));
  free(base);
}

static void TestEmptyBufferAcceptsAlignmentOneAndNullData(void) {
  CallLog log = {0};
  HurrayBuffer* buffer = NULL;
  CHECK_OK(hurray_buffer_from_ptr(NULL, 0, 1, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED,
                                  HURRAY_MEMORY_STANDARD, RecordRelease, &log, &buffer));
  CHECK(buffer != NULL);
  uint64_t byte_size = 99;
  uint64_t alignment = 0;
  void* data = &log;
  CHECK_OK(hurray_buffer_byte_size(buffer, &byte_size));
  CHECK(byte_size == 0);
  CHECK_OK(hurray_buffer_alignment(buffer, &alignment));
  CHECK(alignment == 1);
  CHECK_OK(hurray_buffer_data_ptr(buffer, &data));
  CHECK(data == NULL);
  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(log.calls == 1);
  CHECK(log.data == NULL);
}

/* ---- Buffer lists ------------------------------------------------------------------- */

static void TestBufferListOwnsItsBuffers(void) {
  CallLog weights_log = {0};
  CallLog scales_log = {0};
  HurrayBuffer* weights =
      NewCpuBuffer(256, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &weights_log);
  HurrayBuffer* scales =
      NewCpuBuffer(64, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &scales_log);

  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_buffer_list_new(2, &list));
  CHECK(list != NULL);
  uint64_t len = 99;
  CHECK_OK(hurray_buffer_list_len(list, &len));
  CHECK(len == 0);

  /* Push order is buffer-table order: weights are index 0, scales index 1. */
  CHECK_OK(hurray_buffer_list_push(list, weights));
  CHECK_OK(hurray_buffer_list_push(list, scales));
  CHECK_OK(hurray_buffer_list_len(list, &len));
  CHECK(len == 2);

  HurrayBuffer* borrowed = NULL;
  CHECK_OK(hurray_buffer_list_get(list, 0, &borrowed));
  CHECK(borrowed == weights);
  uint64_t byte_size = 0;
  CHECK_OK(hurray_buffer_byte_size(borrowed, &byte_size));
  CHECK(byte_size == 256);
  CHECK_OK(hurray_buffer_list_get(list, 1, &borrowed));
  CHECK(borrowed == scales);

  borrowed = NULL;
  CHECK_STATUS(HURRAY_ERR_OUT_OF_RANGE, hurray_buffer_list_get(list, 2, &borrowed));
  CHECK(borrowed == NULL);
  CHECK_MESSAGE_MENTIONS("index 2");
  CHECK_STATUS(HURRAY_ERR_OUT_OF_RANGE, hurray_buffer_list_get(list, UINT64_MAX, &borrowed));

  /* A buffer belongs to one list, once. */
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_buffer_list_push(list, weights));
  HurrayBufferList* other = NULL;
  CHECK_OK(hurray_buffer_list_new(0, &other));
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_buffer_list_push(other, scales));
  CHECK_OK(hurray_buffer_list_len(other, &len));
  CHECK(len == 0);
  CHECK_OK(hurray_buffer_list_len(list, &len));
  CHECK(len == 2);

  /* The list owns its buffers: destroying one directly is refused and releases nothing. */
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_buffer_destroy(weights));
  CHECK_MESSAGE_MENTIONS("list");
  CHECK(weights_log.calls == 0);
  CHECK(scales_log.calls == 0);

  /* Destroying the list releases each buffer exactly once and nulls the caller's pointer. */
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK(list == NULL);
  CHECK(weights_log.calls == 1);
  CHECK(scales_log.calls == 1);

  /* Idempotent: a second destroy through the nulled pointer is a no-op. */
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK(list == NULL);
  CHECK(weights_log.calls == 1);
  CHECK(scales_log.calls == 1);

  /* A huge capacity is only a hint. */
  CHECK_OK(hurray_buffer_list_destroy(&other));
  CHECK(other == NULL);
  CHECK_OK(hurray_buffer_list_new(UINT64_MAX, &other));
  CHECK_OK(hurray_buffer_list_destroy(&other));
}

/* ---- Descriptors -------------------------------------------------------------------- */

static void TestDescriptorRoundTripAndShapeQuery(void) {
  const uint64_t dims[] = {2, 3, 4};
  HurrayDescriptor* created = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT32, dims, 3, &created));
  CHECK(created != NULL);

  uint8_t* bytes = NULL;
  size_t len = 0;
  CHECK_OK(hurray_descriptor_encode(created, &bytes, &len));
  CHECK(bytes != NULL);
  CHECK(len > 0);

  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_decode(bytes, len, &descriptor));
  CHECK(descriptor != NULL);

  /* The decoded descriptor encodes to the same bytes (the encoding is deterministic). */
  uint8_t* again = NULL;
  size_t again_len = 0;
  CHECK_OK(hurray_descriptor_encode(descriptor, &again, &again_len));
  CHECK(again_len == len);
  CHECK(memcmp(again, bytes, len) == 0);
  hurray_bytes_free(again);
  hurray_bytes_free(bytes);
  hurray_bytes_free(NULL); /* A no-op. */

  uint32_t rank = 0;
  CHECK_OK(hurray_descriptor_rank(descriptor, &rank));
  CHECK(rank == 3);

  /* The capacity/query pattern, exactly as the cookbook uses it. */
  size_t capacity = 0;
  CHECK_STATUS(HURRAY_ERR_BUFFER_TOO_SMALL, hurray_descriptor_shape(descriptor, NULL, &capacity));
  CHECK(capacity == 3);
  CHECK_MESSAGE_MENTIONS("rank 3");

  uint64_t too_few[2] = {77, 77};
  capacity = 2;
  CHECK_STATUS(HURRAY_ERR_BUFFER_TOO_SMALL,
               hurray_descriptor_shape(descriptor, too_few, &capacity));
  CHECK(capacity == 3);
  CHECK(too_few[0] == 77 && too_few[1] == 77);

  uint64_t* shape = malloc(capacity * sizeof(uint64_t));
  CHECK(shape != NULL);
  CHECK_OK(hurray_descriptor_shape(descriptor, shape, &capacity));
  CHECK(capacity == 3);
  CHECK(shape[0] == 2 && shape[1] == 3 && shape[2] == 4);
  free(shape);

  /* More room than needed is fine; the rank comes back. */
  uint64_t roomy[8] = {0};
  capacity = 8;
  CHECK_OK(hurray_descriptor_shape(descriptor, roomy, &capacity));
  CHECK(capacity == 3);
  CHECK(roomy[0] == 2 && roomy[1] == 3 && roomy[2] == 4 && roomy[3] == 0);

  uint8_t type_tag = 0;
  CHECK_OK(hurray_descriptor_element_type_tag(descriptor, &type_tag));
  CHECK(type_tag == HURRAY_ELEMENT_FLOAT32);

  uint64_t buffer_count = 0;
  CHECK_OK(hurray_descriptor_buffer_count(descriptor, &buffer_count));
  CHECK(buffer_count == 1);
  uint64_t buffer_size = 0;
  CHECK_OK(hurray_descriptor_buffer_byte_size(descriptor, 0, &buffer_size));
  CHECK(buffer_size == 2 * 3 * 4 * sizeof(float));
  CHECK(buffer_size == 96);
  buffer_size = 5;
  CHECK_STATUS(HURRAY_ERR_OUT_OF_RANGE,
               hurray_descriptor_buffer_byte_size(descriptor, 1, &buffer_size));
  CHECK(buffer_size == 5);

  CHECK_OK(hurray_descriptor_destroy(descriptor));
#ifdef HURRAY_TEST_LIBRARY_TRACKS_HANDLES
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_descriptor_destroy(descriptor));
  CHECK_MESSAGE_MENTIONS("destroyed twice");
#endif
  CHECK_OK(hurray_descriptor_destroy(created));
}

static void TestScalarDescriptor(void) {
  HurrayDescriptor* scalar = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT64, NULL, 0, &scalar));
  uint32_t rank = 99;
  CHECK_OK(hurray_descriptor_rank(scalar, &rank));
  CHECK(rank == 0);
  size_t capacity = 0;
  CHECK_OK(hurray_descriptor_shape(scalar, NULL, &capacity));
  CHECK(capacity == 0);
  capacity = 4;
  CHECK_OK(hurray_descriptor_shape(scalar, NULL, &capacity));
  CHECK(capacity == 0);
  uint64_t buffer_size = 0;
  CHECK_OK(hurray_descriptor_buffer_byte_size(scalar, 0, &buffer_size));
  CHECK(buffer_size == 8);

  /* A scalar survives the round trip too. */
  uint8_t* bytes = NULL;
  size_t len = 0;
  CHECK_OK(hurray_descriptor_encode(scalar, &bytes, &len));
  HurrayDescriptor* decoded = NULL;
  CHECK_OK(hurray_descriptor_decode(bytes, len, &decoded));
  CHECK_OK(hurray_descriptor_rank(decoded, &rank));
  CHECK(rank == 0);
  hurray_bytes_free(bytes);
  CHECK_OK(hurray_descriptor_destroy(decoded));
  CHECK_OK(hurray_descriptor_destroy(scalar));
}

static void TestNewDenseRefusesBadArguments(void) {
  const uint64_t dims[] = {2, 3};
  HurrayDescriptor* descriptor = NULL;
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_descriptor_new_dense(0, dims, 2, &descriptor));
  CHECK_MESSAGE_MENTIONS("tag 0");
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT8_E8M0 + 1, dims, 2, &descriptor));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER,
               hurray_descriptor_new_dense(HURRAY_ELEMENT_INT8, NULL, 2, &descriptor));
  CHECK_MESSAGE_MENTIONS("dims");
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_new_dense(HURRAY_ELEMENT_INT8, dims, 65, &descriptor));
  CHECK_MESSAGE_MENTIONS("rank 65");
  const uint64_t huge[] = {UINT64_MAX, 2};
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_new_dense(HURRAY_ELEMENT_INT64, huge, 2, &descriptor));
  CHECK_MESSAGE_MENTIONS("overflows");
  CHECK(descriptor == NULL);
}

static void TestDecodeRefusesGarbage(void) {
  const uint8_t garbage[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  HurrayDescriptor* descriptor = NULL;
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_decode(garbage, sizeof garbage, &descriptor));
  CHECK(descriptor == NULL);
  CHECK(hurray_last_error_message()[0] != '\0');

  /* A truncated encoding does not decode either. */
  size_t len = 0;
  uint8_t* bytes = EncodeDense234(&len);
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_descriptor_decode(bytes, len - 1, &descriptor));
  CHECK(descriptor == NULL);
  hurray_bytes_free(bytes);

  /* Zero bytes parse as an empty message, which names no element type. */
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_descriptor_decode(NULL, 0, &descriptor));
  CHECK_MESSAGE_MENTIONS("element_type");
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_decode(NULL, 4, &descriptor));
  CHECK(descriptor == NULL);

  /* A success clears the message. */
  HurrayDescriptor* scalar = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_BOOL, NULL, 0, &scalar));
  CHECK(strcmp(hurray_last_error_message(), "") == 0);
  CHECK_OK(hurray_descriptor_destroy(scalar));
}

/* A list holding one buffer as described; the buffer records its release in `log`. */
static HurrayBufferList* ListOfOne(uint64_t byte_size, uint8_t device_tag, uint8_t sync_mode,
                                   CallLog* log) {
  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_buffer_list_new(1, &list));
  CHECK_OK(hurray_buffer_list_push(list, NewCpuBuffer(byte_size, device_tag, sync_mode, log)));
  return list;
}

static void TestCheckBufferList(void) {
  const uint64_t dims[] = {2, 3, 4};
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT32, dims, 3, &descriptor));
  CallLog log = {0};

  HurrayBufferList* matching = ListOfOne(96, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &log);
  CHECK_OK(hurray_descriptor_check_buffer_list(descriptor, matching));

  /* A stronger alignment than the table's still matches. */
  unsigned char* storage = aligned_alloc(4096, 4096);
  CHECK(storage != NULL);
  HurrayBuffer* page_aligned = NULL;
  CHECK_OK(hurray_buffer_from_ptr(storage, 96, 4096, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED,
                                  HURRAY_MEMORY_STANDARD, FreeAndRecord, &log, &page_aligned));
  HurrayBufferList* stronger = NULL;
  CHECK_OK(hurray_buffer_list_new(1, &stronger));
  CHECK_OK(hurray_buffer_list_push(stronger, page_aligned));
  CHECK_OK(hurray_descriptor_check_buffer_list(descriptor, stronger));

  HurrayBufferList* empty = NULL;
  CHECK_OK(hurray_buffer_list_new(0, &empty));
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_descriptor_check_buffer_list(descriptor, empty));
  CHECK_MESSAGE_MENTIONS("0 buffers");

  HurrayBufferList* two = ListOfOne(96, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &log);
  CHECK_OK(hurray_buffer_list_push(
      two, NewCpuBuffer(96, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &log)));
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_descriptor_check_buffer_list(descriptor, two));
  CHECK_MESSAGE_MENTIONS("2 buffers");

  HurrayBufferList* wrong_size =
      ListOfOne(128, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &log);
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_check_buffer_list(descriptor, wrong_size));
  CHECK_MESSAGE_MENTIONS("byte_size 128");

  HurrayBufferList* wrong_device =
      ListOfOne(96, HURRAY_DEVICE_CUDA, HURRAY_SYNC_PRODUCER_SYNCED, &log);
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_check_buffer_list(descriptor, wrong_device));
  CHECK_MESSAGE_MENTIONS("cuda");

  HurrayBufferList* wrong_sync = ListOfOne(96, HURRAY_DEVICE_CPU, HURRAY_SYNC_EVENT, &log);
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_descriptor_check_buffer_list(descriptor, wrong_sync));
  CHECK_MESSAGE_MENTIONS("sync_mode");

  CHECK_OK(hurray_buffer_list_destroy(&matching));
  CHECK_OK(hurray_buffer_list_destroy(&stronger));
  CHECK_OK(hurray_buffer_list_destroy(&empty));
  CHECK_OK(hurray_buffer_list_destroy(&two));
  CHECK_OK(hurray_buffer_list_destroy(&wrong_size));
  CHECK_OK(hurray_buffer_list_destroy(&wrong_device));
  CHECK_OK(hurray_buffer_list_destroy(&wrong_sync));
  CHECK(log.calls == 7);
  CHECK_OK(hurray_descriptor_destroy(descriptor));
}

/* ---- Tensor context ----------------------------------------------------------------- */

static void TestTensorContextCarriesDescriptorAndReleasesOwnerOnce(void) {
  size_t len = 0;
  uint8_t* bytes = EncodeDense234(&len);
  uint8_t* expected = malloc(len);
  CHECK(expected != NULL);
  memcpy(expected, bytes, len);

  CallLog owner = {0};
  HurrayTensorContext* context = NULL;
  CHECK_OK(hurray_tensor_context_new(bytes, len, RecordOwnerRelease, &owner, &context));
  CHECK(context != NULL);
  /* The context keeps its own copy: the caller's bytes may go at once. */
  hurray_bytes_free(bytes);

  uint32_t abi_version = 0;
  CHECK_OK(hurray_tensor_context_abi_version(context, &abi_version));
  CHECK(abi_version == HURRAY_C_ABI_VERSION);
  CHECK(abi_version == 4u);

  const uint8_t* borrowed = NULL;
  uint64_t borrowed_len = 0;
  CHECK_OK(hurray_tensor_context_descriptor(context, &borrowed, &borrowed_len));
  CHECK(borrowed != NULL);
  CHECK(borrowed_len == len);
  CHECK(memcmp(borrowed, expected, len) == 0);
  free(expected);

  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_decode(borrowed, borrowed_len, &descriptor));
  uint32_t rank = 0;
  CHECK_OK(hurray_descriptor_rank(descriptor, &rank));
  CHECK(rank == 3);
  CHECK_OK(hurray_descriptor_destroy(descriptor));
  CHECK(owner.calls == 0);

  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK(context == NULL);
  CHECK(owner.calls == 1);
  CHECK(owner.context == &owner);
  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK(context == NULL);
  CHECK(owner.calls == 1);
}

static void TestTensorContextRefusesInvalidDescriptor(void) {
  const uint8_t garbage[] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  CallLog owner = {0};
  HurrayTensorContext* context = NULL;
  CHECK_STATUS(
      HURRAY_ERR_INVALID_ARGUMENT,
      hurray_tensor_context_new(garbage, sizeof garbage, RecordOwnerRelease, &owner, &context));
  CHECK(context == NULL);
  CHECK(owner.calls == 0);
  CHECK(hurray_last_error_message()[0] != '\0');

  CHECK_STATUS(HURRAY_ERR_NULL_POINTER,
               hurray_tensor_context_new(NULL, 4, RecordOwnerRelease, &owner, &context));
  CHECK_STATUS(
      HURRAY_ERR_NULL_POINTER,
      hurray_tensor_context_new(garbage, sizeof garbage, RecordOwnerRelease, &owner, NULL));
  CHECK(context == NULL);
  CHECK(owner.calls == 0);
}

static void TestTensorContextWithoutDescriptor(void) {
  CallLog owner = {0};
  HurrayTensorContext* context = NULL;
  CHECK_OK(hurray_tensor_context_new(NULL, 0, RecordOwnerRelease, &owner, &context));
  const uint8_t* bytes = (const uint8_t*)&owner;
  uint64_t len = 99;
  CHECK_OK(hurray_tensor_context_descriptor(context, &bytes, &len));
  CHECK(bytes == NULL);
  CHECK(len == 0);
  uint32_t abi_version = 0;
  CHECK_OK(hurray_tensor_context_abi_version(context, &abi_version));
  CHECK(abi_version == HURRAY_C_ABI_VERSION);
  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK(owner.calls == 1);

  /* owner_release may be null. */
  CHECK_OK(hurray_tensor_context_new(NULL, 0, NULL, NULL, &context));
  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK(context == NULL);
}

/* ---- Sync handoff ------------------------------------------------------------------- */

static void TestProducerSyncedHandoff(void) {
  CallLog data_log = {0};
  CallLog event_log = {0};
  HurrayBuffer* buffer =
      NewCpuBuffer(64, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &data_log);
  CHECK_OK(hurray_buffer_handoff_producer_synced(buffer));

  const HurraySyncEventPayload event = {
      .sync_handle = &fake_event_a,
      .sync_handle_device_tag = HURRAY_DEVICE_CPU,
      .event_release_fn = RecordEventRelease,
      .event_release_context = &event_log,
  };
  CHECK_STATUS(HURRAY_ERR_SYNC_MODE_MISMATCH, hurray_buffer_handoff_event(buffer, &event));
  CHECK_MESSAGE_MENTIONS("producer_synced");
  const HurraySyncConsumerStreamPayload stream = {
      .consumer_stream = &fake_stream,
      .consumer_stream_device_tag = HURRAY_DEVICE_CPU,
  };
  CHECK_STATUS(HURRAY_ERR_SYNC_MODE_MISMATCH,
               hurray_buffer_handoff_consumer_stream(buffer, &stream));

  void* attached = &event_log;
  CHECK_OK(hurray_buffer_sync_event(buffer, &attached));
  CHECK(attached == NULL);
  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(data_log.calls == 1);
  CHECK(event_log.calls == 0); /* A refused event stays the caller's. */
}

static void TestEventHandoffPassesOwnershipToBuffer(void) {
  CallLog data_log = {0};
  CallLog first_log = {0};
  CallLog second_log = {0};
  HurrayBuffer* buffer = NewCpuBuffer(64, HURRAY_DEVICE_CUDA, HURRAY_SYNC_EVENT, &data_log);

  CHECK_STATUS(HURRAY_ERR_SYNC_MODE_MISMATCH, hurray_buffer_handoff_producer_synced(buffer));
  const HurraySyncConsumerStreamPayload stream = {
      .consumer_stream = NULL,
      .consumer_stream_device_tag = HURRAY_DEVICE_CUDA,
  };
  CHECK_STATUS(HURRAY_ERR_SYNC_MODE_MISMATCH,
               hurray_buffer_handoff_consumer_stream(buffer, &stream));
  CHECK_MESSAGE_MENTIONS("event");

  /* The event must belong to the buffer's device. */
  HurraySyncEventPayload event = {
      .sync_handle = &fake_event_a,
      .sync_handle_device_tag = HURRAY_DEVICE_CPU,
      .event_release_fn = RecordEventRelease,
      .event_release_context = &first_log,
  };
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_buffer_handoff_event(buffer, &event));
  CHECK_MESSAGE_MENTIONS("0x00");
  CHECK(first_log.calls == 0);
  void* attached = &data_log;
  CHECK_OK(hurray_buffer_sync_event(buffer, &attached));
  CHECK(attached == NULL);

  /* The event itself is required. */
  event.sync_handle = NULL;
  event.sync_handle_device_tag = HURRAY_DEVICE_CUDA;
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_handoff_event(buffer, &event));
  CHECK_MESSAGE_MENTIONS("sync_handle");
  CHECK(first_log.calls == 0);

  /* On success the buffer owns the event. */
  event.sync_handle = &fake_event_a;
  CHECK_OK(hurray_buffer_handoff_event(buffer, &event));
  CHECK_OK(hurray_buffer_sync_event(buffer, &attached));
  CHECK(attached == &fake_event_a);
  CHECK(first_log.calls == 0);

  /* A second event replaces the first, which is released then, exactly once. */
  const HurraySyncEventPayload replacement = {
      .sync_handle = &fake_event_b,
      .sync_handle_device_tag = HURRAY_DEVICE_CUDA,
      .event_release_fn = RecordEventRelease,
      .event_release_context = &second_log,
  };
  CHECK_OK(hurray_buffer_handoff_event(buffer, &replacement));
  CHECK(first_log.calls == 1);
  CHECK(first_log.data == &fake_event_a);
  CHECK(first_log.context == &first_log);
  CHECK_OK(hurray_buffer_sync_event(buffer, &attached));
  CHECK(attached == &fake_event_b);
  CHECK(second_log.calls == 0);

  /* The same event recorded again and handed over again is not released (the buffer would
   * otherwise hold a dead event); the newer payload's callback is the one that runs. */
  CallLog again_log = {0};
  HurraySyncEventPayload same_event = replacement;
  same_event.event_release_context = &again_log;
  CHECK_OK(hurray_buffer_handoff_event(buffer, &same_event));
  CHECK(second_log.calls == 0);
  CHECK(again_log.calls == 0);

  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(data_log.calls == 1);
  CHECK(first_log.calls == 1);
  CHECK(second_log.calls == 0);
  CHECK(again_log.calls == 1);
  CHECK(again_log.data == &fake_event_b);
}

static void TestEventReleasedWithItsList(void) {
  CallLog data_log = {0};
  CallLog event_log = {0};
  HurrayBufferList* list = ListOfOne(64, HURRAY_DEVICE_CUDA, HURRAY_SYNC_EVENT, &data_log);
  HurrayBuffer* borrowed = NULL;
  CHECK_OK(hurray_buffer_list_get(list, 0, &borrowed));
  const HurraySyncEventPayload event = {
      .sync_handle = &fake_event_a,
      .sync_handle_device_tag = HURRAY_DEVICE_CUDA,
      .event_release_fn = RecordEventRelease,
      .event_release_context = &event_log,
  };
  CHECK_OK(hurray_buffer_handoff_event(borrowed, &event));
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK(data_log.calls == 1);
  CHECK(event_log.calls == 1);
}

static void TestConsumerStreamHandoff(void) {
  CallLog data_log = {0};
  CallLog event_log = {0};
  HurrayBuffer* buffer =
      NewCpuBuffer(64, HURRAY_DEVICE_CUDA, HURRAY_SYNC_CONSUMER_STREAM, &data_log);
  HurraySyncConsumerStreamPayload stream = {
      .consumer_stream = &fake_stream,
      .consumer_stream_device_tag = HURRAY_DEVICE_CUDA,
  };
  CHECK_OK(hurray_buffer_handoff_consumer_stream(buffer, &stream));
  stream.consumer_stream = NULL; /* The device's default stream. */
  CHECK_OK(hurray_buffer_handoff_consumer_stream(buffer, &stream));
  stream.consumer_stream_device_tag = HURRAY_DEVICE_ROCM;
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_buffer_handoff_consumer_stream(buffer, &stream));
  CHECK_MESSAGE_MENTIONS("0x02");

  CHECK_STATUS(HURRAY_ERR_SYNC_MODE_MISMATCH, hurray_buffer_handoff_producer_synced(buffer));
  const HurraySyncEventPayload event = {
      .sync_handle = &fake_event_a,
      .sync_handle_device_tag = HURRAY_DEVICE_CUDA,
      .event_release_fn = RecordEventRelease,
      .event_release_context = &event_log,
  };
  CHECK_STATUS(HURRAY_ERR_SYNC_MODE_MISMATCH, hurray_buffer_handoff_event(buffer, &event));
  CHECK_MESSAGE_MENTIONS("consumer_stream");
  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(data_log.calls == 1);
  CHECK(event_log.calls == 0);
}

/* ---- Null pointers, debug checks, threads ------------------------------------------- */

static void TestNullPointersAreRefused(void) {
  CallLog log = {0};
  HurrayBuffer* buffer = NewCpuBuffer(64, HURRAY_DEVICE_CPU, HURRAY_SYNC_EVENT, &log);
  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_buffer_list_new(0, &list));
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_UINT8, NULL, 0, &descriptor));
  HurrayTensorContext* context = NULL;
  CHECK_OK(hurray_tensor_context_new(NULL, 0, NULL, NULL, &context));
  uint64_t u64 = 0;
  size_t size = 0;
  uint32_t u32 = 0;
  uint8_t u8 = 0;
  void* pointer = NULL;
  uint8_t* bytes = NULL;
  const uint8_t* borrowed_bytes = NULL;

  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_byte_size(NULL, &u64));
  CHECK_MESSAGE_MENTIONS("hurray_buffer_byte_size: buffer is null");
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_byte_size(buffer, NULL));
  CHECK_MESSAGE_MENTIONS("hurray_buffer_byte_size: out is null");
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_alignment(buffer, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_data_ptr(NULL, &pointer));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_device_tag(buffer, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_memory_class(NULL, &u8));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_sync_mode(NULL, &u8));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_destroy(NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_new(0, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_push(NULL, buffer));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_push(list, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_len(NULL, &u64));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_get(list, 0, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_list_destroy(NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_decode(NULL, 1, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER,
               hurray_descriptor_new_dense(HURRAY_ELEMENT_INT8, NULL, 0, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_encode(NULL, &bytes, &size));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_encode(descriptor, NULL, &size));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_encode(descriptor, &bytes, NULL));
  CHECK(bytes == NULL);
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_destroy(NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_rank(NULL, &u32));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_shape(NULL, NULL, &size));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_shape(descriptor, NULL, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_element_type_tag(descriptor, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_buffer_count(NULL, &u64));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_buffer_byte_size(descriptor, 0, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_check_buffer_list(NULL, list));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_descriptor_check_buffer_list(descriptor, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_tensor_context_abi_version(NULL, &u32));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_tensor_context_abi_version(context, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_tensor_context_descriptor(context, NULL, &u64));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER,
               hurray_tensor_context_descriptor(context, &borrowed_bytes, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_tensor_context_destroy(NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_handoff_event(NULL, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_handoff_event(buffer, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_sync_event(buffer, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_handoff_consumer_stream(buffer, NULL));
  CHECK_STATUS(HURRAY_ERR_NULL_POINTER, hurray_buffer_handoff_producer_synced(NULL));

  /* Nothing was consumed by the refusals. */
  CHECK_OK(hurray_buffer_list_len(list, &u64));
  CHECK(u64 == 0);
  CHECK(log.calls == 0);
  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK_OK(hurray_descriptor_destroy(descriptor));
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK(log.calls == 1);
}

#ifndef NDEBUG
/* Debug builds track live handles: a second destroy through a stale copy of the pointer (the
 * destroy nulls only the variable it was given), or a handle of the wrong kind, is
 * HURRAY_ERR_INTERNAL instead of a double free. */
static void TestDebugBuildDetectsDoubleDestroy(void) {
  CallLog log = {0};
  HurrayBuffer* buffer = NewCpuBuffer(64, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, &log);
  HurrayBuffer* buffer_copy = buffer;
  CHECK_OK(hurray_buffer_destroy(buffer));
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_buffer_destroy(buffer_copy));
  CHECK_MESSAGE_MENTIONS("not a live handle");
  CHECK(log.calls == 1);

  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_INT32, NULL, 0, &descriptor));
  HurrayDescriptor* descriptor_copy = descriptor;
  CHECK_OK(hurray_descriptor_destroy(descriptor));
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_descriptor_destroy(descriptor_copy));

  /* The same holds for lists and contexts. */
  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_buffer_list_new(0, &list));
  HurrayBufferList* copy = list;
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_buffer_list_destroy(&copy));

  CallLog owner = {0};
  HurrayTensorContext* context = NULL;
  CHECK_OK(hurray_tensor_context_new(NULL, 0, RecordOwnerRelease, &owner, &context));
  HurrayTensorContext* context_copy = context;
  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_tensor_context_destroy(&context_copy));
  CHECK(owner.calls == 1);

  /* A live handle of another kind is refused, not freed. */
  CHECK_OK(hurray_buffer_list_new(0, &list));
  /* The wrong kind on purpose: through void*, as a confused caller would pass it. */
  /* NOLINTNEXTLINE(bugprone-casting-through-void) */
  HurrayBuffer* list_as_buffer = (HurrayBuffer*)(void*)list;
  /* NOLINTNEXTLINE(bugprone-casting-through-void) */
  HurrayDescriptor* list_as_descriptor = (HurrayDescriptor*)(void*)list;
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_buffer_destroy(list_as_buffer));
  CHECK_STATUS(HURRAY_ERR_INTERNAL, hurray_descriptor_destroy(list_as_descriptor));
  CHECK_OK(hurray_buffer_list_destroy(&list));
}
#endif

/* Fails a call on its own thread and reports what that thread saw. */
static int FailOnOtherThread(void* result) {
  HurrayBuffer* buffer = NULL;
  const HurrayStatus status =
      hurray_buffer_from_ptr(NULL, 0, 3, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED,
                             HURRAY_MEMORY_STANDARD, NULL, NULL, &buffer);
  *(int*)result = status == HURRAY_ERR_INVALID_ARGUMENT &&
                  strstr(hurray_last_error_message(), "alignment 3") != NULL;
  return 0;
}

static void TestLastErrorMessageIsPerThread(void) {
  size_t capacity = 0;
  HurrayDescriptor* descriptor = NULL;
  const uint64_t dims[] = {5};
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_INT16, dims, 1, &descriptor));
  CHECK_STATUS(HURRAY_ERR_BUFFER_TOO_SMALL, hurray_descriptor_shape(descriptor, NULL, &capacity));

  int other_thread_saw_its_error = 0;
  thrd_t thread;
  CHECK(thrd_create(&thread, FailOnOtherThread, &other_thread_saw_its_error) == thrd_success);
  CHECK(thrd_join(thread, NULL) == thrd_success);
  CHECK(other_thread_saw_its_error == 1);

  /* This thread still reports its own last error. */
  CHECK_MESSAGE_MENTIONS("hurray_descriptor_shape");
  CHECK_MESSAGE_MENTIONS("rank 1");
  CHECK_OK(hurray_descriptor_destroy(descriptor));
}

/* ---- The cookbook, end to end -------------------------------------------------------- */

/* The producer side: a float32 {4, 16} tensor as a buffer list plus a tensor context. */
static void ProduceCapsule(CallLog* data_log, CallLog* owner_log, HurrayBufferList** list,
                           HurrayTensorContext** context) {
  const uint64_t dims[] = {4, 16};
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT32, dims, 2, &descriptor));
  uint64_t byte_size = 0;
  CHECK_OK(hurray_descriptor_buffer_byte_size(descriptor, 0, &byte_size));
  CHECK(byte_size == 256);

  float* values = aligned_alloc(64, (size_t)byte_size);
  CHECK(values != NULL);
  for (int i = 0; i < 64; ++i) values[i] = (float)i;
  HurrayBuffer* buffer = NULL;
  CHECK_OK(hurray_buffer_from_ptr(values, byte_size, 64, HURRAY_DEVICE_CPU,
                                  HURRAY_SYNC_PRODUCER_SYNCED, HURRAY_MEMORY_STANDARD,
                                  FreeAndRecord, data_log, &buffer));
  CHECK_OK(hurray_buffer_list_new(1, list));
  CHECK_OK(hurray_buffer_list_push(*list, buffer));

  uint8_t* bytes = NULL;
  size_t len = 0;
  CHECK_OK(hurray_descriptor_encode(descriptor, &bytes, &len));
  CHECK_OK(hurray_tensor_context_new(bytes, len, RecordOwnerRelease, owner_log, context));
  hurray_bytes_free(bytes);
  CHECK_OK(hurray_descriptor_destroy(descriptor));
}

/* The consumer side, in the cookbook's order: version, descriptor, buffers, destroy. */
static void TestConsumerReadsCapsule(void) {
  CallLog data_log = {0};
  CallLog owner_log = {0};
  HurrayBufferList* list = NULL;
  HurrayTensorContext* context = NULL;
  ProduceCapsule(&data_log, &owner_log, &list, &context);

  uint32_t abi_version = 0;
  CHECK_OK(hurray_tensor_context_abi_version(context, &abi_version));
  CHECK(abi_version == HURRAY_C_ABI_VERSION);

  const uint8_t* bytes = NULL;
  uint64_t len = 0;
  CHECK_OK(hurray_tensor_context_descriptor(context, &bytes, &len));
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_decode(bytes, len, &descriptor));

  uint8_t type_tag = 0;
  uint32_t rank = 0;
  CHECK_OK(hurray_descriptor_element_type_tag(descriptor, &type_tag));
  CHECK(type_tag == HURRAY_ELEMENT_FLOAT32);
  CHECK_OK(hurray_descriptor_rank(descriptor, &rank));
  CHECK(rank == 2);
  size_t capacity = 0;
  CHECK_STATUS(HURRAY_ERR_BUFFER_TOO_SMALL, hurray_descriptor_shape(descriptor, NULL, &capacity));
  uint64_t* dims = malloc(capacity * sizeof(uint64_t));
  CHECK(dims != NULL);
  CHECK_OK(hurray_descriptor_shape(descriptor, dims, &capacity));
  CHECK(capacity == 2 && dims[0] == 4 && dims[1] == 16);
  free(dims);

  CHECK_OK(hurray_descriptor_check_buffer_list(descriptor, list));
  uint64_t count = 0;
  CHECK_OK(hurray_buffer_list_len(list, &count));
  CHECK(count == 1);
  for (uint64_t i = 0; i < count; ++i) {
    HurrayBuffer* borrowed = NULL;
    CHECK_OK(hurray_buffer_list_get(list, i, &borrowed));
    CHECK_OK(hurray_buffer_handoff_producer_synced(borrowed));
    void* data = NULL;
    uint64_t size = 0;
    CHECK_OK(hurray_buffer_data_ptr(borrowed, &data));
    CHECK_OK(hurray_buffer_byte_size(borrowed, &size));
    CHECK(size == 256);
    const float* values = data;
    CHECK(values[0] == 0.0f && values[63] == 63.0f);
  }

  CHECK_OK(hurray_descriptor_destroy(descriptor));
  CHECK_OK(hurray_tensor_context_destroy(&context));
  CHECK(context == NULL);
  CHECK(owner_log.calls == 1);
  CHECK(data_log.calls == 0);
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK(list == NULL);
  CHECK(data_log.calls == 1);
}

/* ---- Files ----------------------------------------------------------------------------- */

/* A protobuf message under construction, for descriptors C cannot build with new_dense. */
typedef struct {
  uint8_t bytes[256];
  uint64_t len;
} Proto;

static void PutVarint(Proto* message, uint64_t value) {
  while (value >= 0x80) {
    message->bytes[message->len++] = (uint8_t)(value | 0x80);
    value >>= 7;
  }
  message->bytes[message->len++] = (uint8_t)value;
}

static void PutUint(Proto* message, uint32_t field, uint64_t value) {
  PutVarint(message, (uint64_t)field << 3);
  PutVarint(message, value);
}

static void PutMessage(Proto* message, uint32_t field, const Proto* inner) {
  PutVarint(message, ((uint64_t)field << 3) | 2);
  PutVarint(message, inner->len);
  memcpy(message->bytes + message->len, inner->bytes, (size_t)inner->len);
  message->len += inner->len;
}

/* hurray.v1.TensorDescriptor fields. */
enum {
  kElementType = 1,
  kShape = 2,
  kDense = 3,
  kCoo = 4,
  kBlockPaged = 7,
  kPerChannel = 9,
  kBuffers = 12
};

static void PutCpuBuffer(Proto* descriptor, uint64_t byte_size) {
  Proto buffer = {{0}, 0};
  PutUint(&buffer, 1, byte_size);
  PutUint(&buffer, 2, 64);
  PutMessage(descriptor, kBuffers, &buffer);
}

/* int8 {4, 8}, per-channel affine on axis 0: data (32 B), float32 scales (16 B) and int8
 * zero points (4 B). */
static HurrayDescriptor* PerChannelDescriptor(void) {
  Proto message = {{0}, 0};
  Proto dense = {{0}, 0};
  Proto affine = {{0}, 0};
  PutUint(&message, kElementType, HURRAY_ELEMENT_INT8);
  PutUint(&message, kShape, 4);
  PutUint(&message, kShape, 8);
  PutMessage(&message, kDense, &dense);
  PutUint(&affine, 2, 1);                      /* scale_buffer */
  PutUint(&affine, 3, HURRAY_ELEMENT_FLOAT32); /* scale_type */
  PutUint(&affine, 4, 2);                      /* zero_point_buffer */
  PutUint(&affine, 5, HURRAY_ELEMENT_INT8);    /* zero_point_type */
  PutMessage(&message, kPerChannel, &affine);
  PutCpuBuffer(&message, 32);
  PutCpuBuffer(&message, 16);
  PutCpuBuffer(&message, 4);
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_decode(message.bytes, message.len, &descriptor));
  return descriptor;
}

/* float32 {4, 4} COO with 3 non-zeros: values (12 B) and uint64 indices (48 B). */
static HurrayDescriptor* CooDescriptor(void) {
  Proto message = {{0}, 0};
  Proto coo = {{0}, 0};
  PutUint(&message, kElementType, HURRAY_ELEMENT_FLOAT32);
  PutUint(&message, kShape, 4);
  PutUint(&message, kShape, 4);
  PutUint(&coo, 2, 1); /* indices_buffer */
  PutUint(&coo, 3, 3); /* nnz */
  PutMessage(&message, kCoo, &coo);
  PutCpuBuffer(&message, 12);
  PutCpuBuffer(&message, 48);
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_decode(message.bytes, message.len, &descriptor));
  return descriptor;
}

/* float32 {6, 2} block-paged, blocks of 2 rows in 3 pages: pages (48 B), table (24 B). */
static HurrayDescriptor* BlockPagedDescriptor(void) {
  Proto message = {{0}, 0};
  Proto paged = {{0}, 0};
  PutUint(&message, kElementType, HURRAY_ELEMENT_FLOAT32);
  PutUint(&message, kShape, 6);
  PutUint(&message, kShape, 2);
  PutUint(&paged, 2, 1); /* page_table_buffer */
  PutUint(&paged, 3, 2); /* block_size */
  PutUint(&paged, 4, 3); /* num_pages */
  PutMessage(&message, kBlockPaged, &paged);
  PutCpuBuffer(&message, 48);
  PutCpuBuffer(&message, 24);
  HurrayDescriptor* descriptor = NULL;
  CHECK_OK(hurray_descriptor_decode(message.bytes, message.len, &descriptor));
  return descriptor;
}

static uint8_t PatternByte(uint64_t tensor, uint64_t buffer, uint64_t i) {
  return (uint8_t)(tensor * 61 + buffer * 17 + i);
}

/* A list with the first `count` buffers of the descriptor's table, filled with the pattern
 * of tensor `tensor`. */
static HurrayBufferList* PatternList(const HurrayDescriptor* descriptor, uint64_t tensor,
                                     uint64_t count, CallLog* log) {
  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_buffer_list_new(count, &list));
  for (uint64_t b = 0; b < count; ++b) {
    uint64_t size = 0;
    CHECK_OK(hurray_descriptor_buffer_byte_size(descriptor, b, &size));
    HurrayBuffer* buffer = NewCpuBuffer(size, HURRAY_DEVICE_CPU, HURRAY_SYNC_PRODUCER_SYNCED, log);
    void* data = NULL;
    CHECK_OK(hurray_buffer_data_ptr(buffer, &data));
    for (uint64_t i = 0; i < size; ++i) ((uint8_t*)data)[i] = PatternByte(tensor, b, i);
    CHECK_OK(hurray_buffer_list_push(list, buffer));
  }
  return list;
}

static const char* const kFileTensorNames[] = {"model/quantized", "model/coo", "model/paged"};

static void CheckReadTensor(const HurrayReader* reader, uint64_t tensor) {
  char name[64];
  uint64_t size = 0;
  CHECK_STATUS(HURRAY_ERR_BUFFER_TOO_SMALL, hurray_reader_tensor_name(reader, tensor, NULL, &size));
  CHECK(size == strlen(kFileTensorNames[tensor]) + 1);
  CHECK_OK(hurray_reader_tensor_name(reader, tensor, name, &size));
  CHECK(strcmp(name, kFileTensorNames[tensor]) == 0);

  HurrayDescriptor* descriptor = NULL;
  HurrayBufferList* list = NULL;
  CHECK_OK(hurray_reader_read_tensor(reader, tensor, &descriptor, &list));
  CHECK_OK(hurray_descriptor_check_buffer_list(descriptor, list));
  uint64_t count = 0;
  CHECK_OK(hurray_buffer_list_len(list, &count));
  CHECK(count == (tensor == 0 ? 3u : 2u));
  for (uint64_t b = 0; b < count; ++b) {
    HurrayBuffer* buffer = NULL;
    void* data = NULL;
    uint64_t byte_size = 0;
    CHECK_OK(hurray_buffer_list_get(list, b, &buffer));
    CHECK_OK(hurray_buffer_data_ptr(buffer, &data));
    CHECK_OK(hurray_buffer_byte_size(buffer, &byte_size));
    CHECK((uintptr_t)data % 64 == 0);
    int same = 1;
    for (uint64_t i = 0; i < byte_size; ++i) {
      same = same && ((const uint8_t*)data)[i] == PatternByte(tensor, b, i);
    }
    CHECK(same);
  }
  CHECK_OK(hurray_buffer_list_destroy(&list));
  CHECK_OK(hurray_descriptor_destroy(descriptor));
}

static void TestFileRoundTripsMultiBufferTensors(void) {
  char directory[] = "/tmp/hurray-c-abi-XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char path[64];
  snprintf(path, sizeof path, "%s/model.hrry", directory);
  HurrayDescriptor* descriptors[] = {PerChannelDescriptor(), CooDescriptor(),
                                     BlockPagedDescriptor()};
  CallLog log = {0, NULL, NULL};

  HurrayWriter* writer = NULL;
  CHECK_OK(hurray_writer_open(path, &writer));
  /* Seed 000: a list whose count disagrees with the descriptor is refused. */
  HurrayBufferList* short_list = PatternList(descriptors[0], 0, 2, &log);
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT,
               hurray_writer_write_tensor(writer, "model/short", descriptors[0], short_list));
  CHECK_MESSAGE_MENTIONS("buffer table has 3");
  CHECK_OK(hurray_buffer_list_destroy(&short_list));
  for (uint64_t t = 0; t < 3; ++t) {
    uint64_t count = 0;
    CHECK_OK(hurray_descriptor_buffer_count(descriptors[t], &count));
    HurrayBufferList* list = PatternList(descriptors[t], t, count, &log);
    CHECK_OK(hurray_writer_write_tensor(writer, kFileTensorNames[t], descriptors[t], list));
    CHECK_OK(hurray_buffer_list_destroy(&list));
  }
  CHECK(fopen(path, "rb") == NULL); /* Not there before finish. */
  CHECK_OK(hurray_writer_finish(writer));
  CHECK_STATUS(HURRAY_ERR_FAILED_PRECONDITION, hurray_writer_finish(writer));
  CHECK_OK(hurray_writer_destroy(&writer));
  CHECK(writer == NULL);
  CHECK_OK(hurray_writer_destroy(&writer));

  HurrayReader* reader = NULL;
  CHECK_OK(hurray_reader_open(path, &reader));
  uint64_t count = 0;
  CHECK_OK(hurray_reader_tensor_count(reader, &count));
  CHECK(count == 3);
  for (uint64_t t = 0; t < count; ++t) CheckReadTensor(reader, t);
  HurrayDescriptor* descriptor = NULL;
  HurrayBufferList* list = NULL;
  CHECK_STATUS(HURRAY_ERR_OUT_OF_RANGE, hurray_reader_read_tensor(reader, 3, &descriptor, &list));
  CHECK(descriptor == NULL && list == NULL);
  CHECK_OK(hurray_reader_destroy(&reader));
  CHECK(reader == NULL);
  CHECK_OK(hurray_reader_destroy(&reader));

  for (int t = 0; t < 3; ++t) CHECK_OK(hurray_descriptor_destroy(descriptors[t]));
  CHECK(unlink(path) == 0);
  CHECK(rmdir(directory) == 0);
}

static void TestUnfinishedWriterLeavesNoFileAndReaderRefusesGarbage(void) {
  char directory[] = "/tmp/hurray-c-abi-XXXXXX";
  CHECK(mkdtemp(directory) != NULL);
  char path[64];
  snprintf(path, sizeof path, "%s/model.hrry", directory);
  HurrayWriter* writer = NULL;
  CHECK_OK(hurray_writer_open(path, &writer));
  CHECK_OK(hurray_writer_destroy(&writer));
  HurrayReader* reader = NULL;
  CHECK_STATUS(HURRAY_ERR_NOT_FOUND, hurray_reader_open(path, &reader));
  CHECK(reader == NULL);

  FILE* file = fopen(path, "wb");
  CHECK(file != NULL);
  CHECK(fputs("not a hurray file, but long enough to hold a header of sixty-four bytes", file) >=
        0);
  CHECK(fclose(file) == 0);
  CHECK_STATUS(HURRAY_ERR_INVALID_ARGUMENT, hurray_reader_open(path, &reader));
  CHECK_MESSAGE_MENTIONS("magic");
  CHECK(unlink(path) == 0);
  CHECK(rmdir(directory) == 0);
}

int main(void) {
  TestAbiVersionMatchesHeader();
  TestStatusNames();
  TestSetLastErrorIsTheSharedChannel();
  TestBufferFromAlignedPointerReleasesOnce();
  TestBufferFromPtrRefusesBadArguments();
  TestEmptyBufferAcceptsAlignmentOneAndNullData();
  TestBufferListOwnsItsBuffers();
  TestDescriptorRoundTripAndShapeQuery();
  TestScalarDescriptor();
  TestNewDenseRefusesBadArguments();
  TestDecodeRefusesGarbage();
  TestCheckBufferList();
  TestTensorContextCarriesDescriptorAndReleasesOwnerOnce();
  TestTensorContextRefusesInvalidDescriptor();
  TestTensorContextWithoutDescriptor();
  TestProducerSyncedHandoff();
  TestEventHandoffPassesOwnershipToBuffer();
  TestEventReleasedWithItsList();
  TestConsumerStreamHandoff();
  TestNullPointersAreRefused();
#ifndef NDEBUG
  TestDebugBuildDetectsDoubleDestroy();
#else
  printf("NDEBUG build: double-destroy detection not tested\n");
#endif
  TestLastErrorMessageIsPerThread();
  TestConsumerReadsCapsule();
  TestFileRoundTripsMultiBufferTensors();
  TestUnfinishedWriterLeavesNoFileAndReaderRefusesGarbage();
  printf("c_abi_test: all %d checks passed\n", checks_passed);
  return EXIT_SUCCESS;
}
