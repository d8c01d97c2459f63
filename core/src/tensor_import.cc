#include "hurray/tensor_import.h"

#include <fmt/format.h>

#include <utility>

#include "hurray/buffer_handle.h"

namespace hurray {
namespace {

// `error`, with `path` in front unless its message names the file already (TensorFile's and
// ReadFileRanges' do; a shard's path does not name its index, which is then added).
Error NamingFile(const Error& error, const std::string& path) {
  if (error.message().find(path) != std::string::npos) return error;
  return error.WithContext(path);
}

Status NamingFile(Status status, const std::string& path) {
  if (status) return status;
  return std::unexpected(NamingFile(status.error(), path));
}

// The buffers a sink gave for `tensor` against its descriptor: a wrong count or size is the
// sink's bug, found before a byte is read.
Status CheckBuffers(const std::string& path, const TensorFile::Tensor& tensor,
                    std::span<const std::span<std::byte>> buffers) {
  const std::vector<BufferHandle>& table = tensor.descriptor.buffers();
  if (buffers.size() != table.size()) {
    return InternalError(fmt::format(R"({}: tensor "{}": {} buffers allocated for the {} of its )"
                                     "descriptor",
                                     path, tensor.name, buffers.size(), table.size()));
  }
  for (std::size_t j = 0; j < table.size(); ++j) {
    if (buffers[j].size() != table[j].byte_size()) {
      return InternalError(
          fmt::format(R"({}: tensor "{}" buffer {}: {} bytes allocated for its {} bytes)", path,
                      tensor.name, j, buffers[j].size(), table[j].byte_size()));
    }
  }
  return {};
}

}  // namespace

TensorImport::TensorImport(std::string path, TensorFile file, std::vector<std::string> names)
    : path_(std::move(path)), file_(std::move(file)), names_(std::move(names)) {}

Result<TensorImport> TensorImport::Open(const std::string& path, const Options& options) {
  auto file = TensorFile::Open(path);
  if (!file) return std::unexpected(NamingFile(file.error(), path));
  const std::size_t count = file->tensors().size();
  if (count == 0) return InvalidArgumentError(fmt::format("{}: the file has no tensors", path));
  if (options.max_tensors != 0 && count > options.max_tensors) {
    return InvalidArgumentError(fmt::format("{}: {} tensors, above the {} one import publishes",
                                            path, count, options.max_tensors));
  }
  auto names = file->PrefixedNames(options.prefix);
  if (!names) return std::unexpected(names.error().WithContext(path));
  return TensorImport(path, *std::move(file), *std::move(names));
}

Status TensorImport::Run(Sink& sink, const FileReadOptions& options) const {
  const std::span<const TensorFile::Tensor> tensors = file_.tensors();
  std::vector<std::vector<std::span<std::byte>>> destinations;
  destinations.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    auto buffers = sink.Allocate(names_[i], tensors[i].descriptor);
    if (!buffers) {
      return std::unexpected(buffers.error().WithContext(
          fmt::format(R"({}: allocating tensor "{}")", path_, tensors[i].name)));
    }
    HURRAY_RETURN_IF_ERROR(CheckBuffers(path_, tensors[i], *buffers));
    destinations.push_back(*std::move(buffers));
  }
  HURRAY_RETURN_IF_ERROR(NamingFile(file_.Read(destinations, options), path_));
  if (options.stop.stop_requested()) {
    return CancelledError(fmt::format("{}: stopped before publishing", path_));
  }
  // The sink may unmap the buffers once PublishAll begins: nothing points into them after.
  destinations.clear();
  return NamingFile(sink.PublishAll(), path_);
}

}  // namespace hurray
