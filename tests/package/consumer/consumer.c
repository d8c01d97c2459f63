/* A consumer of the installed hurray: publishes a small dense tensor through hurrayd, acquires
 * it back and checks every byte. Prints "put/get OK: NAME, N bytes" and exits 0.
 *   consumer SOCKET NAME */
#include <hurray_client.h>
#include <stdio.h>
#include <string.h>

enum { kElements = 1024 };

static int Fail(const char* what, HurrayStatus status) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, hurray_status_name(status),
          hurray_last_error_message());
  return 1;
}

static unsigned char Pattern(uint64_t index) { return (unsigned char)(index * 7 + 3); }

static int Put(HurrayClient* client, const char* name) {
  const uint64_t dims[1] = {kElements};
  HurrayDescriptor* descriptor = NULL;
  HurrayStatus status = hurray_descriptor_new_dense(HURRAY_ELEMENT_UINT8, dims, 1, &descriptor);
  if (status != HURRAY_OK) return Fail("descriptor", status);
  HurrayAllocation* allocation = NULL;
  status = hurray_client_allocate(client, descriptor, NULL, &allocation);
  hurray_descriptor_destroy(descriptor);
  if (status != HURRAY_OK) return Fail("allocate", status);
  void* data = NULL;
  uint64_t size = 0;
  status = hurray_allocation_buffer(allocation, 0, &data, &size);
  if (status != HURRAY_OK) return Fail("buffer", status);
  for (uint64_t i = 0; i < size; ++i) ((unsigned char*)data)[i] = Pattern(i);
  status = hurray_allocation_publish(&allocation, name, NULL);
  if (status != HURRAY_OK) return Fail("publish", status);
  return 0;
}

static int Get(HurrayClient* client, const char* name) {
  HurrayBufferList* list = NULL;
  HurrayTensorContext* context = NULL;
  HurrayStatus status = hurray_client_acquire(client, name, 0, 5000, &list, &context);
  if (status != HURRAY_OK) return Fail("acquire", status);
  HurrayBuffer* buffer = NULL; /* BORROWED from the list. */
  void* data = NULL;
  uint64_t size = 0;
  hurray_buffer_list_get(list, 0, &buffer);
  hurray_buffer_data_ptr(buffer, &data);
  hurray_buffer_byte_size(buffer, &size);
  int result = size == kElements ? 0 : 1;
  for (uint64_t i = 0; result == 0 && i < size; ++i)
    if (((const unsigned char*)data)[i] != Pattern(i)) result = 1;
  if (result != 0) {
    fprintf(stderr, "consumer: %s: %llu bytes, not the ones put\n", name, (unsigned long long)size);
  } else {
    printf("put/get OK: %s, %llu bytes\n", name, (unsigned long long)size);
  }
  hurray_buffer_list_destroy(&list);
  hurray_tensor_context_destroy(&context);
  return result;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: consumer SOCKET NAME\n");
    return 2;
  }
  if (hurray_c_abi_version() != HURRAY_C_ABI_VERSION) return Fail("abi", HURRAY_ERR_INTERNAL);
  HurrayClient* client = NULL;
  HurrayStatus status = hurray_client_connect(argv[1], "package-consumer", &client);
  if (status != HURRAY_OK) return Fail("connect", status);
  int result = Put(client, argv[2]);
  if (result == 0) result = Get(client, argv[2]);
  hurray_client_close(&client);
  return result;
}
