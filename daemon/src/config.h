// hurrayd's configuration: embedded defaults, a TOML file, then command-line flags, each
// overriding the one before, every value checked as it is read. Plain values; thread-safe
// once built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "access/access_policy.h"
#include "hurray/error.h"
#include "hurray/pool_name.h"
#include "journal/journal_sync.h"
#include "logging.h"
#include "pool/huge_pages.h"
#include "registry/uid_quota_table.h"

namespace hurray::daemon {

struct Config {
  // The gRPC unix socket; the session socket is this path + ".session".
  std::string socket_path;
  // Also serve gRPC on this TCP address ("127.0.0.1:7470"; ParseTcpAddress); empty: unix
  // socket only. A host that is not loopback is allowed, with a warning (ConfigWarnings).
  std::string tcp_address;
  // trace, debug, info, warn, error, critical or off.
  std::string log_level = "info";
  // text, or json (one object per line; logging.h). Under systemd's journal, either without
  // timestamps of its own.
  LogFormat log_format = LogFormat::kText;

  // Permission bits (at most 0777) of the gRPC socket, of the session socket, and of the
  // sockets' directory when the daemon creates it.
  std::uint32_t socket_mode = 0660;
  std::uint32_t session_socket_mode = 0660;
  std::uint32_t socket_directory_mode = 0755;

  struct CpuPool {
    std::uint64_t capacity_bytes = 0;  // 0 until defaults are applied.
    std::uint64_t segment_bytes = 0;   // 0: one segment of the whole capacity.
    std::uint64_t page_size = 4096;    // Raised to the huge page size when huge pages are on.
    std::string shm_prefix = "hurray";
    // off, transparent, explicit or auto; Daemon::Start resolves auto (ChooseHugePages).
    HugePages huge_pages = HugePages::kOff;
    // Patterns of the tensor names it may hold (access/namespace_pattern.h); empty: any.
    std::vector<std::string> namespaces;
  } cpu_pool;

  // The CUDA pools: one per device the NVIDIA driver shows the daemon (cuda:0, cuda:1, ...),
  // each of slabs of device memory made on demand.
  struct CudaPool {
    // False: no CUDA pools, even where there are devices.
    bool enabled = true;
    // Most bytes of slabs per device; 0: half of each device's memory (the daemon shares
    // the GPU with the processes that compute on it). At most the device's memory.
    std::uint64_t capacity_bytes = 0;
    // Bytes of a slab, rounded up to the device's allocation granularity (2 MiB); above 0.
    // Large: a process imports each slab it uses once, so fewer, larger slabs mean fewer
    // imports; the cost is up to one slab per device held while partly empty.
    std::uint64_t slab_bytes = std::uint64_t{2} << 30;
    // How long a slab stays empty before it is returned to the device, in milliseconds.
    std::uint32_t idle_slab_release_ms = 60'000;
    // Patterns of the tensor names every CUDA pool may hold; empty: any.
    std::vector<std::string> namespaces;
  } cuda_pool;

  // The sealed pool ("sealed"; SealedPool): one memfd per tensor buffer, sealed against
  // writes at publish, for immutability the kernel enforces, at a higher cost per tensor.
  struct SealedPool {
    // Most bytes of its live buffers, each rounded up to 4096; 0: no sealed pool.
    std::uint64_t capacity_bytes = 0;
    // Most live buffers (each holds one of the daemon's descriptors); at least 1.
    std::uint32_t max_buffers = 16'384;
    // Patterns of the tensor names it may hold (access/namespace_pattern.h); empty: any.
    std::vector<std::string> namespaces;
  } sealed_pool;

  // The fast path (the [fast_path] table): consumers acquire and release versions they mapped
  // before with no system call (ipc/include/hurray/ipc/fast_path_layout.h).
  struct FastPath {
    // False: no directory and no lease pages; every acquire takes the socket.
    bool enabled = true;
    // Names that may have a directory entry at once (32 bytes each); 1 to 2^24.
    std::uint32_t directory_entries = 65'536;
    // Slots of each session's lease page; 1 to 512. Each counts as a lease of the uid.
    std::uint32_t lease_slots = 64;
    // How often versions kept by a lease slot are scanned for again, in milliseconds.
    std::uint32_t rescan_interval_ms = 1;
    // The most directory entries the names of one publisher uid may hold; 0: no limit.
    // Below directory_entries, one uid cannot take every entry.
    std::uint32_t max_entries_per_uid = 32'768;
  } fast_path;

