#include "hurrayctl/hurrayctl_commands.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <initializer_list>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "connection.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "hurray/client.h"
#include "hurray/descriptor_codec.h"
#include "hurray/file_transfer.h"
#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/socket_path.h"
#include "hurray/ipc/unique_fd.h"
#include "hurray/v1/exchange.pb.h"
#include "hurrayctl/hurrayctl_format.h"
#include "hurrayctl/npy.h"
#include "hurrayctl/progress_line.h"
#include "hurrayctl/reply_text.h"
#include "hurrayctl/terminal_screen.h"
#include "hurrayctl/top_screen.h"
#include "inspection_calls.h"

namespace hurray::ctl {
namespace {

using client_internal::Connection;
using google::protobuf::Message;

constexpr std::string_view kClientName = "hurrayctl";

// The socket a command connects to: --socket, else the client's default.
std::string SocketPathOf(const GlobalOptions& options) {
  return options.socket_path.empty() ? DefaultClientSocketPath() : options.socket_path;
}

// What hurrayctl says when no daemon answers at `socket_path`; `cause` is the connect error.
std::string UnreachableDaemonMessage(std::string_view socket_path, std::string_view cause) {
  return fmt::format(
      "no hurrayd answers at {} ({}). Is it running? Start it with `hurrayd` (or `systemctl "
      "start hurrayd`), or point at another socket with --socket PATH or $HURRAY_SOCKET.",
      socket_path, cause);
}

// A failure to connect, in words a newcomer acts on when no daemon answers (UNAVAILABLE: no
// socket, or nobody listening on it); other errors as they are.
Error ExplainConnectError(const Error& error, const std::string& socket_path) {
  if (error.code() != StatusCode::kUnavailable) return error;
  return {StatusCode::kUnavailable, UnreachableDaemonMessage(socket_path, error.message())};
}

Result<std::unique_ptr<Client>> ConnectClient(const GlobalOptions& options) {
  const std::string socket_path = SocketPathOf(options);
  auto client = Client::Connect(
      Client::Options{.socket_path = socket_path, .client_name = std::string(kClientName)});
  if (!client) return std::unexpected(ExplainConnectError(client.error(), socket_path));
  return client;
}

// A connection for ls, describe, stats, watch and top. They print the daemon's replies as they
// come (--json is protobuf's mapping of the reply), so they use the client module's calls
// that return the replies (inspection_calls.h), not Client's, which convert them.
Result<std::shared_ptr<Connection>> ConnectForReplies(const GlobalOptions& options) {
  const std::string socket_path = SocketPathOf(options);
  auto connection = Connection::Open(socket_path, kClientName, /*use_session_socket=*/true);
  if (!connection) return std::unexpected(ExplainConnectError(connection.error(), socket_path));
  return connection;
}

// Writes `text` to stdout; write errors surface when main flushes stdout.
void Print(std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

// Protobuf's JSON mapping of `message` on one line: proto field names, in field number order,
// fields at their defaults included (so scripts always find them).
Result<std::string> JsonText(const Message& message) {
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.preserve_proto_field_names = true;
  json_options.always_print_primitive_fields = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, json_options);
  if (!status.ok()) {
    return InternalError(fmt::format("MessageToJsonString: {}", std::string(status.message())));
  }
  return json;
}

Status PrintJson(const Message& message) {
  HURRAY_ASSIGN_OR_RETURN(std::string json, JsonText(message));
  json += '\n';
  Print(json);
  return {};
}

// A small JSON object for put, get, rm and the transfers, its keys printed in sorted order so
// that every run prints the same text. Values are google.protobuf.Values, so that protobuf's
// printer does the escaping; numbers are doubles: exact below 2^53.
class JsonObject {
 public:
  JsonObject& Set(const std::string& key, std::string_view value) {
    fields_[key].set_string_value(std::string(value));
    return *this;
  }
  JsonObject& Set(const std::string& key, std::uint64_t value) {
    fields_[key].set_number_value(static_cast<double>(value));
    return *this;
  }
  JsonObject& Set(const std::string& key, double value) {
    fields_[key].set_number_value(value);
    return *this;
  }
  [[nodiscard]] Status Print() const {
    std::string json = "{";
    for (const auto& [key, value] : fields_) {
      google::protobuf::Value key_value;
      key_value.set_string_value(key);
      HURRAY_ASSIGN_OR_RETURN(const std::string key_json, JsonText(key_value));
      HURRAY_ASSIGN_OR_RETURN(const std::string value_json, JsonText(value));
      if (json.size() > 1) json += ',';
      json += key_json;
      json += ':';
      json += value_json;
    }
    json += "}\n";
    ::hurray::ctl::Print(json);
    return {};
  }

