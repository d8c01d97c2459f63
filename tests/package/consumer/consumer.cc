// A consumer of the installed hurray through the C++ client (libhurray-client++.so), as
// consumer.c is through the C client: publishes a small dense tensor through hurrayd,
// acquires it back and checks every byte and the descriptor. Prints
// "C++ put/get OK: NAME, N bytes" and exits 0.
//   consumer_cxx SOCKET NAME
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/tensor_descriptor.h"

namespace {

constexpr std::uint64_t kElements = 1024;

int Fail(const char* what, const hurray::Error& error) {
  std::fprintf(stderr, "consumer_cxx: %s: %s\n", what, error.ToString().c_str());
  return 1;
}

std::byte Pattern(std::size_t index) { return static_cast<std::byte>(index * 7 + 3); }

int Put(hurray::Client& client, const std::string& name) {
  auto descriptor = hurray::TensorDescriptor::Dense(hurray::ElementType::kUint8, {kElements});
  if (!descriptor) return Fail("descriptor", descriptor.error());
  auto tensor = client.Allocate(*descriptor);
  if (!tensor) return Fail("allocate", tensor.error());
  std::span<std::byte> data = tensor->buffer(0);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = Pattern(i);
  auto published = tensor->Publish(name);
  if (!published) return Fail("publish", published.error());
  return 0;
}

int Get(hurray::Client& client, const std::string& name) {
  auto view = client.Acquire(name, {.wait = std::chrono::milliseconds(5000)});
  if (!view) return Fail("acquire", view.error());
  if (view->descriptor().element_type() != hurray::ElementType::kUint8 ||
      view->descriptor().ElementCount() != kElements) {
    std::fprintf(stderr, "consumer_cxx: %s: another descriptor than the one put:\n%s", name.c_str(),
                 view->descriptor().ToString().c_str());
    return 1;
  }
  std::span<const std::byte> data = view->buffer(0);
  bool same = data.size() == kElements;
  for (std::size_t i = 0; same && i < data.size(); ++i) same = data[i] == Pattern(i);
  if (!same) {
    std::fprintf(stderr, "consumer_cxx: %s: %zu bytes, not the ones put\n", name.c_str(),
                 data.size());
    return 1;
  }
  if (auto released = view->Release(); !released) return Fail("release", released.error());
  std::printf("C++ put/get OK: %s, %zu bytes\n", name.c_str(), data.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer_cxx SOCKET NAME\n");
    return 2;
  }
  auto client =
      hurray::Client::Connect({.socket_path = argv[1], .client_name = "package-consumer"});
  if (!client) return Fail("connect", client.error());
  const std::string name = argv[2];
  int result = Put(**client, name);
  if (result == 0) result = Get(**client, name);
  return result;
}