  // Most bytes one session may hold in unpublished allocations; 0: no limit.
  std::uint64_t session_quota_bytes = 0;
  // Most session-socket connections open at once, hello or not (more are refused with
  // RESOURCE_EXHAUSTED); 0: no limit.
  std::uint32_t max_sessions = 4096;
  // Most session-socket connections open at once from processes of one uid; 0: no limit.
  std::uint32_t max_sessions_per_uid = 1024;
  // How long a new session-socket connection may take to send its hello, in milliseconds;
  // 0: forever.
  std::uint32_t hello_timeout_ms = 5000;
  // How long a session-socket request frame may take to arrive whole once its first bytes
  // came, in milliseconds; 0: forever.
  std::uint32_t frame_timeout_ms = 10'000;
  // Most gRPC connections open at once, on the unix socket and tcp_address together (more
  // are closed as they arrive); 0: no limit.
  std::uint32_t max_grpc_connections = 4096;
  // Most gRPC connections open at once from processes of one uid (SO_PEERCRED; every TCP
  // client together counts as one uid); 0: no limit.
  std::uint32_t max_grpc_connections_per_uid = 1024;
  // Descriptors of RLIMIT_NOFILE (raised to its hard limit at start) that no connection, on
  // either socket, may take: kept for the journal, the segments and the descriptors the
  // session socket sends. 0: none kept.
  std::uint32_t reserved_descriptors = 128;
  // The most each uid may hold over all its sessions (the [uid_quota] table: pending_bytes,
  // published_bytes, leases); 0 in a field: no limit.
  UidQuota uid_quota;
  // Longest acquire wait a client may ask for, in milliseconds.
  std::uint32_t max_wait_ms = 3'600'000;
  // Largest gRPC message accepted, in bytes.
  std::uint32_t max_message_bytes = 4u << 20;
  // Most names (and prefixes) one BatchAcquire may list; at least 1.
  std::uint32_t max_batch_names = 100'000;
  // Most acquires the sessions of one uid may have waiting at once; 0: no limit.
  std::uint32_t max_waits_per_uid = 4096;
  // Most events a Watch stream may have queued for a slow reader before it is ended with
  // RESOURCE_EXHAUSTED; at least 1.
  std::uint32_t watch_queue_length = 65'536;
  // Most bytes of events a Watch stream may have queued for a slow reader before it is
  // ended with RESOURCE_EXHAUSTED; at least 1.
  std::uint64_t watch_queue_bytes = std::uint64_t{1} << 20;
  // Most Watch streams open at once; 0: no limit.
  std::uint32_t max_watchers = 256;
  // Most Watch streams open at once by one uid (the uid of the connection; every TCP client
  // together counts as one); 0: no limit.
  std::uint32_t max_watchers_per_uid = 32;
  // Threads that run the daemon's event loop (the session socket's connections, acquire-wait
  // timers, signals); from 1 to kMaxIoThreads.
  std::uint32_t io_threads = 2;
  // How long a stopping daemon lets gRPC calls in flight finish before it cancels them, in
  // milliseconds.
  std::uint32_t shutdown_grace_ms = 2000;

  // A model file the daemon imports at start-up (a [[preload]] table), published all at once
  // under `prefix` by the daemon's own session (daemon/src/preload/preloader.h).
  struct Preload {
    // A .safetensors file, a *.safetensors.index.json or a .hrry file; not empty.
    std::string path;
    // Prepended to each tensor's name in the file: empty, or the start of a tensor name
    // ("llama/", "org/llama/v1-"; ValidatePreloadPrefix).
    std::string prefix;
    // The CPU pool to allocate in.
    std::string pool = std::string(kDefaultPoolName);
    // True: a file that cannot be imported stops the daemon. False: it is logged and skipped.
    bool required = true;
  };
  // In the file's order; imported one after the other.
  std::vector<Preload> preload;

  // The group both sockets (and the sockets' directory, when the daemon creates it) get, so
  // that its members may connect (with socket_mode's group bits); empty: the daemon's own
  // group. The daemon must be in it (or root): Daemon::Start refuses otherwise.
  std::string socket_group;

  // Serve Prometheus metrics over HTTP (GET /metrics) on this TCP address ("127.0.0.1:9470";
  // ParseMetricsAddress); empty: off. A host that is not loopback is allowed, with a warning:
  // the metrics name tensors and pools.
  std::string metrics_address;

