#include "hurrayctl/hurrayctl_commands.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "connection.h"
#include "hurray/client.h"
#include "hurray/descriptor_codec.h"
#include "hurray/file_transfer.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/exchange.pb.h"
#include "hurrayctl/hurrayctl_format.h"
#include "hurrayctl/npy.h"
#include "hurrayctl/progress_line.h"
#include "hurrayctl/reply_text.h"
#include "inspection_calls.h"

namespace hurray::ctl {
namespace {

using client_internal::Connection;
using google::protobuf::Message;

constexpr std::string_view kClientName = "hurrayctl";

Result<std::unique_ptr<Client>> ConnectClient(const GlobalOptions& options) {
  return Client::Connect(
      Client::Options{.socket_path = options.socket_path, .client_name = std::string(kClientName)});
}

// A connection for ls, describe, stats and watch. They print the daemon's replies as they
// come (--json is protobuf's mapping of the reply), so they use the client module's calls
// that return the replies (inspection_calls.h), not Client's, which convert them.
Result<std::shared_ptr<Connection>> ConnectForReplies(const GlobalOptions& options) {
  return Connection::Open(options.socket_path, kClientName, /*use_session_socket=*/true);
}

// Writes `text` to stdout; write errors surface when main flushes stdout.
void Print(std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

// One line of protobuf's JSON mapping: proto field names, fields at their defaults included
// (so scripts always find them).
Status PrintJson(const Message& message) {
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.preserve_proto_field_names = true;
  json_options.always_print_primitive_fields = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, json_options);
  if (!status.ok()) {
    return InternalError(fmt::format("MessageToJsonString: {}", std::string(status.message())));
  }
  json += '\n';
  Print(json);
  return {};
}

// A small JSON object for put, get and rm, built as a google.protobuf.Struct so that the
// printer does the escaping. Numbers are doubles: exact below 2^53.
class JsonObject {
 public:
  JsonObject& Set(const std::string& key, std::string_view value) {
    (*fields_.mutable_fields())[key].set_string_value(std::string(value));
    return *this;
  }
  JsonObject& Set(const std::string& key, std::uint64_t value) {
    (*fields_.mutable_fields())[key].set_number_value(static_cast<double>(value));
    return *this;
  }
  JsonObject& Set(const std::string& key, double value) {
    (*fields_.mutable_fields())[key].set_number_value(value);
    return *this;
  }
  [[nodiscard]] Status Print() const { return PrintJson(fields_); }

