// Acquires a tensor from hurrayd (waiting up to 10 s for it), and reads it in place: the
// spans point into the producer's memory, mapped read-only.
//   build/examples/consumer [NAME]
#include <cstdio>

#include "hurray/client.h"

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "examples/weights";
  auto client = hurray::Client::Connect({.socket_path = "", .client_name = "example-consumer"});
  if (!client) {
    std::fprintf(stderr, "consumer: %s\n", client.error().ToString().c_str());
    return 1;
  }
  auto view = (*client)->Acquire(name, {.version = 0, .wait = std::chrono::seconds(10)});
  if (!view) {
    std::fprintf(stderr, "consumer: %s\n", view.error().ToString().c_str());
    return 1;
  }
  std::printf("acquired %s version %llu (lease %llu): %s", view->name().c_str(),
              static_cast<unsigned long long>(view->version()),
              static_cast<unsigned long long>(view->lease_id()),
              view->descriptor().ToString().c_str());
  for (std::size_t i = 0; i < view->buffer_count(); ++i) {
    std::span<const std::byte> bytes = view->buffer(i);
    std::uint64_t sum = 0;
    for (std::byte b : bytes) sum += std::to_integer<std::uint8_t>(b);
    std::printf("  buffer %zu: %zu bytes at %p, byte sum %llu\n", i, bytes.size(),
                static_cast<const void*>(bytes.data()), static_cast<unsigned long long>(sum));
  }
  return 0;  // The view's destructor ends the lease.
}