  // The [[namespace]] access rules, in the file's order (access/access_policy.h: the first
  // whose pattern matches decides; none: the default first-publisher policy).
  std::vector<AccessPolicy::RuleSpec> namespace_rules;
  // Where the journal lives (journal/tensor_journal.h): the tensors published and their
  // segments, which a restarted daemon adopts. Default: $STATE_DIRECTORY (systemd's
  // StateDirectory=), else $XDG_STATE_HOME/hurray, else $HOME/.local/state/hurray
  // (DefaultStateDirectory). One daemon per directory: a second one refuses to start.
  std::string state_directory;
  // When journal records reach the disk: "none" (never fdatasync: the default, since the
  // CPU tensors it records live in /dev/shm, which a machine crash empties anyway), "batch"
  // (at most one fdatasync per 100 ms) or "always" (fdatasync, shared by every publish
  // waiting at that moment, before each publish or delete is acknowledged). A kill of the
  // daemon loses nothing under any of them; see JournalSync.
  JournalSync journal_sync = JournalSync::kNone;
};

inline constexpr std::uint32_t kMaxIoThreads = 1024;
// Bounds of [fast_path]'s directory_entries and lease_slots (fast_path::DirectorySegment's
// kMaxEntries, fast_path::LeasePage's kMaxSlots).
inline constexpr std::uint32_t kMaxDirectoryEntries = std::uint32_t{1} << 24;
inline constexpr std::uint32_t kMaxLeaseSlots = 512;

// Embedded defaults: the socket location rule (hurray/ipc/socket_path.h) and a CPU pool sized
// for this machine (DefaultCpuPoolCapacity).
[[nodiscard]] Config DefaultConfig();

// `base` with the settings of a TOML document applied. INVALID_ARGUMENT naming the key for
// an unknown key, a wrong type or a bad value.
[[nodiscard]] Result<Config> ApplyToml(Config base, std::string_view toml_text,
                                       std::string_view source_name);

// Reads and applies a TOML file; NOT_FOUND when it cannot be read.
[[nodiscard]] Result<Config> ApplyTomlFile(Config base, const std::string& path);

// What hurrayd's command line asks for.
struct Invocation {
  // Defaults, then the file of --config, then the flags.
  Config config;
  // Set for --help (the usage), --print-config (ToToml of `config`) and --check-config (the
  // access policy in words): print it and exit instead of serving.
  std::optional<std::string> output;
  // --discard-state: remove the state directory's journal and segments instead of serving.
  bool discard_state = false;
};

// The access policy `config` describes, for a daemon running as the effective uid: its
// rules and the pools' namespaces, user and group names resolved now. INVALID_ARGUMENT
// naming the key ("namespace[0].read[1]: ...").
[[nodiscard]] Result<AccessPolicy> MakeAccessPolicy(const Config& config);

// Parses hurrayd's command line (argv[0] is the program) and builds the configuration it
// names. INVALID_ARGUMENT naming the flag for an unknown flag, a missing value or a bad
// value; the errors of ApplyTomlFile for the --config file.
[[nodiscard]] Result<Invocation> LoadConfig(int argc, const char* const* argv);

// "4GiB", "512MiB", "64M", "1048576": a size in bytes. INVALID_ARGUMENT otherwise.
[[nodiscard]] Result<std::uint64_t> ParseByteSize(std::string_view text);

// "0660", "755": permission bits in octal, at most 0777. INVALID_ARGUMENT otherwise.
[[nodiscard]] Result<std::uint32_t> ParseFileMode(std::string_view text);

// OK when `prefix` is empty or the start of a tensor name: a namespace and its '/', then
// optionally more of a name ("llama/", "llama/layers.", "org/llama/v1-"), so that prefix +
// "x" is a valid tensor name. INVALID_ARGUMENT naming `field` and the value otherwise.
[[nodiscard]] Status ValidatePreloadPrefix(std::string_view prefix, std::string_view field);

// What in `config` is allowed but risky, one line each, for --check-config and the log at
// start: a tcp_address or metrics_address that is not loopback, and a pool that holds
// namespaces whose [[namespace]] read rules differ (a pool is one trust domain).
[[nodiscard]] std::vector<std::string> ConfigWarnings(const Config& config);

// The effective configuration as a TOML document (hurrayd --print-config).
[[nodiscard]] std::string ToToml(const Config& config);

}  // namespace hurray::daemon
