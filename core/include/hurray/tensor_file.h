// TensorFile: the tensors of a model file on disk — a .safetensors file, a sharded model's
// *.safetensors.index.json (and the shards it names), or a .hrry file — listed with their
// descriptors before any byte is read, then read straight into memory the caller placed (a
// pool's mapping). The one path by which hurrayctl, the C++ and Python clients and the
// daemon's preload bring files into a pool, through TensorImport (tensor_import.h).
//
// Open parses and checks every header (safetensors.h, file_reader.h) and refuses, naming the
// file, the tensor and the field: a broken header, a tensor name listed twice (across shards
// too), a weight_map entry its shard does not hold. Nothing is read but headers.
//
// Move-only; owns the open files. Const methods are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hurray/error.h"
#include "hurray/file_reads.h"
#include "hurray/tensor_descriptor.h"

namespace hurray {

class TensorFile {
 public:
  enum class Format : std::uint8_t { kSafetensors, kSafetensorsIndex, kHrry };

  struct Tensor {
    // As stored in the file (a safetensors key, or a .hrry tensor's name).
    std::string name;
    TensorDescriptor descriptor;
  };

  // The format follows the name: "*.safetensors.index.json" is an index (its shards are
  // opened from the index's directory), "*.hrry" a .hrry file, anything else is tried as
  // .safetensors. NOT_FOUND / PERMISSION_DENIED for a file that cannot be opened (naming
  // it), INVALID_ARGUMENT (or DATA_LOSS) for a broken one.
  [[nodiscard]] static Result<TensorFile> Open(const std::string& path);

  TensorFile(TensorFile&&) noexcept;
  TensorFile& operator=(TensorFile&&) noexcept;
  ~TensorFile();

  [[nodiscard]] Format format() const;
  // In file order (safetensors: by offset; index: shard by shard; .hrry: as written).
  [[nodiscard]] std::span<const Tensor> tensors() const;
  // Bytes of every tensor's buffers together.
  [[nodiscard]] std::uint64_t total_bytes() const;

  // The names the tensors are published under: `prefix` + each one's name, in tensors()
  // order, each checked as a tensor name (tensor_name.h). INVALID_ARGUMENT naming the first
  // tensor whose prefixed name is not one, and the prefix.
  [[nodiscard]] Result<std::vector<std::string>> PrefixedNames(std::string_view prefix) const;

  // Reads every tensor: destinations[i][j] receives buffer j of tensors()[i] and must be
  // exactly its byte_size (INVALID_ARGUMENT naming tensor and buffer before anything is read,
  // as for a destinations list of the wrong length). Large reads, several in flight, no
  // intermediate buffer (ReadFileRanges); .hrry buffers are checked against their checksums
  // (DATA_LOSS naming the tensor). `options.progress` sees bytes done of total_bytes().
  [[nodiscard]] Status Read(std::span<const std::vector<std::span<std::byte>>> destinations,
                            const FileReadOptions& options = {}) const;

 private:
  struct State;
  explicit TensorFile(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace hurray
