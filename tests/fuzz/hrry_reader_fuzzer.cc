// libFuzzer target for hurray::FileReader: the input bytes become a file (a memfd, opened
// through /proc/self/fd), which FileReader::Open must either refuse with INVALID_ARGUMENT or
// DATA_LOSS and a message, or accept. An accepted file must keep the reader's promises:
// every buffer lies at an aligned offset inside the file, no two overlap, and ReadBuffers
// into scratch memory either succeeds or reports DATA_LOSS (a checksum mismatch).
// A broken promise prints which one and aborts, which libFuzzer reports as a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hurray/file_reader.h"

namespace hurray {
namespace {

[[noreturn]] void Broken(const char* promise, const std::string& detail) {
  std::fprintf(stderr, "hrry_reader_fuzzer: broken promise: %s\n%s\n", promise, detail.c_str());
  std::abort();
}

// Scratch memory for a file's buffers is bounded by the file itself, so this stays small.
void CheckAccepted(const FileReader& reader) {
  std::vector<std::vector<std::byte>> memory;
  std::vector<FileReader::BufferDestination> destinations;
  for (std::size_t t = 0; t < reader.tensors().size(); ++t) {
    const FileTensorEntry& tensor = reader.tensors()[t];
    if (tensor.buffers.size() != tensor.descriptor.buffers().size()) {
      Broken("one saved buffer per descriptor buffer", tensor.name);
    }
    for (std::size_t b = 0; b < tensor.buffers.size(); ++b) {
      const FileBufferEntry& buffer = tensor.buffers[b];
      if (buffer.file_offset % kFileBufferAlignment != 0 ||
          buffer.file_offset + buffer.byte_size > reader.file_size()) {
        Broken("buffers lie aligned inside the file", tensor.name);
      }
      memory.emplace_back(buffer.byte_size);
    }
  }
  std::size_t next = 0;
  for (std::size_t t = 0; t < reader.tensors().size(); ++t) {
    for (std::size_t b = 0; b < reader.tensors()[t].buffers.size(); ++b) {
      destinations.push_back({.tensor = t, .buffer = b, .destination = memory[next++]});
    }
  }
  auto read = reader.ReadBuffers(destinations, {.parallelism = 1});
  if (!read && read.error().code() != StatusCode::kDataLoss) {
    Broken("ReadBuffers of an accepted file succeeds or is DATA_LOSS", read.error().ToString());
  }
}

}  // namespace
}  // namespace hurray

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = ::memfd_create("hrry_reader_fuzzer", MFD_CLOEXEC);
  if (fd < 0) hurray::Broken("memfd_create works", "");
  for (std::size_t written = 0; written < size;) {
    const ssize_t put = ::write(fd, data + written, size - written);
    if (put <= 0) hurray::Broken("the input can be written to the memfd", "");
    written += static_cast<std::size_t>(put);
  }
  auto reader = hurray::FileReader::Open("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  if (reader) {
    hurray::CheckAccepted(*reader);
  } else if ((reader.error().code() != hurray::StatusCode::kInvalidArgument &&
              reader.error().code() != hurray::StatusCode::kDataLoss) ||
             reader.error().message().empty()) {
    hurray::Broken("Open refuses with INVALID_ARGUMENT or DATA_LOSS and a message",
                   reader.error().ToString());
  }
  return 0;
}
