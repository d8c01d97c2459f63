// Bulk file reads straight into their destination: the bytes of many tensors, read from a
// file into memory the caller placed (a pool mapping), with no intermediate buffer, in large
// reads with several in flight.
//
// Thread-safe: ReadFileRanges may run on several threads at once (each call has its own
// workers); the progress callback runs on the calling thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stop_token>
#include <string_view>

#include "hurray/error.h"
#include "hurray/export.h"

namespace hurray {

// One range of a file and where its bytes go; destination.size() bytes are read.
struct FileRange {
  std::uint64_t file_offset = 0;
  std::span<std::byte> destination;
};

struct FileReadOptions {
  // Reads in flight at once (worker threads); 0: one per online CPU, at most 8.
  std::uint32_t parallelism = 0;
  // The largest single read, in bytes; ranges above it are split.
  std::uint64_t chunk_bytes = std::uint64_t{8} << 20;
  // Called on the calling thread with the bytes read so far, at least every ~100 ms and
  // once at the end; may be empty.
  std::function<void(std::uint64_t bytes_done)> progress;
  // A stop requested through it ends the read between chunks: CANCELLED naming the file.
  std::stop_token stop;
};

// Reads every range into its destination. `path` names the file in errors. The file's
// offset is not used (pread), so the descriptor may be shared. Short reads and EINTR are
// retried; a read past the end is DATA_LOSS naming the offset ("unexpected end of file at
// byte 4096"), an OS error names the call and errno's text. On error, destinations hold
// whatever was read: the caller discards them.
[[nodiscard]] HURRAY_CXX_EXPORT Status ReadFileRanges(int fd, std::string_view path,
                                                      std::span<const FileRange> ranges,
                                                      const FileReadOptions& options = {});

}  // namespace hurray
