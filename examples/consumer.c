/* A C consumer: acquires a tensor from hurrayd and walks it exactly as the C ABI cookbook
 * walks an in-process tensor — version check, descriptor, buffers, destroy.
 *   build/examples/consumer_c [NAME] */
#include <stdio.h>

#include "hurray_client.h"

static int Fail(const char* what, HurrayStatus status) {
  fprintf(stderr, "consumer_c: %s: %s: %s\n", what, hurray_status_name(status),
          hurray_last_error_message());
  return 1;
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "examples/weights";
  if (hurray_c_abi_version() != HURRAY_C_ABI_VERSION) return Fail("version", HURRAY_ERR_INTERNAL);

  HurrayClient* client = NULL;
  HurrayStatus status = hurray_client_connect(NULL, "example-consumer-c", &client);
  if (status != HURRAY_OK) return Fail("connect", status);

  HurrayBufferList* list = NULL;
  HurrayTensorContext* context = NULL;
  status = hurray_client_acquire(client, name, 0, 10000, &list, &context);
  if (status != HURRAY_OK) return Fail("acquire", status);

  uint32_t abi_version = 0;
  hurray_tensor_context_abi_version(context, &abi_version);
  if (abi_version != HURRAY_C_ABI_VERSION) return Fail("context version", HURRAY_ERR_INTERNAL);

  const uint8_t* bytes = NULL;
  uint64_t length = 0;
  hurray_tensor_context_descriptor(context, &bytes, &length);
  HurrayDescriptor* descriptor = NULL;
  status = hurray_descriptor_decode(bytes, (size_t)length, &descriptor);
  if (status != HURRAY_OK) return Fail("decode", status);

  uint8_t type_tag = 0;
  size_t rank = 0;
  uint64_t dims[64];
  hurray_descriptor_element_type_tag(descriptor, &type_tag);
  hurray_descriptor_shape(descriptor, NULL, &rank); /* Query: BUFFER_TOO_SMALL, true rank. */
  status = hurray_descriptor_shape(descriptor, dims, &rank);
  if (status != HURRAY_OK) return Fail("shape", status);
  printf("acquired %s: element type %u, rank %zu, shape [", name, type_tag, rank);
  for (size_t i = 0; i < rank; ++i) printf(i == 0 ? "%llu" : ", %llu", (unsigned long long)dims[i]);
  printf("]\n");

  status = hurray_descriptor_check_buffer_list(descriptor, list);
  if (status != HURRAY_OK) return Fail("check buffers", status);
  uint64_t count = 0;
  hurray_buffer_list_len(list, &count);
  for (uint64_t i = 0; i < count; ++i) {
    HurrayBuffer* buffer = NULL; /* BORROWED from the list. */
    hurray_buffer_list_get(list, i, &buffer);
    void* data = NULL;
    uint64_t size = 0;
    hurray_buffer_data_ptr(buffer, &data);
    hurray_buffer_byte_size(buffer, &size);
    unsigned long long sum = 0;
    for (uint64_t k = 0; k < size; ++k) sum += ((const unsigned char*)data)[k];
    printf("  buffer %llu: %llu bytes at %p, byte sum %llu\n", (unsigned long long)i,
           (unsigned long long)size, data, sum);
  }

  hurray_descriptor_destroy(descriptor);
  hurray_buffer_list_destroy(&list);
  hurray_tensor_context_destroy(&context); /* owner_release: the lease ends. */
  hurray_client_close(&client);
  return 0;
}
