// hurrayctl's data commands: put and get (a raw file or a .npy file to and from one tensor),
// import, save and load (whole tensor files, through hurray/file_transfer.h).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hurray/client.h"
#include "hurray/errno_error.h"
#include "hurray/file_transfer.h"
#include "hurray/ipc/unique_fd.h"
#include "hurrayctl/command_support.h"
#include "hurrayctl/hurrayctl_commands.h"
#include "hurrayctl/hurrayctl_format.h"
#include "hurrayctl/npy.h"
#include "hurrayctl/progress_line.h"

namespace hurray::ctl {
namespace {

// Bytes read or written per call, and so between updates of a progress line.
constexpr std::uint64_t kTransferChunkBytes = std::uint64_t{16} << 20;
// put and get draw a progress line for data of at least this size only: smaller ones are done
// before a line could be read.
constexpr std::uint64_t kProgressMinBytes = std::uint64_t{64} << 20;

// A progress line on stderr for `bytes` moved by put or get: drawn when stderr is a terminal,
// `flags` do not say quiet and the data is large.
ProgressLine DataProgressLine(const TransferFlags& flags, std::uint64_t bytes) {
  return {stderr, !flags.quiet && bytes >= kProgressMinBytes && ::isatty(STDERR_FILENO) == 1};
}

// Fills `bytes` from `fd` at `offset`, updating `progress` (when given) as chunks arrive.
// DATA_LOSS when the file ends first (it shrank after its size was read).
Status ReadFully(int fd, std::span<std::byte> bytes, std::uint64_t offset, const std::string& path,
                 ProgressLine* progress = nullptr) {
  std::uint64_t done = 0;
  while (done < bytes.size()) {
    const std::uint64_t chunk = std::min<std::uint64_t>(bytes.size() - done, kTransferChunkBytes);
    const ssize_t count =
        ::pread(fd, bytes.data() + done, chunk, static_cast<off_t>(offset + done));
    if (count < 0) {
      if (errno == EINTR) continue;
      return ErrnoFailure("pread", path, errno);
    }
    if (count == 0) {
      return std::unexpected(
          Error(StatusCode::kDataLoss, fmt::format("{}: file ended after {} bytes; expected {}",
                                                   path, offset + done, offset + bytes.size())));
    }
    done += static_cast<std::uint64_t>(count);
    if (progress != nullptr) progress->Update(done, bytes.size());
  }
  return {};
}

// Writes all of `bytes` to `fd`, updating `progress` (when given) as chunks leave.
Status WriteFully(int fd, std::span<const std::byte> bytes, const std::string& path,
                  ProgressLine* progress = nullptr) {
  std::uint64_t done = 0;
  while (done < bytes.size()) {
    const std::uint64_t chunk = std::min<std::uint64_t>(bytes.size() - done, kTransferChunkBytes);
    const ssize_t count = ::write(fd, bytes.data() + done, chunk);
    if (count < 0) {
      if (errno == EINTR) continue;
      return ErrnoFailure("write", path, errno);
    }
    done += static_cast<std::uint64_t>(count);
    if (progress != nullptr) progress->Update(done, bytes.size());
  }
  return {};
}

// Whether dense `strides` (in elements) describe the row-major contiguous order of `shape`.
// Strides of dimensions of size 1 do not matter, nor any stride of an empty tensor.
bool IsRowMajor(std::span<const std::uint64_t> shape, std::span<const std::uint64_t> strides) {
  if (strides.empty() || std::ranges::find(shape, std::uint64_t{0}) != shape.end()) return true;
  std::uint64_t expected = 1;
  for (std::size_t i = shape.size(); i > 0; --i) {
    if (shape[i - 1] != 1 && strides[i - 1] != expected) return false;
    expected *= shape[i - 1];
  }
  return true;
}

// The bytes of a .npy file's data that `view` holds: its dense data buffer, after checking
// that a .npy file can hold the tensor. FAILED_PRECONDITION naming the reason otherwise.
Result<std::span<const std::byte>> NpyData(const TensorView& view) {
  const TensorDescriptor& descriptor = view.descriptor();
  const std::string what = fmt::format("{} version {}", view.name(), view.version());
  if (!std::holds_alternative<DenseLayout>(descriptor.layout())) {
    return FailedPreconditionError(
        fmt::format("{} has a {} layout; a .npy file holds dense tensors only", what,
                    LayoutName(descriptor.layout())));
  }
  // The dense layout's one part (hurray/buffer_parts.h).
  const std::optional<BufferPart> data_part = descriptor.FindBufferPart("data");
  if (!data_part) return InternalError(fmt::format("{}: a dense tensor without data", what));
  if (!IsRowMajor(data_part->shape, data_part->element_strides)) {
    return FailedPreconditionError(
        fmt::format("{} has strides {}, not row-major contiguous; a .npy file holds C-order data",
                    what, FormatShape(data_part->element_strides)));
  }
  if (!std::holds_alternative<NoQuantization>(descriptor.quantization())) {
    return FailedPreconditionError(
        fmt::format("{} is quantized ({}); a .npy file holds plain values only", what,
                    QuantizationName(descriptor.quantization())));
  }
  if (auto dtype = NpyDtype(descriptor.element_type()); !dtype) {
    return FailedPreconditionError(fmt::format("{}: {}", what, dtype.error().message()));
  }
  if (descriptor.device_tag() != DeviceTag::Cpu()) {
    return FailedPreconditionError(
        fmt::format("{} lives on device {}; only CPU tensors can be written to a file", what,
                    descriptor.device_tag().Name()));
  }
  const std::span<const std::byte> data = view.buffer(data_part->index);
  if (data.size() < data_part->byte_size) {
    return InternalError(fmt::format("{}: data buffer of {} bytes is smaller than its shape needs",
                                     what, data.size()));
  }
  return data.first(data_part->byte_size);
}

}  // namespace

Status PutCommand(const GlobalOptions& options, const TransferFlags& flags, std::string_view name,
                  const std::string& path, std::string_view pool) {
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return ErrnoFailure("open", path, errno);
  struct stat status{};
  if (::fstat(file.get(), &status) != 0) return ErrnoFailure("fstat", path, errno);
  if (!S_ISREG(status.st_mode)) {
    return InvalidArgumentError(fmt::format("{}: not a regular file", path));
  }
  const auto file_size = static_cast<std::uint64_t>(status.st_size);

  // The header: first its fixed-size start, which says how long the rest is.
  std::vector<std::uint8_t> prefix(std::min(file_size, kNpyPreambleBytes));
  if (auto read = ReadFully(file.get(), std::as_writable_bytes(std::span(prefix)), 0, path);
      !read) {
    return read;
  }
  auto header_end = NpyHeaderEnd(prefix, file_size);
  if (!header_end) return std::unexpected(header_end.error().WithContext(path));
  prefix.resize(*header_end);
  if (auto read = ReadFully(file.get(), std::as_writable_bytes(std::span(prefix)), 0, path);
      !read) {
    return read;
  }
  auto header = ParseNpyHeader(prefix, file_size);
  if (!header) return std::unexpected(header.error().WithContext(path));
  auto descriptor = TensorDescriptor::Dense(header->element_type, header->shape);
  if (!descriptor) return std::unexpected(descriptor.error().WithContext(path));

  auto client = ConnectClient(options);
  if (!client) return std::unexpected(client.error());
  auto tensor = (*client)->Allocate(*descriptor, pool);
  if (!tensor) return std::unexpected(tensor.error());
  const std::span<std::byte> data = tensor->buffer(0);
  if (data.size() != header->data_bytes) {
    return InternalError(fmt::format("Allocate: buffer 0 has {} bytes; the file holds {}",
                                     data.size(), header->data_bytes));
  }
  ProgressLine progress = DataProgressLine(flags, data.size());
  auto read = ReadFully(file.get(), data, header->data_offset, path, &progress);
  progress.Clear();
  if (!read) return read;
  auto published = tensor->Publish(name);
  if (!published) return std::unexpected(published.error());
  if (options.json) {
    JsonObject()
        .Set("name", published->name)
        .Set("version", published->version)
        .Set("bytes", header->data_bytes)
        .Print();
    return {};
  }
  Print(fmt::format("published {} version {} ({})\n", published->name, published->version,
                    FormatBytes(header->data_bytes)));
  return {};
}

Status GetCommand(const GlobalOptions& options, const TransferFlags& flags, std::string_view name,
                  const std::string& path, std::uint64_t version, std::chrono::milliseconds wait) {
  auto client = ConnectClient(options);
  if (!client) return std::unexpected(client.error());
  auto view = (*client)->Acquire(name, AcquireOptions{.version = version, .wait = wait});
  if (!view) return std::unexpected(view.error());
  auto data = NpyData(*view);
  if (!data) return std::unexpected(data.error());
  auto header = NpyHeaderFor(view->descriptor().element_type(), view->descriptor().shape());
  if (!header) return std::unexpected(header.error());

  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (!file) return ErrnoFailure("open", path, errno);
  Status written = WriteFully(file.get(), std::as_bytes(std::span(*header)), path);
  if (written) {
    ProgressLine progress = DataProgressLine(flags, data->size());
    written = WriteFully(file.get(), *data, path, &progress);
  }
  if (written && ::close(file.Release()) != 0) {
    written = ErrnoFailure("close", path, errno);
  }
  if (!written) {
    // Remove the partial file, but never a device or pipe the path named.
    struct stat status{};
    const bool regular = file ? ::fstat(file.get(), &status) == 0 && S_ISREG(status.st_mode)
                              : ::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode);
    file.Reset();
    if (regular) ::unlink(path.c_str());
    return written;
  }
  const std::uint64_t bytes = header->size() + data->size();
  if (options.json) {
    JsonObject()
        .Set("name", view->name())
        .Set("version", view->version())
        .Set("file", path)
        .Set("bytes", bytes)
        .Print();
    return {};
  }
  Print(fmt::format("wrote {} version {} to {} ({})\n", view->name(), view->version(), path,
                    FormatBytes(bytes)));
  return {};
}

