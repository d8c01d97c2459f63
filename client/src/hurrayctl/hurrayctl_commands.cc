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
#include "hurrayctl/command_support.h"
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
// A connection for ls, describe, stats, watch and top. They print the daemon's replies as they
// come (--json is protobuf's mapping of the reply), so they use the client module's calls
// that return the replies (inspection_calls.h), not Client's, which convert them.
Result<std::shared_ptr<Connection>> ConnectForReplies(const GlobalOptions& options) {
  const std::string socket_path = SocketPathOf(options);
  auto connection = Connection::Open(socket_path, kClientName, /*use_session_socket=*/true);
  if (!connection) return std::unexpected(ExplainConnectError(connection.error(), socket_path));
  return connection;
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
