#include "hurray/file_transfer.h"

#include <fmt/format.h>

#include <span>
#include <utility>
#include <vector>

#include "hurray/file_writer.h"
#include "hurray/tensor_file.h"

namespace hurray {
namespace {

using Clock = std::chrono::steady_clock;

// The names the file's tensors are published under, each checked, as one PublishBatch can
// carry them.
Result<std::vector<std::string>> BatchNames(const TensorFile& file, const std::string& path,
                                            const std::string& prefix) {
  const std::span<const TensorFile::Tensor> tensors = file.tensors();
  if (tensors.empty())
    return InvalidArgumentError(fmt::format("{}: the file has no tensors", path));
  if (tensors.size() > Client::kMaxBatchPublish) {
    return InvalidArgumentError(fmt::format("{}: {} tensors, above the {} one import publishes",
                                            path, tensors.size(), Client::kMaxBatchPublish));
  }
  auto names = file.PrefixedNames(prefix);
  if (!names) return std::unexpected(names.error().WithContext(path));
  return names;
}

// One allocation per tensor; dropping the result cancels every one.
Result<std::vector<WritableTensor>> AllocateAll(Client& client, const TensorFile& file,
                                                const std::string& pool) {
  std::vector<WritableTensor> allocations;
  allocations.reserve(file.tensors().size());
  for (const TensorFile::Tensor& tensor : file.tensors()) {
    auto allocation = client.Allocate(tensor.descriptor, pool);
    if (!allocation) {
      return std::unexpected(
          allocation.error().WithContext(fmt::format("allocating tensor \"{}\"", tensor.name)));
    }
    if (allocation->device().device_tag != DeviceTag::Cpu()) {
      return FailedPreconditionError(fmt::format(
          "pool \"{}\" is not a CPU pool: files are imported into CPU pools only", pool));
    }
    allocations.push_back(*std::move(allocation));
  }
  return allocations;
}

FileTransferSummary SummaryOf(std::size_t tensors, std::uint64_t bytes, Clock::time_point start) {
  return {.tensors = tensors,
          .bytes = bytes,
          .elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start)};
}

}  // namespace

Result<FileTransferSummary> ImportTensorFile(Client& client, const std::string& path,
                                             const FileTransferOptions& options) {
  const Clock::time_point start = Clock::now();
  HURRAY_ASSIGN_OR_RETURN(const TensorFile file, TensorFile::Open(path));
  HURRAY_ASSIGN_OR_RETURN(const std::vector<std::string> names,
                          BatchNames(file, path, options.prefix));
  HURRAY_ASSIGN_OR_RETURN(std::vector<WritableTensor> allocations,
                          AllocateAll(client, file, options.pool));
  std::vector<std::vector<std::span<std::byte>>> destinations(allocations.size());
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    for (std::size_t j = 0; j < allocations[i].buffer_count(); ++j) {
      destinations[i].push_back(allocations[i].buffer(j));
    }
  }
  FileReadOptions read_options{.parallelism = options.parallelism};
  if (options.progress) {
    read_options.progress = [&](std::uint64_t done) { options.progress(done, file.total_bytes()); };
  }
  HURRAY_RETURN_IF_ERROR(file.Read(destinations, read_options));
  HURRAY_RETURN_IF_ERROR(client.PublishBatch(allocations, names));
  return SummaryOf(names.size(), file.total_bytes(), start);
}

Result<FileTransferSummary> SaveTensors(Client& client, std::string_view prefix,
                                        const std::string& path,
                                        const FileTransferOptions& options) {
  const Clock::time_point start = Clock::now();
  HURRAY_ASSIGN_OR_RETURN(TensorViewBatch views, client.BatchAcquire({}, prefix));
  if (views.empty()) {
    return NotFoundError(fmt::format("no tensor is published under prefix \"{}\"", prefix));
  }
  std::uint64_t total = 0;
  for (const TensorView& view : views) {
    if (view.device().device_tag != DeviceTag::Cpu()) {
      return FailedPreconditionError(fmt::format(
          "tensor \"{}\" lives in a CUDA pool: only CPU tensors are saved", view.name()));
    }
    for (const BufferHandle& buffer : view.descriptor().buffers()) total += buffer.byte_size();
  }
  HURRAY_ASSIGN_OR_RETURN(FileWriter writer, FileWriter::Create(path));
  std::vector<std::span<const std::byte>> buffers;
  for (const TensorView& view : views) {
    buffers.clear();
    for (std::size_t j = 0; j < view.buffer_count(); ++j) buffers.push_back(view.buffer(j));
    HURRAY_RETURN_IF_ERROR(writer.WriteTensor(view.name(), view.descriptor(), buffers));
    if (options.progress) options.progress(writer.data_bytes(), total);
  }
  HURRAY_RETURN_IF_ERROR(writer.Finish());
  return SummaryOf(views.size(), total, start);
}

}  // namespace hurray