 private:
  std::map<std::string, google::protobuf::Value> fields_;  // Sorted by key.
};

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

std::string WatchKindLabel(v1::WatchEvent::Kind kind) {
  switch (kind) {
    case v1::WatchEvent::KIND_PUBLISHED:
      return "published";
    case v1::WatchEvent::KIND_DELETED:
      return "deleted";
    case v1::WatchEvent::KIND_EVICTED:
      return "evicted";
    case v1::WatchEvent::KIND_WATCHING:
      return "watching";
    default:
      return fmt::format("event {}", static_cast<int>(kind));
  }
}

// Every published name under `prefix`, all pages merged into one reply.
Result<v1::ListResponse> ListAll(Connection& connection, std::string_view prefix) {
  v1::ListResponse all;
  std::string page_token;
  do {
    auto page = client_internal::CallList(connection, prefix, /*page_size=*/1000, page_token);
    if (!page) return std::unexpected(page.error());
    if (!page->next_page_token().empty() && page->next_page_token() == page_token) {
      return InternalError(
          fmt::format("List: the daemon returned page token \"{}\" again", page_token));
    }
    for (auto& summary : *page->mutable_tensors()) *all.add_tensors() = std::move(summary);
    all.set_daemon_epoch(page->daemon_epoch());
    page_token = page->next_page_token();
  } while (!page_token.empty());
  return all;
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

// Blocks `signals` in the calling thread (before the client starts threads, which inherit the
// mask, so that no thread of its takes them) and returns the set, for sigwait or signalfd.
Result<sigset_t> BlockSignals(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (const int signal : signals) sigaddset(&set, signal);
  if (const int error = pthread_sigmask(SIG_BLOCK, &set, nullptr); error != 0) {
    return ErrnoFailure("pthread_sigmask", "", error);
  }
  return set;
}

}  // namespace

Status ListCommand(const GlobalOptions& options, std::string_view prefix) {
  HURRAY_ASSIGN_OR_RETURN(const auto connection, ConnectForReplies(options));
  HURRAY_ASSIGN_OR_RETURN(const v1::ListResponse all, ListAll(*connection, prefix));
  if (options.json) return PrintJson(all);
  TextTable table(TensorColumns());
  const std::int64_t now = UnixNanosNow();
  for (const v1::TensorSummary& summary : all.tensors()) table.AddRow(TensorRow(summary, now));
  Print(table.Render());
  return {};
}

Status DescribeCommand(const GlobalOptions& options, std::string_view name, std::uint64_t version) {
  HURRAY_ASSIGN_OR_RETURN(const auto connection, ConnectForReplies(options));
  auto response = client_internal::CallDescribe(*connection, name, version);
  if (!response) return std::unexpected(response.error());
  if (options.json) return PrintJson(*response);

  const v1::TensorInfo& tensor = response->tensor();
  const std::int64_t now = UnixNanosNow();
  auto descriptor = DescriptorFromProto(tensor.tensor_descriptor());
  if (!descriptor) {
    return std::unexpected(descriptor.error().WithContext("daemon sent an invalid descriptor"));
  }
  std::string text = fmt::format(
      "name:       {}\n"
      "version:    {}\n"
      "owner:      {} (uid {})\n"
      "pool:       {}\n"
      "published:  {} ({})\n"
      "{}"
      "descriptor:\n",
      tensor.name(), tensor.version(),
      OwnerLabel(response->owner().uid(), response->owner().user()), response->owner().uid(),
      tensor.pool(), FormatTimestamp(tensor.published_at_ns()),
      FormatAge(tensor.published_at_ns(), now),
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
                     FormatBytes(info.byte_size()), FormatAge(info.published_at_ns(), now),
                     info.superseded() ? "superseded" : "current"});
  }
  text += versions.Render("  ");
  Print(text);
  return {};
}

namespace {

// The fast path's lines of `stats`: "off", or its directory, lease pages and pinned versions.
std::string RenderFastPath(const v1::StatsResponse& stats) {
  if (stats.fast_path_directory_entries() == 0) return "fast path:            off\n";
  return fmt::format(
      "fast path:            {} of {} directory entries ({} names refused one)\n"
      "  lease pages:        {} ({} slots)\n"
      "  pinned versions:    {} ({}), {} scans\n",
      stats.fast_path_directory_entries_used(), stats.fast_path_directory_entries(),
      stats.fast_path_refused_names(), stats.fast_path_lease_pages(), stats.fast_path_lease_slots(),
      stats.fast_path_pinned_versions(), FormatBytes(stats.fast_path_pinned_bytes()),
      stats.fast_path_scans());
}

}  // namespace

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
      "pending allocations:  {}\n",
      FormatDuration(stats->uptime_seconds()), stats->daemon_epoch(), stats->session_count(),
      stats->lease_count(), stats->tensor_count(), stats->version_count(),
      stats->pending_allocation_count());
  text += RenderFastPath(*stats);
  if (stats->earlier_epoch_held_versions() != 0) {
    text += fmt::format(
        "held for earlier:     {} retired versions ({}) an earlier daemon's "
        "clients may still map\n",
        stats->earlier_epoch_held_versions(), FormatBytes(stats->earlier_epoch_held_bytes()));
  }
  if (stats->quarantined_sessions() != 0) {
    std::uint64_t bytes = 0;
    for (const v1::PoolStats& pool : stats->pools()) bytes += pool.quarantined_bytes();
    text += fmt::format(
        "quarantined:          {} ({} ended sessions whose process has not exited yet)\n",
        FormatBytes(bytes), stats->quarantined_sessions());
  }
  text += "pools:\n";
  text += RenderPoolTable(*stats, "  ");
  text += RenderCudaPools(*stats);
  Print(text);
  return {};
}

