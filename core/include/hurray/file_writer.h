// FileWriter: writes tensors to a .hrry file (docs/file-format.md) — each a name, a
// descriptor and every buffer of its buffer table, in descriptor order, at 4096-aligned
// offsets, each with its checksum.
//
// The file appears whole or not at all: Create writes to a temporary file beside `path`
// (mode 0644 less the umask), Finish writes the index, syncs and renames it over `path`;
// a writer destroyed before Finish removes its temporary file.
//
// Move-only; not thread-safe (one thread at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/export.h"
#include "hurray/file_reader.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

class HURRAY_CXX_EXPORT FileWriter {
 public:
  [[nodiscard]] static Result<FileWriter> Create(const std::string& path);

  FileWriter(FileWriter&&) noexcept;
  FileWriter& operator=(FileWriter&&) noexcept;
  ~FileWriter();

  // Appends a tensor: `buffers` must hold exactly one span per entry of the descriptor's
  // buffer table, in table order, each of the table's byte_size (INVALID_ARGUMENT naming the
  // buffer otherwise, seed 000's rule); `name` must be non-empty, at most 4096 bytes and not
  // already written (INVALID_ARGUMENT / ALREADY_EXISTS). Nothing is written on error.
  [[nodiscard]] Status WriteTensor(std::string_view name, const TensorDescriptor& descriptor,
                                   std::span<const std::span<const std::byte>> buffers);

  // Tensors written so far, and bytes of buffer data.
  [[nodiscard]] std::size_t tensor_count() const;
  [[nodiscard]] std::uint64_t data_bytes() const;

  // Writes the index and header, fsyncs, renames the file into place and fsyncs its
  // directory. The writer is finished afterwards (FAILED_PRECONDITION on any later call).
  [[nodiscard]] Status Finish();

 private:
  struct State;
  HURRAY_CXX_HIDDEN explicit FileWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace hurray
