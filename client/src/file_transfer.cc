#include "hurray/file_transfer.h"

#include <fmt/format.h>

#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/file_writer.h"
#include "hurray/tensor_import.h"

namespace hurray {
namespace {

using Clock = std::chrono::steady_clock;

// The client's allocations: one WritableTensor per tensor of the file, published together
// with one PublishBatch. Dropping the sink cancels every allocation not yet published.
class ClientSink final : public TensorImport::Sink {
 public:
  ClientSink(Client& client, std::string_view pool) : client_(client), pool_(pool) {}

  Result<std::vector<std::span<std::byte>>> Allocate(const std::string& name,
                                                     const TensorDescriptor& descriptor) override {
    HURRAY_ASSIGN_OR_RETURN(WritableTensor allocation, client_.Allocate(descriptor, pool_));
    if (allocation.device().device_tag != DeviceTag::Cpu()) {
      return FailedPreconditionError(fmt::format(
          "pool \"{}\" is not a CPU pool: files are imported into CPU pools only", pool_));
    }
    std::vector<std::span<std::byte>> buffers;
    buffers.reserve(allocation.buffer_count());
    for (std::size_t j = 0; j < allocation.buffer_count(); ++j) {
      buffers.push_back(allocation.buffer(j));
    }
    allocations_.push_back(std::move(allocation));
    names_.push_back(name);
    return buffers;
  }

  Status PublishAll() override {
    HURRAY_RETURN_IF_ERROR(client_.PublishBatch(allocations_, names_));
    return {};
  }

 private:
  Client& client_;
  const std::string_view pool_;
  std::vector<WritableTensor> allocations_;
  std::vector<std::string> names_;
};

FileTransferSummary SummaryOf(std::size_t tensors, std::uint64_t bytes, Clock::time_point start) {
  return {.tensors = tensors,
          .bytes = bytes,
          .elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start)};
}

}  // namespace

Result<FileTransferSummary> ImportTensorFile(Client& client, const std::string& path,
                                             const FileTransferOptions& options) {
  const Clock::time_point start = Clock::now();
  HURRAY_ASSIGN_OR_RETURN(const TensorImport import,
                          TensorImport::Open(path, {.prefix = options.prefix,
                                                    .max_tensors = Client::kMaxBatchPublish}));
  FileReadOptions read_options{.parallelism = options.parallelism};
  if (options.progress) {
    read_options.progress = [&](std::uint64_t done) {
      options.progress(done, import.file().total_bytes());
    };
  }
  ClientSink sink(client, options.pool);
  HURRAY_RETURN_IF_ERROR(import.Run(sink, read_options));
  return SummaryOf(import.names().size(), import.file().total_bytes(), start);
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