Status HealthCommand(const GlobalOptions& options, const std::string& service) {
  namespace health = grpc::health::v1;
  const std::string socket_path = SocketPathOf(options);
  const auto stub = health::Health::NewStub(
      grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  health::HealthCheckRequest request;
  request.set_service(service);
  health::HealthCheckResponse response;
  if (const grpc::Status status = stub->Check(&context, request, &response); !status.ok()) {
    return std::unexpected(
        ExplainConnectError(client_internal::FromGrpcStatus(status, "health check"), socket_path));
  }
  if (options.json) {
    HURRAY_RETURN_IF_ERROR(PrintJson(response));
  } else {
    Print(fmt::format("{}\n", health::HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  if (response.status() != health::HealthCheckResponse::SERVING) {
    return UnavailableError(
        fmt::format("{} at {} is {}", service.empty() ? "hurrayd" : service, socket_path,
                    health::HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  return {};
}

Status WatchCommand(const GlobalOptions& options, std::string_view prefix) {
  // SIGUSR1 is how the stream's end wakes the sigwait below.
  HURRAY_ASSIGN_OR_RETURN(const sigset_t signals, BlockSignals({SIGINT, SIGTERM, SIGUSR1}));
  HURRAY_ASSIGN_OR_RETURN(auto connection, ConnectForReplies(options));

  std::mutex mutex;
  std::optional<Status> end;  // Guarded by `mutex`; set once the stream ends.
  const bool json = options.json;
  auto on_event = [json](const v1::WatchEvent& event) {
    if (json) {
      (void)PrintJson(event);
    } else {
      Print(fmt::format("{} {} {} version {}\n", FormatTimestamp(UnixNanosNow()),
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
    return ErrnoFailure("sigwait", "", error);
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

namespace {

// Blocks SIGINT, SIGTERM and SIGHUP and returns a signalfd that reads them, so that top ends
// through its own loop and restores the terminal.
Result<UniqueFd> TerminationSignals() {
  HURRAY_ASSIGN_OR_RETURN(const sigset_t signals, BlockSignals({SIGINT, SIGTERM, SIGHUP}));
  UniqueFd signal_fd(::signalfd(-1, &signals, SFD_CLOEXEC));
  if (!signal_fd) return ErrnoFailure("signalfd", "", errno);
  return signal_fd;
}

// Waits up to `interval` for a key on stdin or a signal on `signal_fd`. True when top should
// end: q, Q or Ctrl-C typed, or a termination signal; false on any other key or the timeout.
Result<bool> WaitForQuit(int signal_fd, std::chrono::milliseconds interval) {
  std::array<pollfd, 2> watched = {pollfd{.fd = STDIN_FILENO, .events = POLLIN, .revents = 0},
                                   pollfd{.fd = signal_fd, .events = POLLIN, .revents = 0}};
  const int ready = ::poll(watched.data(), watched.size(), static_cast<int>(interval.count()));
  if (ready < 0) {
    if (errno == EINTR) return false;
    return ErrnoFailure("poll", "stdin", errno);
  }
  if (watched[1].revents != 0) return true;
  if (watched[0].revents == 0) return false;
  std::array<char, 64> keys{};
  const ssize_t count = ::read(STDIN_FILENO, keys.data(), keys.size());
  if (count <= 0) return count == 0;  // The terminal went away: end.
  constexpr char kControlC = 3;
  return std::ranges::any_of(std::span(keys.data(), static_cast<std::size_t>(count)),
                             [](char key) { return key == 'q' || key == 'Q' || key == kControlC; });
}

}  // namespace

Status TopCommand(const GlobalOptions& options, std::chrono::milliseconds interval) {
  HURRAY_ASSIGN_OR_RETURN(const UniqueFd signal_fd, TerminationSignals());
  HURRAY_ASSIGN_OR_RETURN(const TerminalScreen screen,
                          TerminalScreen::Enter(STDIN_FILENO, STDOUT_FILENO));
  HURRAY_ASSIGN_OR_RETURN(const auto connection, ConnectForReplies(options));
  const double interval_seconds = std::chrono::duration<double>(interval).count();
  while (true) {
    HURRAY_ASSIGN_OR_RETURN(const v1::StatsResponse stats, client_internal::CallStats(*connection));
    HURRAY_ASSIGN_OR_RETURN(const v1::ListResponse tensors, ListAll(*connection, ""));
    HURRAY_RETURN_IF_ERROR(screen.Draw(
        RenderTopScreen(stats, tensors, UnixNanosNow(), interval_seconds, screen.Size())));
    HURRAY_ASSIGN_OR_RETURN(const bool quit, WaitForQuit(signal_fd.get(), interval));
    if (quit) return {};
  }
}

}  // namespace hurray::ctl