 private:
  google::protobuf::Struct fields_;
};

// Fills `bytes` from `fd` at `offset`. DATA_LOSS when the file ends first (it shrank after
// its size was read).
Status ReadFully(int fd, std::span<std::byte> bytes, std::uint64_t offset,
                 const std::string& path) {
  std::uint64_t done = 0;
  while (done < bytes.size()) {
    const ssize_t count =
        ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (count < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(ErrnoError("pread", path, errno));
    }
    if (count == 0) {
      return std::unexpected(
          Error(StatusCode::kDataLoss, fmt::format("{}: file ended after {} bytes; expected {}",
                                                   path, offset + done, offset + bytes.size())));
    }
    done += static_cast<std::uint64_t>(count);
  }
  return {};
}

Status WriteFully(int fd, std::span<const std::byte> bytes, const std::string& path) {
  std::uint64_t done = 0;
  while (done < bytes.size()) {
    const ssize_t count = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (count < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(ErrnoError("write", path, errno));
    }
    done += static_cast<std::uint64_t>(count);
  }
  return {};
}

// The lower-case name of a hurray.v1.ElementType value, or "type N" for an unknown one.
std::string ElementTypeLabel(int value) {
  if (value > 0 && value <= 0xff) {
    if (auto type = ElementTypeFromTag(static_cast<std::uint8_t>(value))) {
      return std::string(ElementTypeName(*type));
    }
  }
  return fmt::format("type {}", value);
}

std::string WatchKindLabel(v1::WatchEvent::Kind kind) {
  switch (kind) {
    case v1::WatchEvent::KIND_PUBLISHED:
      return "published";
    case v1::WatchEvent::KIND_DELETED:
      return "deleted";
    case v1::WatchEvent::KIND_WATCHING:
      return "watching";
    default:
      return fmt::format("event {}", static_cast<int>(kind));
  }
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
  const auto* dense = std::get_if<DenseLayout>(&descriptor.layout());
  if (dense == nullptr) {
    return FailedPreconditionError(
        fmt::format("{} has a {} layout; a .npy file holds dense tensors only", what,
                    LayoutName(descriptor.layout())));
  }
  if (!IsRowMajor(descriptor.shape(), dense->strides)) {
    return FailedPreconditionError(
        fmt::format("{} has strides {}, not row-major contiguous; a .npy file holds C-order data",
                    what, FormatShape(dense->strides)));
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
  const auto needed = ByteSizeOf(descriptor.element_type(), descriptor.ElementCount());
  const std::span<const std::byte> data = view.buffer(dense->data_buffer);
  if (!needed || data.size() < *needed) {
    return InternalError(fmt::format("{}: data buffer of {} bytes is smaller than its shape needs",
                                     what, data.size()));
  }
  return data.first(*needed);
}

}  // namespace

Status ListCommand(const GlobalOptions& options, std::string_view prefix) {
  HURRAY_ASSIGN_OR_RETURN(const auto connection, ConnectForReplies(options));
  v1::ListResponse all;
  std::string page_token;
  do {
    auto page = client_internal::CallList(*connection, prefix, /*page_size=*/1000, page_token);
    if (!page) return std::unexpected(page.error());
    if (!page->next_page_token().empty() && page->next_page_token() == page_token) {
      return InternalError(
          fmt::format("List: the daemon returned page token \"{}\" again", page_token));
    }
    for (auto& summary : *page->mutable_tensors()) *all.add_tensors() = std::move(summary);
    all.set_daemon_epoch(page->daemon_epoch());
    page_token = page->next_page_token();
  } while (!page_token.empty());

  if (options.json) return PrintJson(all);
  TextTable table({"NAME", "VERSION", "TYPE", "SHAPE", "SIZE", "LEASES", "PUBLISHED"});
  for (const v1::TensorSummary& summary : all.tensors()) {
    const std::vector<std::uint64_t> shape(summary.shape().begin(), summary.shape().end());
    table.AddRow({summary.name(), fmt::to_string(summary.latest_version()),
                  ElementTypeLabel(summary.element_type()), FormatShape(shape),
                  FormatBytes(summary.byte_size()), fmt::to_string(summary.lease_count()),
                  FormatTimestamp(summary.published_at_ns())});
  }
  Print(table.Render());
  return {};
}

Status DescribeCommand(const GlobalOptions& options, std::string_view name, std::uint64_t version) {
  HURRAY_ASSIGN_OR_RETURN(const auto connection, ConnectForReplies(options));
  auto response = client_internal::CallDescribe(*connection, name, version);
  if (!response) return std::unexpected(response.error());
  if (options.json) return PrintJson(*response);

  const v1::TensorInfo& tensor = response->tensor();
  auto descriptor = DescriptorFromProto(tensor.tensor_descriptor());
  if (!descriptor) {
    return std::unexpected(descriptor.error().WithContext("daemon sent an invalid descriptor"));
  }
  std::string text = fmt::format(
      "name:       {}\n"
      "version:    {}\n"
      "pool:       {}\n"
      "published:  {}\n"
      "{}"
      "descriptor:\n",
      tensor.name(), tensor.version(), tensor.pool(), FormatTimestamp(tensor.published_at_ns()),
      RenderDeviceAndHandoff(tensor, descriptor->device_tag()));
  const std::string rendered = descriptor->ToString();
  std::size_t start = 0;
  while (start < rendered.size()) {
    std::size_t end = rendered.find('\n', start);
    if (end == std::string::npos) end = rendered.size();
    fmt::format_to(std::back_inserter(text), "  {}\n",
                   std::string_view(rendered).substr(start, end - start));
    start = end + 1;
  }
  text += "buffers:\n";
  TextTable buffers({"BUFFER", "SEGMENT", "OFFSET", "SIZE"});
  for (int i = 0; i < tensor.buffers_size(); ++i) {
    const v1::BufferLocation& location = tensor.buffers(i);
    buffers.AddRow({fmt::to_string(i), fmt::to_string(location.segment_id()),
                    fmt::to_string(location.offset()), FormatBytes(location.byte_size())});
  }
  text += buffers.Render("  ");
  text += "versions:\n";
  TextTable versions({"VERSION", "LEASES", "SIZE", "PUBLISHED", "STATE"});
  for (const v1::VersionInfo& info : response->versions()) {
    versions.AddRow({fmt::to_string(info.version()), fmt::to_string(info.lease_count()),
                     FormatBytes(info.byte_size()), FormatTimestamp(info.published_at_ns()),
                     info.superseded() ? "superseded" : "current"});
  }
  text += versions.Render("  ");
  Print(text);
  return {};
}

Status StatsCommand(const GlobalOptions& options) {
  HURRAY_ASSIGN_OR_RETURN(const auto connection, ConnectForReplies(options));
  auto stats = client_internal::CallStats(*connection);
  if (!stats) return std::unexpected(stats.error());
  if (options.json) return PrintJson(*stats);

  std::string text = fmt::format(
      "uptime:               {}\n"
      "daemon epoch:         {}\n"
      "sessions:             {}\n"
      "leases:               {}\n"
      "tensors:              {} ({} live versions)\n"
      "pending allocations:  {}\n"
      "pools:\n",
      FormatDuration(stats->uptime_seconds()), stats->daemon_epoch(), stats->session_count(),
      stats->lease_count(), stats->tensor_count(), stats->version_count(),
      stats->pending_allocation_count());
  TextTable pools({"POOL", "KIND", "CAPACITY", "USED", "LARGEST FREE", "FRAGMENTATION", "SEGMENTS",
                   "ALLOCATIONS"});
  for (const v1::PoolStats& pool : stats->pools()) {
    pools.AddRow({pool.name(), pool.kind(), FormatBytes(pool.capacity_bytes()),
                  FormatBytes(pool.used_bytes()), FormatBytes(pool.largest_free_bytes()),
                  FormatPercent(pool.fragmentation()), fmt::to_string(pool.segment_count()),
                  fmt::to_string(pool.allocation_count())});
  }
  text += pools.Render("  ");
  text += RenderCudaPools(*stats);
  Print(text);
  return {};
}

Status WatchCommand(const GlobalOptions& options, std::string_view prefix) {
  // SIGUSR1 is how the stream's end wakes the sigwait below. Blocked before the client
  // starts its threads, so they inherit the mask and no thread takes these signals itself.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  if (const int error = pthread_sigmask(SIG_BLOCK, &signals, nullptr); error != 0) {
    return std::unexpected(ErrnoError("pthread_sigmask", "", error));
  }
  HURRAY_ASSIGN_OR_RETURN(auto connection, ConnectForReplies(options));

