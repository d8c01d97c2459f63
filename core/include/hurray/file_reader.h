// FileReader: reads a .hrry file (docs/file-format.md) — the tensors a FileWriter saved,
// each a name, a descriptor and its buffers in descriptor order.
//
// Open checks the whole layout before returning: the header's magic, version and sizes, the
// index's checksum and encoding, every descriptor (TensorDescriptor::Decode), that each
// tensor's buffer count equals its descriptor's buffer table and each buffer's size equals
// the table's byte_size, that every buffer lies inside the file at a 4096-aligned offset and
// no two overlap, and that names are valid and unique. Errors are INVALID_ARGUMENT (DATA_LOSS
// for a checksum mismatch) naming the path, the tensor and the field. Buffer bytes are checked
// against their checksum as they are read.
//
// Move-only; owns the file descriptor. Const methods are thread-safe (pread only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/export.h"
#include "hurray/file_reads.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

// Where one buffer of a saved tensor lies in the file.
struct FileBufferEntry {
  std::uint64_t file_offset = 0;  // A multiple of kFileBufferAlignment (0 for empty buffers).
  std::uint64_t byte_size = 0;    // Equals the descriptor's byte_size for the buffer.
  std::uint64_t checksum = 0;     // XXH3-64 of the buffer's bytes.
};

// One saved tensor.
struct FileTensorEntry {
  std::string name;
  TensorDescriptor descriptor;
  std::vector<FileBufferEntry> buffers;  // Descriptor order.
};

// Buffers start at multiples of this in the file, so a reader may mmap them.
inline constexpr std::uint64_t kFileBufferAlignment = 4096;

class HURRAY_CXX_EXPORT FileReader {
 public:
  [[nodiscard]] static Result<FileReader> Open(const std::string& path);

  FileReader(FileReader&&) noexcept;
  FileReader& operator=(FileReader&&) noexcept;
  ~FileReader();

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::uint64_t file_size() const { return file_size_; }
  [[nodiscard]] std::span<const FileTensorEntry> tensors() const { return tensors_; }
  // The open file (for mmap of a buffer's range); owned by the reader.
  [[nodiscard]] int fd() const { return fd_; }

  // One buffer's destination: tensor index, buffer index, and memory of exactly the buffer's
  // byte_size.
  struct BufferDestination {
    std::size_t tensor = 0;
    std::size_t buffer = 0;
    std::span<std::byte> destination;
  };
  // Reads the buffers into their destinations (ReadFileRanges: large reads, several in
  // flight) and verifies each one's checksum. OUT_OF_RANGE for an index past the file's
  // tensors or buffers, INVALID_ARGUMENT for a destination of the wrong size (both before
  // anything is read), DATA_LOSS naming tensor and buffer for a checksum mismatch.
  [[nodiscard]] Status ReadBuffers(std::span<const BufferDestination> buffers,
                                   const FileReadOptions& options = {}) const;

 private:
  HURRAY_CXX_HIDDEN FileReader(std::string path, int fd, std::uint64_t file_size,
                               std::vector<FileTensorEntry> tensors);
  std::string path_;
  int fd_ = -1;
  std::uint64_t file_size_ = 0;
  std::vector<FileTensorEntry> tensors_;
};

}  // namespace hurray
