/* hurray_test_c_agent: a consumer written in C, against libhurray-client.so
 * (hurray_client.h).
 *
 *   hurray_test_c_agent SOCKET NAME SEED
 *
 * Acquires NAME (waiting up to 10 s), checks the context's ABI version, decodes the
 * descriptor, checks the delivered buffer list against it (hurray_descriptor_check_buffer_list)
 * and every byte of every buffer against test_pattern.h, then releases the tensor by
 * destroying the list and the context. Before that, as a producer, it checks the device
 * calls on allocations: a "cpu" allocation is on the CPU and refuses an Event publish
 * (HURRAY_ERR_FAILED_PRECONDITION, the allocation staying the caller's); one in "cuda:0" is
 * a CUDA allocation, or, on a daemon without CUDA pools, refused with
 * HURRAY_ERR_FAILED_PRECONDITION. It publishes a set of two allocations at once
 * (hurray_client_publish_batch): a set naming one name twice is refused with every
 * allocation and version left as it was, then the set is published (and deleted again).
 * It streams two versions of one name with hurray_allocation_publish_and_allocate, after a
 * refused publish that leaves everything as it was.
 * Every acquired buffer must say it lives on the CPU. Host memory goes at once through the
 * stream-ordered calls too (hurray_allocation_cancel_after, hurray_client_release_after),
 * and destroy_after refuses a context that hurray_client_acquire did not make.
 * Prints "OK buffers=N"; on any failure prints what went wrong to stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include "hurray_client.h"
#include "test_pattern.h"

static int Fail(const char* what, HurrayStatus status) {
  fprintf(stderr, "hurray_test_c_agent: %s: %s: %s\n", what, hurray_status_name(status),
          hurray_last_error_message());
  return 1;
}

/* Allocates a dense 16-float tensor in `pool`; *out stays null when the daemon refuses. */
static HurrayStatus AllocateSmall(HurrayClient* client, const char* pool, HurrayAllocation** out) {
  const uint64_t dims[1] = {16};
  HurrayDescriptor* descriptor = NULL;
  HurrayStatus status = hurray_descriptor_new_dense(HURRAY_ELEMENT_FLOAT32, dims, 1, &descriptor);
  if (status != HURRAY_OK) return status;
  status = hurray_client_allocate(client, descriptor, pool, out);
  hurray_descriptor_destroy(descriptor);
  return status;
}

/* The device calls of a producer's allocations; 0 when they behave as hurray_client.h says. */
static int CheckAllocationDevices(HurrayClient* client) {
  HurrayAllocation* allocation = NULL;
  HurrayStatus status = AllocateSmall(client, "cpu", &allocation);
  if (status != HURRAY_OK) return Fail("allocate in cpu", status);
  uint8_t tag = 0xFF;
  int32_t ordinal = -1;
  status = hurray_allocation_device(allocation, &tag, &ordinal);
  if (status != HURRAY_OK) return Fail("allocation device", status);
  if (tag != HURRAY_DEVICE_CPU || ordinal != 0) {
    fprintf(stderr, "hurray_test_c_agent: a cpu allocation says device %u ordinal %d\n", tag,
            ordinal);
    return 1;
  }
  uint64_t version = 0;
  status = hurray_allocation_publish_after(&allocation, "c-agent/event", NULL, &version);
  if (status != HURRAY_ERR_FAILED_PRECONDITION || allocation == NULL) {
    return Fail("publish_after of a cpu allocation (expected FAILED_PRECONDITION)", status);
  }
  /* Host memory: cancelled now, whatever the stream. */
  status = hurray_allocation_cancel_after(&allocation, NULL);
  if (status != HURRAY_OK || allocation != NULL) return Fail("cancel_after", status);

  status = AllocateSmall(client, "cuda:0", &allocation);
  if (status == HURRAY_ERR_FAILED_PRECONDITION && allocation == NULL) return 0;
  if (status != HURRAY_OK) return Fail("allocate in cuda:0", status);
  status = hurray_allocation_device(allocation, &tag, &ordinal);
  if (status != HURRAY_OK) return Fail("cuda allocation device", status);
  if (tag != HURRAY_DEVICE_CUDA || ordinal < 0) {
    fprintf(stderr, "hurray_test_c_agent: a cuda:0 allocation says device %u ordinal %d\n", tag,
            ordinal);
    return 1;
  }
  status = hurray_allocation_cancel(&allocation);
  return status == HURRAY_OK ? 0 : Fail("cancel in cuda:0", status);
}

