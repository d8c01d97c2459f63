// hurray_test_agent: the separate processes of the integration tests. Each mode is one
// role; errors go to stderr with exit status 1, results to stdout, one line each
// (line-buffered so a test can wait for them).
//
//   produce SOCKET NAME KIND SEED       publish a `dense`, `quantized` or `csr` tensor with
//                                       the contents of SEED; prints "version V"
//   produce-set SOCKET PREFIX COUNT SEED
//                                       publish PREFIX000.. (256-byte tensors, SEED + i);
//                                       prints "published COUNT"
//   consume SOCKET NAME SEED [VERSION]  acquire (waiting up to 10 s), check every byte and
//                                       that every buffer lies in a read-only shared
//                                       mapping of a /dev/shm segment; prints
//                                       "OK KIND vVERSION"
//   hold SOCKET NAME...                 acquire each, print "holding V...", sleep until killed
//   wait-for SOCKET NAME                print "waiting", then acquire NAME waiting up to 60 s;
//                                       prints "acquired V"
//   allocate-and-hang SOCKET BYTES      allocate and write BYTES, print "allocated",
//                                       sleep until killed
//   write-into SOCKET NAME              acquire, print "writing", write one byte into
//                                       buffer 0: the kernel must kill it (SIGSEGV)
//   import-and-pause SOCKET FILE PREFIX
//                                       ImportTensorFile of FILE under PREFIX whose progress
//                                       callback, at its first call (the tensors allocated,
//                                       their bytes being read), prints "reading" and sleeps
//                                       until killed: nothing is ever published
//   stress SOCKET ID CYCLES             CYCLES rounds of allocate, write, publish, acquire,
//                                       check, release on names stress/agent-ID/t0..t3;
//                                       prints "OK CYCLES"
#include <unistd.h>

#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/client.h"
#include "hurray/file_transfer.h"
#include "test_tensors.h"

namespace hurray::integration {
namespace {

constexpr auto kAcquireWait = std::chrono::seconds(10);

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "hurray_test_agent: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Check(Result<T> result, std::string_view call) {
  if (!result) Fail(std::string(call) + ": " + result.error().ToString());
  return std::move(*result);
}

void Check(const Status& status, std::string_view call) {
  if (!status) Fail(std::string(call) + ": " + status.error().ToString());
}

std::uint64_t ParseNumber(std::string_view text, std::string_view what) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    Fail(std::string(what) + " \"" + std::string(text) + "\" is not a number");
  }
  return value;
}

[[noreturn]] void SleepUntilKilled() {
  while (true) ::pause();
}

std::unique_ptr<Client> ConnectTo(const std::string& socket, std::string_view role) {
  return Check(Client::Connect({.socket_path = socket,
                                .client_name = "hurray_test_agent " + std::string(role)}),
               "Connect");
}

// Empty when [data, data + size) lies inside one mapping of this process that is a shared,
// read-only mapping of a /dev/shm file ("r--s"): the consumer reads the producer's memory
// itself, not a copy. Otherwise says what it found.
std::string CheckReadOnlySharedMapping(const void* data, std::size_t size) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + size;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // "start-end perms offset dev inode   path"
    std::istringstream fields(line);
    std::string range, perms, offset, device, inode, path;
    fields >> range >> perms >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);
    const std::size_t dash = range.find('-');
    const std::uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const std::uintptr_t stop = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (begin < start || begin >= stop) continue;
    if (end > stop) return "buffer runs past its mapping: " + line;
    if (perms != "r--s") return "buffer is not in a read-only shared mapping: " + line;
    if (!path.starts_with("/dev/shm/")) return "buffer is not in a /dev/shm mapping: " + line;
    return {};
  }
  return "buffer address is in no mapping of /proc/self/maps";
}

int Produce(const std::string& socket, const std::string& name, std::string_view kind_name,
            std::uint64_t seed) {
  const auto kind = TensorKindFromName(kind_name);
  if (!kind) Fail("unknown kind \"" + std::string(kind_name) + "\"");
  auto client = ConnectTo(socket, "produce");
  auto tensor = Check(client->Allocate(MakeTestDescriptor(*kind)), "Allocate");
  for (std::size_t i = 0; i < tensor.buffer_count(); ++i) FillBuffer(tensor.buffer(i), seed, i);
  const PublishedTensor published = Check(tensor.Publish(name), "Publish");
  std::printf("version %llu\n", static_cast<unsigned long long>(published.version));
  return 0;
}

