// Model files in and out of the daemon's pools: import a .safetensors model (one file, or a
// sharded one through its index) or a .hrry file straight into a pool, published all at
// once; save tensors to a .hrry file.
//
//   auto client = hurray::Client::Connect().value();
//   hurray::ImportTensorFile(*client, "model.safetensors", {.prefix = "llama/"}).value();
//   // every tensor of the file is now published under llama/<its name>, all at once
//
// Thread-safe as Client is; `progress` runs on the calling thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/export.h"

namespace hurray {

struct FileTransferOptions {
  // Import: prepended to each tensor's name in the file; the result must be a tensor name
  // ("namespace/name"). Save: ignored (the file keeps full names).
  std::string prefix;
  // Import: the pool to allocate in; empty: the daemon's default ("cpu"). CPU pools only.
  std::string pool;
  // Import: reads in flight at once; 0: one per online CPU, at most 8.
  std::uint32_t parallelism = 0;
  // Called on the calling thread with the bytes done and the total, at least every ~100 ms
  // while bytes move, and once at the end.
  std::function<void(std::uint64_t bytes_done, std::uint64_t bytes_total)> progress;
};

// What an import or save did.
struct FileTransferSummary {
  std::size_t tensors = 0;
  std::uint64_t bytes = 0;
  std::chrono::nanoseconds elapsed{0};
};

// Publishes every tensor of the file at `path` (TensorFile::Open: .safetensors,
// *.safetensors.index.json or .hrry) under options.prefix + its name, as one PublishBatch:
// all become visible together, or none. Each tensor gets its own allocation, and its bytes
// are read from the file straight into the pool's mapping (hurray/tensor_import.h, the
// algorithm of the daemon's preload too). Each error names the file: the errors of
// TensorFile::Open (naming tensor and field), INVALID_ARGUMENT naming a tensor whose
// prefixed name is not a valid tensor name (checked before anything is allocated), a file
// of no tensors or of more than Client::kMaxBatchPublish tensors, FAILED_PRECONDITION for a
// pool that is not a CPU pool, the errors of Allocate (naming the tensor), of the read and
// of PublishBatch. On any error nothing is published and nothing stays allocated; the same
// holds when the importing process dies at any instant (its session's allocations are
// freed).
[[nodiscard]] HURRAY_CXX_EXPORT Result<FileTransferSummary> ImportTensorFile(
    Client& client, const std::string& path, const FileTransferOptions& options = {});

// Writes every tensor published under `prefix` (their latest versions, leased together with
// one BatchAcquire, so the file holds one consistent set) to a .hrry file at `path`, under
// their full names, buffers byte for byte. NOT_FOUND when nothing is published under the
// prefix, FAILED_PRECONDITION for a tensor of a CUDA pool, the errors of FileWriter (the
// file never appears half-written).
[[nodiscard]] HURRAY_CXX_EXPORT Result<FileTransferSummary> SaveTensors(
    Client& client, std::string_view prefix, const std::string& path,
    const FileTransferOptions& options = {});

}  // namespace hurray