namespace {

// A transfer's options with its progress drawn on `line`.
FileTransferOptions TransferOptions(std::string prefix, std::string pool, ProgressLine& line) {
  return {
      .prefix = std::move(prefix),
      .pool = std::move(pool),
      .parallelism = 0,
      .progress = [&line](std::uint64_t done, std::uint64_t total) { line.Update(done, total); }};
}

// Prints what an import, save or load did ("imported", "saved", "loaded").
Status PrintTransfer(const GlobalOptions& options, const TransferFlags& flags,
                     std::string_view verb, const std::string& path, std::string_view prefix,
                     const FileTransferSummary& summary) {
  const double seconds = std::chrono::duration<double>(summary.elapsed).count();
  const double gb_per_s = seconds > 0 ? static_cast<double>(summary.bytes) / seconds / 1e9 : 0.0;
  if (options.json) {
    JsonObject()
        .Set("file", path)
        .Set("prefix", prefix)
        .Set("tensors", static_cast<std::uint64_t>(summary.tensors))
        .Set("bytes", summary.bytes)
        .Set("seconds", seconds)
        .Set("gb_per_s", gb_per_s)
        .Print();
    return {};
  }
  if (flags.quiet) return {};
  Print(fmt::format("{} {} tensors ({}) in {:.3f} s, {:.2f} GB/s {} {}\n", verb, summary.tensors,
                    FormatBytes(summary.bytes), seconds, gb_per_s, verb == "saved" ? "to" : "under",
                    verb == "saved" ? path : prefix));
  return {};
}

// Imports `path` (any TensorFile) under `prefix`, drawing progress, and prints the summary.
Status Import(const GlobalOptions& options, const TransferFlags& flags, std::string_view verb,
              const std::string& path, const std::string& prefix, const std::string& pool) {
  auto client = ConnectClient(options);
  if (!client) return std::unexpected(client.error());
  ProgressLine line(stderr, !flags.quiet && ::isatty(STDERR_FILENO) == 1);
  auto summary = ImportTensorFile(**client, path, TransferOptions(prefix, pool, line));
  line.Clear();
  if (!summary) return std::unexpected(summary.error());
  return PrintTransfer(options, flags, verb, path, prefix, *summary);
}

}  // namespace

Status ImportCommand(const GlobalOptions& options, const TransferFlags& flags,
                     const std::string& path, const std::string& prefix, const std::string& pool) {
  return Import(options, flags, "imported", path, prefix, pool);
}

Status SaveCommand(const GlobalOptions& options, const TransferFlags& flags,
                   const std::string& prefix, const std::string& path) {
  auto client = ConnectClient(options);
  if (!client) return std::unexpected(client.error());
  ProgressLine line(stderr, !flags.quiet && ::isatty(STDERR_FILENO) == 1);
  auto summary = SaveTensors(**client, prefix, path, TransferOptions(prefix, {}, line));
  line.Clear();
  if (!summary) return std::unexpected(summary.error());
  return PrintTransfer(options, flags, "saved", path, prefix, *summary);
}

Status LoadCommand(const GlobalOptions& options, const TransferFlags& flags,
                   const std::string& path, const std::string& prefix, const std::string& pool) {
  if (!path.ends_with(".hrry")) {
    return InvalidArgumentError(fmt::format(
        "{}: load reads .hrry files (named *.hrry); import reads .safetensors files", path));
  }
  return Import(options, flags, "loaded", path, prefix, pool);
}

}  // namespace hurray::ctl