int ProduceSet(const std::string& socket, const std::string& prefix, std::uint64_t count,
               std::uint64_t seed) {
  auto client = ConnectTo(socket, "produce-set");
  for (std::uint64_t i = 0; i < count; ++i) {
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "%03llu", static_cast<unsigned long long>(i));
    auto tensor = Check(client->Allocate(MakeByteTensor(256)), "Allocate");
    FillBuffer(tensor.buffer(0), seed + i, 0);
    (void)Check(tensor.Publish(prefix + suffix), "Publish");
  }
  std::printf("published %llu\n", static_cast<unsigned long long>(count));
  return 0;
}

int Consume(const std::string& socket, const std::string& name, std::uint64_t seed,
            std::uint64_t version) {
  auto client = ConnectTo(socket, "consume");
  auto view = Check(client->Acquire(name, {.version = version, .wait = kAcquireWait}), "Acquire");
  if (view.name() != name) Fail("acquired \"" + view.name() + "\", asked for " + name);
  if (version != 0 && view.version() != version) {
    Fail("acquired version " + std::to_string(view.version()) + ", asked for " +
         std::to_string(version));
  }
  if (view.buffer_count() != view.descriptor().buffers().size()) {
    Fail(std::to_string(view.buffer_count()) + " buffers for a buffer table of " +
         std::to_string(view.descriptor().buffers().size()));
  }
  for (std::size_t i = 0; i < view.buffer_count(); ++i) {
    const std::span<const std::byte> buffer = view.buffer(i);
    if (buffer.size() != view.descriptor().buffers()[i].byte_size()) {
      Fail("buffer " + std::to_string(i) + " has " + std::to_string(buffer.size()) +
           " bytes; the descriptor says " +
           std::to_string(view.descriptor().buffers()[i].byte_size()));
    }
    if (const std::string wrong = CheckBuffer(buffer, seed, i); !wrong.empty()) Fail(wrong);
    if (buffer.empty()) continue;
    if (const std::string wrong = CheckReadOnlySharedMapping(buffer.data(), buffer.size());
        !wrong.empty()) {
      Fail("buffer " + std::to_string(i) + ": " + wrong);
    }
  }
  const auto kind = KindOf(view.descriptor());
  std::printf("OK %s v%llu\n", kind ? std::string(TensorKindName(*kind)).c_str() : "other",
              static_cast<unsigned long long>(view.version()));
  return 0;
}

int Hold(const std::string& socket, const std::vector<std::string>& names) {
  auto client = ConnectTo(socket, "hold");
  std::vector<TensorView> views;
  std::string versions;
  for (const std::string& name : names) {
    views.push_back(Check(client->Acquire(name, {.wait = kAcquireWait}), "Acquire " + name));
    versions += " " + std::to_string(views.back().version());
  }
  std::printf("holding%s\n", versions.c_str());
  std::fflush(stdout);
  SleepUntilKilled();
}

int WaitFor(const std::string& socket, const std::string& name) {
  auto client = ConnectTo(socket, "wait-for");
  std::printf("waiting\n");
  std::fflush(stdout);
  auto view = Check(client->Acquire(name, {.wait = std::chrono::seconds(60)}), "Acquire");
  std::printf("acquired %llu\n", static_cast<unsigned long long>(view.version()));
  return 0;
}

int AllocateAndHang(const std::string& socket, std::uint64_t bytes) {
  auto client = ConnectTo(socket, "allocate-and-hang");
  auto tensor = Check(client->Allocate(MakeByteTensor(bytes)), "Allocate");
  FillBuffer(tensor.buffer(0), 1, 0);
  std::printf("allocated %llu\n", static_cast<unsigned long long>(tensor.allocation_id()));
  std::fflush(stdout);
  SleepUntilKilled();
}

int ImportAndPause(const std::string& socket, const std::string& path, const std::string& prefix) {
  auto client = ConnectTo(socket, "import-and-pause");
  const FileTransferOptions options{
      .prefix = prefix, .pool = {}, .parallelism = 0, .progress = [](std::uint64_t, std::uint64_t) {
        std::printf("reading\n");
        std::fflush(stdout);
        SleepUntilKilled();
      }};
  (void)Check(ImportTensorFile(*client, path, options), "ImportTensorFile");
  Fail("ImportTensorFile returned");
}

int WriteInto(const std::string& socket, const std::string& name) {
  auto client = ConnectTo(socket, "write-into");
  auto view = Check(client->Acquire(name, {.wait = kAcquireWait}), "Acquire");
  if (view.buffer(0).empty()) Fail("buffer 0 is empty");
  std::printf("writing\n");
  std::fflush(stdout);
  // The kernel, not a sanitizer's handler, must have the last word on the fault.
  std::signal(SIGSEGV, SIG_DFL);
  std::signal(SIGBUS, SIG_DFL);
  auto* target = const_cast<volatile std::byte*>(view.buffer(0).data());
  *target = ~*target;
  std::printf("write succeeded\n");
  return 3;
}