/* hurray_client_publish_batch's all-or-nothing; 0 when it behaves as hurray_client.h says. */
static int CheckPublishBatch(HurrayClient* client) {
  HurrayAllocation* allocations[2] = {NULL, NULL};
  for (int i = 0; i < 2; ++i) {
    HurrayStatus status = AllocateSmall(client, "cpu", &allocations[i]);
    if (status != HURRAY_OK) return Fail("allocate for a batch", status);
  }
  uint64_t versions[2] = {77, 77};
  const char* twice[2] = {"c-agent/batch-a", "c-agent/batch-a"};
  HurrayStatus status = hurray_client_publish_batch(client, allocations, twice, 2, versions);
  if (status != HURRAY_ERR_INVALID_ARGUMENT || allocations[0] == NULL || allocations[1] == NULL ||
      versions[0] != 77 || versions[1] != 77) {
    return Fail("publish_batch naming one name twice (expected INVALID_ARGUMENT, unchanged)",
                status);
  }
  const char* names[2] = {"c-agent/batch-a", "c-agent/batch-b"};
  status = hurray_client_publish_batch(client, allocations, names, 2, versions);
  if (status != HURRAY_OK) return Fail("publish_batch", status);
  if (allocations[0] != NULL || allocations[1] != NULL || versions[0] == 77 || versions[0] == 0 ||
      versions[1] != versions[0]) {
    fprintf(stderr,
            "hurray_test_c_agent: publish_batch left allocations %p %p, versions %llu %llu\n",
            (void*)allocations[0], (void*)allocations[1], (unsigned long long)versions[0],
            (unsigned long long)versions[1]);
    return 1;
  }
  for (int i = 0; i < 2; ++i) {
    uint32_t deleted = 0;
    status = hurray_client_delete(client, names[i], 0, &deleted);
    if (status != HURRAY_OK || deleted != 1) return Fail("delete a batch's tensor", status);
  }
  return 0;
}

/* hurray_allocation_publish_and_allocate: a refused publish leaves the allocation and *next
 * as they were; two versions of one name from one allocate call; 0 when it behaves as
 * hurray_client.h says. */