  std::mutex mutex;
  std::optional<Status> end;  // Guarded by `mutex`; set once the stream ends.
  const bool json = options.json;
  auto on_event = [json](const v1::WatchEvent& event) {
    if (json) {
      (void)PrintJson(event);
    } else {
      const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch());
      Print(fmt::format("{} {} {} version {}\n", FormatTimestamp(now.count()),
                        WatchKindLabel(event.kind()), event.name(), event.version()));
    }
    std::fflush(stdout);
  };
  auto on_end = [&mutex, &end](const Status& status) {
    {
      std::lock_guard lock(mutex);
      end = status;
    }
    ::kill(::getpid(), SIGUSR1);
  };
  auto watch =
      client_internal::StartWatch(std::move(connection), std::string(prefix), on_event, on_end);
  if (!watch) return std::unexpected(watch.error());

  int signal_number = 0;
  if (const int error = sigwait(&signals, &signal_number); error != 0) {
    return std::unexpected(ErrnoError("sigwait", "", error));
  }
  watch->reset();  // Cancels the stream and joins its thread; on_end has run.
  if (signal_number != SIGUSR1) return {};
  std::lock_guard lock(mutex);
  return end.value_or(Status{});
}

Status RemoveCommand(const GlobalOptions& options, std::string_view name, std::uint64_t version) {
  auto client = ConnectClient(options);
  if (!client) return std::unexpected(client.error());
  auto deleted = (*client)->Delete(name, version);
  if (!deleted) return std::unexpected(deleted.error());
  if (options.json) {
    return JsonObject()
        .Set("name", name)
        .Set("version", version)
        .Set("versions_deleted", std::uint64_t{*deleted})
        .Print();
  }
  Print(
      fmt::format("deleted {} {} of {}\n", *deleted, *deleted == 1 ? "version" : "versions", name));
  return {};
}

Status PutCommand(const GlobalOptions& options, std::string_view name, const std::string& path,
                  std::string_view pool) {
  UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return std::unexpected(ErrnoError("open", path, errno));
  struct stat status{};
  if (::fstat(file.get(), &status) != 0) return std::unexpected(ErrnoError("fstat", path, errno));
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
  if (auto read = ReadFully(file.get(), data, header->data_offset, path); !read) return read;
  auto published = tensor->Publish(name);
  if (!published) return std::unexpected(published.error());
  if (options.json) {
    return JsonObject()
        .Set("name", published->name)
        .Set("version", published->version)
        .Set("bytes", header->data_bytes)
        .Print();
  }
  Print(fmt::format("published {} version {} ({})\n", published->name, published->version,
                    FormatBytes(header->data_bytes)));
  return {};
}

Status GetCommand(const GlobalOptions& options, std::string_view name, const std::string& path,
                  std::uint64_t version, std::chrono::milliseconds wait) {
  auto client = ConnectClient(options);
  if (!client) return std::unexpected(client.error());
  auto view = (*client)->Acquire(name, AcquireOptions{.version = version, .wait = wait});
  if (!view) return std::unexpected(view.error());
  auto data = NpyData(*view);
  if (!data) return std::unexpected(data.error());
  auto header = NpyHeaderFor(view->descriptor().element_type(), view->descriptor().shape());
  if (!header) return std::unexpected(header.error());

  UniqueFd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
  if (!file) return std::unexpected(ErrnoError("open", path, errno));
  Status written = WriteFully(file.get(), std::as_bytes(std::span(*header)), path);
  if (written) written = WriteFully(file.get(), *data, path);
  if (written && ::close(file.Release()) != 0) {
    written = std::unexpected(ErrnoError("close", path, errno));
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
    return JsonObject()
        .Set("name", view->name())
        .Set("version", view->version())
        .Set("file", path)
        .Set("bytes", bytes)
        .Print();
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
    return JsonObject()
        .Set("file", path)
        .Set("prefix", prefix)
        .Set("tensors", static_cast<std::uint64_t>(summary.tensors))
        .Set("bytes", summary.bytes)
        .Set("seconds", seconds)
        .Set("gb_per_s", gb_per_s)
        .Print();
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