int Stress(const std::string& socket, std::uint64_t id, std::uint64_t cycles) {
  constexpr std::uint64_t kNamesPerAgent = 4;
  auto client = ConnectTo(socket, "stress");
  for (std::uint64_t cycle = 0; cycle < cycles; ++cycle) {
    const std::string name =
        "stress/agent-" + std::to_string(id) + "/t" + std::to_string(cycle % kNamesPerAgent);
    const std::uint64_t seed = id * 1'000'000 + cycle;
    const std::uint64_t bytes = 1024 + ((id * 7 + cycle * 13) % 16) * 1024;
    const std::string where = "cycle " + std::to_string(cycle) + " " + name + ": ";
    if (cycle % 10 == 3) {  // Now and then an allocation that is never published.
      auto scratch = Check(client->Allocate(MakeByteTensor(bytes)), where + "Allocate scratch");
      FillBuffer(scratch.buffer(0), seed, 0);
      Check(scratch.Cancel(), where + "Cancel");
    }
    auto tensor = Check(client->Allocate(MakeByteTensor(bytes)), where + "Allocate");
    FillBuffer(tensor.buffer(0), seed, 0);
    const PublishedTensor published = Check(tensor.Publish(name), where + "Publish");
    const std::uint64_t expected_version = cycle / kNamesPerAgent + 1;
    if (published.version != expected_version) {
      Fail(where + "published version " + std::to_string(published.version) + ", expected " +
           std::to_string(expected_version));
    }
    auto view = Check(client->Acquire(name), where + "Acquire");
    if (view.version() != published.version) {
      Fail(where + "acquired version " + std::to_string(view.version()) + ", published " +
           std::to_string(published.version));
    }
    if (view.buffer(0).size() != bytes) Fail(where + "wrong size");
    if (const std::string wrong = CheckBuffer(view.buffer(0), seed, 0); !wrong.empty()) {
      Fail(where + wrong);
    }
    Check(view.Release(), where + "Release");
  }
  std::printf("OK %llu\n", static_cast<unsigned long long>(cycles));
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: hurray_test_agent produce SOCKET NAME KIND SEED\n"
               "       hurray_test_agent produce-set SOCKET PREFIX COUNT SEED\n"
               "       hurray_test_agent consume SOCKET NAME SEED [VERSION]\n"
               "       hurray_test_agent hold SOCKET NAME...\n"
               "       hurray_test_agent wait-for SOCKET NAME\n"
               "       hurray_test_agent allocate-and-hang SOCKET BYTES\n"
               "       hurray_test_agent write-into SOCKET NAME\n"
               "       hurray_test_agent import-and-pause SOCKET FILE PREFIX\n"
               "       hurray_test_agent stress SOCKET ID CYCLES\n");
  return 2;
}

int Main(const std::vector<std::string>& args) {
  if (args.size() < 3) return Usage();
  const std::string& mode = args[1];
  const std::string& socket = args[2];
  if (mode == "produce" && args.size() == 6) {
    return Produce(socket, args[3], args[4], ParseNumber(args[5], "SEED"));
  }
  if (mode == "produce-set" && args.size() == 6) {
    return ProduceSet(socket, args[3], ParseNumber(args[4], "COUNT"), ParseNumber(args[5], "SEED"));
  }
  if (mode == "consume" && (args.size() == 5 || args.size() == 6)) {
    return Consume(socket, args[3], ParseNumber(args[4], "SEED"),
                   args.size() == 6 ? ParseNumber(args[5], "VERSION") : 0);
  }
  if (mode == "hold" && args.size() >= 4) {
    return Hold(socket, std::vector<std::string>(args.begin() + 3, args.end()));
  }
  if (mode == "wait-for" && args.size() == 4) return WaitFor(socket, args[3]);
  if (mode == "allocate-and-hang" && args.size() == 4) {
    return AllocateAndHang(socket, ParseNumber(args[3], "BYTES"));
  }
  if (mode == "write-into" && args.size() == 4) return WriteInto(socket, args[3]);
  if (mode == "import-and-pause" && args.size() == 5) {
    return ImportAndPause(socket, args[3], args[4]);
  }
  if (mode == "stress" && args.size() == 5) {
    return Stress(socket, ParseNumber(args[3], "ID"), ParseNumber(args[4], "CYCLES"));
  }
  return Usage();
}

}  // namespace
}  // namespace hurray::integration

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return hurray::integration::Main(std::vector<std::string>(argv, argv + argc));
}
