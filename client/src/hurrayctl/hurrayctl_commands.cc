#include "hurrayctl/hurrayctl_commands.h"

#include <fcntl.h>
#include <fmt/format.h>
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

#include "hurray/client.h"
#include "hurray/errno_error.h"
#include "hurray/health.h"
#include "hurray/inspection.h"
#include "hurray/inspection_json.h"
#include "hurray/ipc/unique_fd.h"
#include "hurrayctl/command_support.h"
#include "hurrayctl/hurrayctl_format.h"
#include "hurrayctl/npy.h"
#include "hurrayctl/progress_line.h"
#include "hurrayctl/reply_text.h"
#include "hurrayctl/terminal_screen.h"
#include "hurrayctl/top_screen.h"

namespace hurray::ctl {
namespace {

std::string_view WatchKindLabel(WatchEvent::Kind kind) {
  switch (kind) {
    case WatchEvent::Kind::kPublished:
      return "published";
    case WatchEvent::Kind::kDeleted:
      return "deleted";
    case WatchEvent::Kind::kEvicted:
      return "evicted";
  }
  return "event";
}

// Every published name under `prefix`, all pages merged into one.
Result<TensorListPage> ListAll(Client& client, std::string_view prefix) {
  TensorListPage all;
  std::string page_token;
  do {
    auto page = client.List(prefix, /*page_size=*/1000, page_token);
    if (!page) return std::unexpected(page.error());
    if (!page->next_page_token.empty() && page->next_page_token == page_token) {
      return InternalError(
          fmt::format("List: the daemon returned page token \"{}\" again", page_token));
    }
    std::ranges::move(page->tensors, std::back_inserter(all.tensors));
    all.daemon_epoch = page->daemon_epoch;
    page_token = std::move(page->next_page_token);
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
  HURRAY_ASSIGN_OR_RETURN(const auto client, ConnectClient(options));
  HURRAY_ASSIGN_OR_RETURN(const TensorListPage all, ListAll(*client, prefix));
  if (options.json) return PrintJson(ToJson(all));
  TextTable table(TensorColumns());
  const std::int64_t now = UnixNanosNow();
  for (const TensorSummary& summary : all.tensors) table.AddRow(TensorRow(summary, now));
  Print(table.Render());
  return {};
}

Status DescribeCommand(const GlobalOptions& options, std::string_view name, std::uint64_t version) {
  HURRAY_ASSIGN_OR_RETURN(const auto client, ConnectClient(options));
  HURRAY_ASSIGN_OR_RETURN(const TensorDetails tensor, client->Describe(name, version));
  if (options.json) return PrintJson(ToJson(tensor));

  const std::int64_t now = UnixNanosNow();
  const std::int64_t published_at = UnixNanos(tensor.published_at);
  std::string text = fmt::format(
      "name:       {}\n"
      "version:    {}\n"
      "owner:      {} (uid {})\n"
      "pool:       {}\n"
      "published:  {} ({})\n"
      "{}"
      "descriptor:\n",
      tensor.name, tensor.version, OwnerLabel(tensor.owner_uid, tensor.owner_user),
      tensor.owner_uid, tensor.pool, FormatTimestamp(published_at), FormatAge(published_at, now),
      RenderDeviceAndHandoff(tensor));
  const std::string rendered = tensor.descriptor.ToString();
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
  for (std::size_t i = 0; i < tensor.buffers.size(); ++i) {
    const BufferLocation& location = tensor.buffers[i];
    buffers.AddRow({fmt::to_string(i), fmt::to_string(location.segment_id),
                    fmt::to_string(location.offset), FormatBytes(location.byte_size)});
  }
  text += buffers.Render("  ");
  text += "versions:\n";
  TextTable versions({"VERSION", "LEASES", "SIZE", "PUBLISHED", "STATE"});
  for (const VersionSummary& info : tensor.versions) {
    versions.AddRow({fmt::to_string(info.version), fmt::to_string(info.lease_count),
                     FormatBytes(info.byte_size), FormatAge(UnixNanos(info.published_at), now),
                     info.superseded ? "superseded" : "current"});
  }
  text += versions.Render("  ");
  Print(text);
  return {};
}

namespace {

// The fast path's lines of `stats`: "off", or its directory, lease pages and pinned versions.
std::string RenderFastPath(const FastPathStats& fast_path) {
  if (fast_path.directory_entries == 0) return "fast path:            off\n";
  return fmt::format(
      "fast path:            {} of {} directory entries ({} names refused one)\n"
      "  lease pages:        {} ({} slots)\n"
      "  pinned versions:    {} ({}), {} scans\n",
      fast_path.directory_entries_used, fast_path.directory_entries, fast_path.refused_names,
      fast_path.lease_pages, fast_path.lease_slots, fast_path.pinned_versions,
      FormatBytes(fast_path.pinned_bytes), fast_path.scans);
}

}  // namespace

Status StatsCommand(const GlobalOptions& options) {
  HURRAY_ASSIGN_OR_RETURN(const auto client, ConnectClient(options));
  HURRAY_ASSIGN_OR_RETURN(const DaemonStats stats, client->Stats());
  if (options.json) return PrintJson(ToJson(stats));

  std::string text = fmt::format(
      "uptime:               {}\n"
      "daemon epoch:         {}\n"
      "sessions:             {}\n"
      "leases:               {}\n"
      "tensors:              {} ({} live versions)\n"
      "pending allocations:  {}\n",
      FormatDuration(static_cast<std::uint64_t>(stats.uptime.count())), stats.daemon_epoch,
      stats.session_count, stats.lease_count, stats.tensor_count, stats.version_count,
      stats.pending_allocation_count);
  text += RenderFastPath(stats.fast_path);
  if (stats.earlier_epoch_held_versions != 0) {
    text += fmt::format(
        "held for earlier:     {} retired versions ({}) an earlier daemon's "
        "clients may still map\n",
        stats.earlier_epoch_held_versions, FormatBytes(stats.earlier_epoch_held_bytes));
  }
  if (stats.quarantined_sessions != 0) {
    std::uint64_t bytes = 0;
    for (const PoolStats& pool : stats.pools) bytes += pool.quarantined_bytes;
    text += fmt::format(
        "quarantined:          {} ({} ended sessions whose process has not exited yet)\n",
        FormatBytes(bytes), stats.quarantined_sessions);
  }
  text += "pools:\n";
  text += RenderPoolTable(stats, "  ");
  text += RenderCudaPools(stats);
  Print(text);
  return {};
}

Status HealthCommand(const GlobalOptions& options, const std::string& service) {
  const std::string socket_path = SocketPathOf(options);
  auto status = CheckHealth(socket_path, service);
  if (!status) return std::unexpected(ExplainConnectError(status.error(), socket_path));
  const std::string_view name = ServingStatusName(*status);
  if (options.json) {
    JsonObject().Set("status", name).Print();
  } else {
    Print(fmt::format("{}\n", name));
  }
  if (*status != ServingStatus::kServing) {
    return UnavailableError(
        fmt::format("{} at {} is {}", service.empty() ? "hurrayd" : service, socket_path, name));
  }
  return {};
}

Status WatchCommand(const GlobalOptions& options, std::string_view prefix) {
  // SIGUSR1 is how the stream's end wakes the sigwait below.
  HURRAY_ASSIGN_OR_RETURN(const sigset_t signals, BlockSignals({SIGINT, SIGTERM, SIGUSR1}));
  HURRAY_ASSIGN_OR_RETURN(const auto client, ConnectClient(options));

  std::mutex mutex;
  std::optional<Status> end;  // Guarded by `mutex`; set once the stream ends.
  const bool json = options.json;
  auto on_event = [json](const WatchEvent& event) {
    if (json) {
      (void)PrintJson(ToJson(event));
    } else {
      Print(fmt::format("{} {} {} version {}\n", FormatTimestamp(UnixNanosNow()),
                        WatchKindLabel(event.kind), event.name, event.version));
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
  auto watch = client->Watch(prefix, on_event, on_end);
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
    JsonObject()
        .Set("name", name)
        .Set("version", version)
        .Set("versions_deleted", std::uint64_t{*deleted})
        .Print();
    return {};
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
  HURRAY_ASSIGN_OR_RETURN(const auto client, ConnectClient(options));
  const double interval_seconds = std::chrono::duration<double>(interval).count();
  while (true) {
    HURRAY_ASSIGN_OR_RETURN(const DaemonStats stats, client->Stats());
    HURRAY_ASSIGN_OR_RETURN(const TensorListPage tensors, ListAll(*client, ""));
    HURRAY_RETURN_IF_ERROR(screen.Draw(
        RenderTopScreen(stats, tensors.tensors, UnixNanosNow(), interval_seconds, screen.Size())));
    HURRAY_ASSIGN_OR_RETURN(const bool quit, WaitForQuit(signal_fd.get(), interval));
    if (quit) return {};
  }
}

}  // namespace hurray::ctl