static int CheckPublishAndAllocate(HurrayClient* client) {
  HurrayAllocation* allocation = NULL;
  HurrayStatus status = AllocateSmall(client, "cpu", &allocation);
  if (status != HURRAY_OK) return Fail("allocate for a stream", status);
  HurrayAllocation* next = (HurrayAllocation*)&next; /* Must stay untouched on a refusal. */
  uint64_t version = 77;
  status = hurray_allocation_publish_and_allocate(&allocation, "bad name", &version, &next);
  if (status != HURRAY_ERR_INVALID_ARGUMENT || allocation == NULL || version != 77 ||
      next != (HurrayAllocation*)&next) {
    return Fail("publish_and_allocate under a bad name (expected INVALID_ARGUMENT, unchanged)",
                status);
  }
  for (uint64_t expected = 1; expected <= 2; ++expected) {
    status = hurray_allocation_publish_and_allocate(&allocation, "c-agent/stream", &version, &next);
    if (status != HURRAY_OK) return Fail("publish_and_allocate", status);
    if (allocation != NULL || next == NULL || version != expected) {
      fprintf(stderr, "hurray_test_c_agent: publish_and_allocate left %p, next %p, version %llu\n",
              (void*)allocation, (void*)next, (unsigned long long)version);
      return 1;
    }
    uint64_t buffers = 0;
    status = hurray_allocation_buffer_count(next, &buffers);
    if (status != HURRAY_OK || buffers != 1) return Fail("the next allocation's buffers", status);
    allocation = next;
    next = NULL;
  }
  status = hurray_allocation_cancel(&allocation);
  if (status != HURRAY_OK) return Fail("cancel the last next allocation", status);
  /* Version 1, superseded and never leased, is gone already: version 2 is deleted. */
  uint32_t deleted = 0;
  status = hurray_client_delete(client, "c-agent/stream", 0, &deleted);
  if (status != HURRAY_OK || deleted != 1) return Fail("delete the stream's version", status);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: hurray_test_c_agent SOCKET NAME SEED\n");
    return 2;
  }
  const char* socket_path = argv[1];
  const char* name = argv[2];
  const uint64_t seed = strtoull(argv[3], NULL, 10);
  if (hurray_c_abi_version() != HURRAY_C_ABI_VERSION) return Fail("abi", HURRAY_ERR_INTERNAL);

  HurrayClient* client = NULL;
  HurrayStatus status = hurray_client_connect(socket_path, "hurray_test_c_agent", &client);
  if (status != HURRAY_OK) return Fail("connect", status);
  if (CheckAllocationDevices(client) != 0) return 1;
  if (CheckPublishBatch(client) != 0) return 1;
  if (CheckPublishAndAllocate(client) != 0) return 1;

  HurrayBufferList* list = NULL;
  HurrayTensorContext* context = NULL;
  status = hurray_client_acquire(client, name, 0, 10000, &list, &context);
  if (status != HURRAY_OK) return Fail("acquire", status);

  uint32_t abi_version = 0;
  status = hurray_tensor_context_abi_version(context, &abi_version);
  if (status != HURRAY_OK) return Fail("context abi version", status);
  if (abi_version != HURRAY_C_ABI_VERSION) return Fail("context abi", HURRAY_ERR_INTERNAL);

  const uint8_t* bytes = NULL;
  uint64_t length = 0;
  status = hurray_tensor_context_descriptor(context, &bytes, &length);
  if (status != HURRAY_OK) return Fail("context descriptor", status);
  HurrayDescriptor* descriptor = NULL;
  status = hurray_descriptor_decode(bytes, (size_t)length, &descriptor);
  if (status != HURRAY_OK) return Fail("decode", status);

  status = hurray_descriptor_check_buffer_list(descriptor, list);
  if (status != HURRAY_OK) return Fail("check buffer list", status);

  uint64_t table_count = 0;
  uint64_t count = 0;
  status = hurray_descriptor_buffer_count(descriptor, &table_count);
  if (status != HURRAY_OK) return Fail("buffer count", status);
  status = hurray_buffer_list_len(list, &count);
  if (status != HURRAY_OK) return Fail("list length", status);
  if (count != table_count || count == 0) {
    fprintf(stderr, "hurray_test_c_agent: %llu buffers for a table of %llu\n",
            (unsigned long long)count, (unsigned long long)table_count);
    return 1;
  }
  for (uint64_t i = 0; i < count; ++i) {
    HurrayBuffer* buffer = NULL; /* BORROWED from the list. */
    void* data = NULL;
    uint64_t size = 0;
    uint64_t declared = 0;
    status = hurray_buffer_list_get(list, i, &buffer);
    if (status != HURRAY_OK) return Fail("get", status);
    status = hurray_buffer_data_ptr(buffer, &data);
    if (status != HURRAY_OK) return Fail("data", status);
    status = hurray_buffer_byte_size(buffer, &size);
    if (status != HURRAY_OK) return Fail("size", status);
    status = hurray_descriptor_buffer_byte_size(descriptor, i, &declared);
    if (status != HURRAY_OK) return Fail("declared size", status);
    uint8_t tag = 0xFF;
    status = hurray_buffer_device_tag(buffer, &tag);
    if (status != HURRAY_OK) return Fail("device tag", status);
    if (tag != HURRAY_DEVICE_CPU) return Fail("a cpu tensor's buffer is not on the CPU", status);
    if (size != declared || (size != 0 && data == NULL)) {
      fprintf(stderr, "hurray_test_c_agent: buffer %llu: %llu bytes at %p, declared %llu\n",
              (unsigned long long)i, (unsigned long long)size, data, (unsigned long long)declared);
      return 1;
    }
    const unsigned char* read = (const unsigned char*)data;
    for (uint64_t k = 0; k < size; ++k) {
      const uint8_t expected = hurray_it_pattern_byte(seed, i, k);
      if (read[k] != expected) {
        fprintf(stderr, "hurray_test_c_agent: buffer %llu byte %llu is %u, expected %u\n",
                (unsigned long long)i, (unsigned long long)k, read[k], expected);
        return 1;
      }
    }
  }

  /* destroy_after takes only the contexts of hurray_client_acquire. */
  HurrayTensorContext* foreign = NULL;
  status = hurray_tensor_context_new(NULL, 0, NULL, NULL, &foreign);
  if (status != HURRAY_OK) return Fail("context_new", status);
  status = hurray_client_release_after(&foreign, NULL);
  if (status != HURRAY_ERR_INVALID_ARGUMENT || foreign == NULL) {
    return Fail("destroy_after of a foreign context (expected INVALID_ARGUMENT, unchanged)",
                status);
  }
  hurray_tensor_context_destroy(&foreign);

  hurray_descriptor_destroy(descriptor);
  hurray_buffer_list_destroy(&list);
  /* Stream order; a host tensor's lease ends now. */
  status = hurray_client_release_after(&context, NULL);
  if (status != HURRAY_OK || context != NULL) return Fail("destroy_after", status);
  status = hurray_client_close(&client);
  if (status != HURRAY_OK) return Fail("close", status);
  printf("OK buffers=%llu\n", (unsigned long long)count);
  return 0;
}
