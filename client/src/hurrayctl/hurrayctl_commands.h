// The commands of hurrayctl. Each connects to the daemon (a Client, or for the replies ls,
// describe, stats and watch print, the client module's calls behind it), does its work and
// prints its result to stdout: text for people, or with `json` one JSON document (protobuf's
// JSON mapping with proto field names for daemon replies). Errors are returned, never
// printed; the caller reports them. When no daemon answers at the socket (none there, or
// nobody listening), the error is UNAVAILABLE with a message that names the socket tried and
// says how to start hurrayd or point at another socket. Not thread-safe: the commands write to
// stdout, and WatchCommand changes the process's signal mask.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::ctl {

struct GlobalOptions {
  // The daemon's gRPC socket; empty: $HURRAY_SOCKET or the default (hurray/ipc/socket_path.h).
  std::string socket_path;
  // Print JSON instead of text.
  bool json = false;
};

// `ls [PREFIX]`: every published name under `prefix` (all pages) with its latest version:
// a table NAME VERSION TYPE SHAPE SIZE LEASES PUBLISHED (an age: "3m 07s ago"), or the pages
// merged into one hurray.v1.ListResponse.
[[nodiscard]] Status ListCommand(const GlobalOptions& options, std::string_view prefix);

// `describe NAME [--version N]`: one version (0: the latest) with its descriptor, buffer
// locations and the name's live versions (with their ages); or the hurray.v1.DescribeResponse.
[[nodiscard]] Status DescribeCommand(const GlobalOptions& options, std::string_view name,
                                     std::uint64_t version);

// `stats`: pools (capacity, used, largest free range, fragmentation), sessions, leases and
// tensors; or the hurray.v1.StatsResponse.
[[nodiscard]] Status StatsCommand(const GlobalOptions& options);

// `health [SERVICE]`: the daemon's grpc.health.v1 status for `service` ("": the daemon as a
// whole; "hurray.v1.Exchange"): SERVING, NOT_SERVING (starting, preloading, stopping), or
// {"status": ...}. UNAVAILABLE when it is not SERVING, so that a probe's exit status says it
// (exec probes, scripts); NOT_FOUND for a service the daemon does not have.
[[nodiscard]] Status HealthCommand(const GlobalOptions& options, const std::string& service);

// `watch [PREFIX]`: prints one line per publish or delete under `prefix` (with `json`, one
// hurray.v1.WatchEvent object per line), flushed at once, until SIGINT or SIGTERM (OK) or
// until the daemon ends the stream (OK, or the stream's error). Blocks SIGINT, SIGTERM and
// SIGUSR1 in the calling thread before connecting, so that every client thread inherits the
// mask and the signals reach this call's sigwait.
[[nodiscard]] Status WatchCommand(const GlobalOptions& options, std::string_view prefix);

// `top [--interval D]`: a live view of the daemon (RenderTopScreen: pools, tensors newest
// first, sessions, leases) on the terminal's alternate screen, redrawn in place every
// `interval` (or at once on a key) until q, Q or Ctrl-C is typed or SIGINT, SIGTERM or SIGHUP
// arrives; the terminal is restored either way. FAILED_PRECONDITION when stdout or stdin is
// not a terminal; a failing call to the daemon ends it with that error (terminal restored).
// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, as watch does.
[[nodiscard]] Status TopCommand(const GlobalOptions& options, std::chrono::milliseconds interval);

// `rm NAME [--version N]`: deletes one version, or every version when `version` is 0.
// Prints how many were deleted, or {"name", "version", "versions_deleted"}. Every JSON object
// these commands build themselves (rm, put, get, import, save, load) has its keys in sorted
// order; daemon replies keep protobuf's field-number order. Either way two runs print the
// same keys in the same order.
[[nodiscard]] Status RemoveCommand(const GlobalOptions& options, std::string_view name,
                                   std::uint64_t version);

// What put, get, import, save and load are told beyond the global options.
struct TransferFlags {
  // No progress line. (Off a terminal there is none anyway.)
  bool quiet = false;
};

// `put NAME FILE.npy`: reads the .npy header, allocates a dense tensor of its type and shape
// in `pool`, reads the file's data straight into the tensor's buffer and publishes it.
// On a terminal (stderr), without `quiet` and for 64 MiB of data or more, a progress line on
// stderr while it reads. Prints the name and version, or {"bytes", "name", "version"}.
// INVALID_ARGUMENT (naming the file) for a file that is not a supported .npy file;
// errno-derived codes for I/O errors.
[[nodiscard]] Status PutCommand(const GlobalOptions& options, const TransferFlags& flags,
                                std::string_view name, const std::string& path,
                                std::string_view pool);

// `get NAME FILE.npy [--version N] [--wait MS]`: acquires the tensor (waiting up to `wait`
// for it to be published) and writes a .npy header followed straight by the tensor's
// buffer. FAILED_PRECONDITION for tensors a .npy file cannot hold: not dense row-major,
// quantized, not on the CPU, or of a type without a NumPy dtype. The file is created or
// truncated only once the tensor was acquired and checked, and removed if writing fails
// (unless it is not a regular file: FILE may be /dev/stdout or a pipe). A progress line as
// put's while it writes. Prints the name, version and file, or
// {"bytes", "file", "name", "version"}.
[[nodiscard]] Status GetCommand(const GlobalOptions& options, const TransferFlags& flags,
                                std::string_view name, const std::string& path,
                                std::uint64_t version, std::chrono::milliseconds wait);

// `import FILE|INDEX.json --prefix P [--pool P]`: ImportTensorFile of a .safetensors file or
// a sharded model's *.safetensors.index.json, every tensor published at once under
// prefix + its name. On a terminal (stderr) and without `quiet`, a progress line on stderr
// while the bytes move. Prints "imported N tensors (SIZE) in S s, R GB/s under PREFIX", or
// the summary {"bytes", "file", "gb_per_s", "prefix", "seconds", "tensors"} (GB: 10^9 bytes).
[[nodiscard]] Status ImportCommand(const GlobalOptions& options, const TransferFlags& flags,
                                   const std::string& path, const std::string& prefix,
                                   const std::string& pool);

// `save PREFIX FILE`: SaveTensors: every tensor under `prefix`, leased together, written to
// the .hrry file FILE under its full name. Progress and output as import's ("saved ...").
[[nodiscard]] Status SaveCommand(const GlobalOptions& options, const TransferFlags& flags,
                                 const std::string& prefix, const std::string& path);

// `load FILE [--prefix P] [--pool P]`: ImportTensorFile of a .hrry file (INVALID_ARGUMENT for
// a FILE not named *.hrry), its tensors published at once under prefix + their saved names.
// Progress and output as import's ("loaded ...").
[[nodiscard]] Status LoadCommand(const GlobalOptions& options, const TransferFlags& flags,
                                 const std::string& path, const std::string& prefix,
                                 const std::string& pool);

}  // namespace hurray::ctl
