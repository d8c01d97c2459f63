/* hurray_test_c_agent: a consumer written in C, against libhurray-client.so
 * (hurray_client.h).
 *
 *   hurray_test_c_agent SOCKET NAME SEED
 *
 * Acquires NAME (waiting up to 10 s), checks the context's ABI version, decodes the
 * descriptor, checks the delivered buffer list against it (hurray_descriptor_check_buffer_list)
 * and every byte of every buffer against test_pattern.h, then releases the tensor by
 * destroying the list and the context. Prints "OK buffers=N"; on any failure prints what
 * went wrong to stderr and exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include "hurray_client.h"
#include "test_pattern.h"

static int Fail(const char* what, HurrayStatus status) {
  fprintf(stderr, "hurray_test_c_agent: %s: %s: %s\n", what, hurray_status_name(status),
          hurray_last_error_message());
  return 1;
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
  status = hurray_descriptor_decode(bytes, length, &descriptor);
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

  hurray_descriptor_destroy(&descriptor);
  hurray_buffer_list_destroy(&list);
  hurray_tensor_context_destroy(&context); /* owner_release: the lease ends. */
  status = hurray_client_close(&client);
  if (status != HURRAY_OK) return Fail("close", status);
  printf("OK buffers=%llu\n", (unsigned long long)count);
  return 0;
}
