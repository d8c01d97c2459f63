// hurray_fault_agent: the client side of the fault-injection tests, a separate process.
// Errors go to stderr with exit status 1, results to stdout, one line each.
//
//   acquire-limited SOCKET NAME SEED
//       connects, then lowers its own address-space limit (RLIMIT_AS, soft) to what it
//       uses now plus 1 MiB, so that mapping the tensor's segment fails, and acquires NAME:
//       prints "refused CODE: MESSAGE" for the error it gets (or "acquired" if none). Then
//       waits for a line on stdin, restores the limit, acquires NAME again, checks every
//       byte against SEED and prints "OK", and sleeps until killed.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "hurray/client.h"
#include "test_tensors.h"

namespace hurray::fault {
namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "hurray_fault_agent: %s\n", what.c_str());
  std::exit(1);
}

// This process's address-space size in bytes (VmSize of /proc/self/status).
std::uint64_t AddressSpaceBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      std::uint64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(4096, '\n');
  }
  Fail("no VmSize in /proc/self/status");
}

int AcquireLimited(const std::string& socket, const std::string& name, std::uint64_t seed) {
  auto client = Client::Connect({.socket_path = socket, .client_name = "fault acquire-limited"});
  if (!client) Fail("Connect: " + client.error().ToString());
  rlimit original{};
  if (::getrlimit(RLIMIT_AS, &original) != 0) Fail("getrlimit failed");
  rlimit limited = original;
  limited.rlim_cur = AddressSpaceBytes() + (std::uint64_t{1} << 20);
  if (::setrlimit(RLIMIT_AS, &limited) != 0) Fail("setrlimit failed");
  auto refused = (*client)->Acquire(name);
  if (::setrlimit(RLIMIT_AS, &original) != 0) Fail("setrlimit (restore) failed");
  if (refused) {
    std::printf("acquired\n");
  } else {
    std::printf("refused %s: %s\n", std::string(StatusCodeName(refused.error().code())).c_str(),
                refused.error().message().c_str());
  }
  std::string go;
  std::getline(std::cin, go);
  auto view = (*client)->Acquire(name);
  if (!view) Fail("Acquire after restoring the limit: " + view.error().ToString());
  if (const std::string wrong = integration::CheckBuffer(view->buffer(0), seed, 0);
      !wrong.empty()) {
    Fail(wrong);
  }
  std::printf("OK\n");
  while (true) ::pause();
}

}  // namespace
}  // namespace hurray::fault

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 5 && std::string(argv[1]) == "acquire-limited") {
    return hurray::fault::AcquireLimited(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10));
  }
  std::fprintf(stderr, "usage: hurray_fault_agent acquire-limited SOCKET NAME SEED\n");
  return 2;
}
