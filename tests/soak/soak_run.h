// SoakRun: the soak itself. A real hurrayd, N producer and M consumer processes
// (hurray_soak_worker) for a duration, with random kill -9 of the clients (each replaced by
// a new process) and, with `daemon_kills`, of the daemon (restarted on the same directory
// and state). With `fast_path`, the consumers re-acquire one name after another in a tight
// loop (most acquires take the client library's fast path: no system call). It fails at
// the first of:
//   - a worker that saw a wrong byte or version number (exit 3), or failed otherwise;
//   - with `fast_path`: a stretch of kFastPathWindow (between two daemon kills, or from the
//     last one to the end) in which the consumers made no fast-path acquire;
//   - after a daemon restart, and at the end: a published-and-not-deleted tensor missing
//     or at another version, a deleted one still there, or any tensor whose bytes are wrong
//     (SoakLedger), or /dev/shm holding more of the daemons' segments than the first daemon
//     made (a restarted daemon must reclaim or adopt its predecessor's, not add its own);
//   - at the end, once everything is deleted: anything left in the pool (bytes,
//     allocations, leases, versions), or a daemon that does not stop cleanly.
//
// Not thread-safe: Run from the process's main thread (DaemonProcess, ChildProcess).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "hurray/error.h"

namespace hurray::soak {

struct SoakOptions {
  std::string hurrayd;  // The daemon binary.
  std::string worker;   // hurray_soak_worker.
  int producers = 4;
  int consumers = 4;
  std::chrono::seconds duration{60};
  // Mean time between two client kills (each interval is uniform in [0.5, 1.5] times it).
  std::chrono::milliseconds client_kill_interval{1000};
  // Kill -9 the daemon now and then, and restart it on the same directory.
  bool daemon_kills = false;
  std::chrono::milliseconds daemon_kill_interval{15000};
  std::uint64_t seed = 1;
  std::uint64_t pool_capacity_bytes = std::uint64_t{256} << 20;
  // Consumers that re-acquire in a tight loop, through the fast path.
  bool fast_path = false;
};

// With `fast_path`, the consumers must make fast-path acquires in every stretch of at least
// this long between two daemon kills (and from the last one to the end).
inline constexpr std::chrono::seconds kFastPathWindow{3};

// What a soak did; its figures.
struct SoakFigures {
  std::uint64_t publishes = 0;  // Acknowledged publishes.
  std::uint64_t deletes = 0;    // Acknowledged deletes.
  // What consumers reported (every 50 views; a killed one's last views go uncounted):
  std::uint64_t views_checked = 0;       // Views checked byte for byte.
  std::uint64_t fast_path_acquires = 0;  // Of those, acquired through the fast path.
  std::uint64_t bytes_checked = 0;       // Bytes checked, held views' rechecks included.
  std::uint64_t client_kills = 0;
  std::uint64_t daemon_kills = 0;
  std::uint64_t ledger_checks = 0;    // Full checks of the daemon against the ledger.
  std::uint64_t tensors_checked = 0;  // Tensors those checks read byte for byte.
};

// Runs the soak. OK with its figures, or the first failure (INTERNAL, DATA_LOSS for a
// wrong byte or a lost tensor), naming what went wrong with the worker's or daemon's log.
[[nodiscard]] Result<SoakFigures> RunSoak(const SoakOptions& options);

// "30 s, 4 producers, 4 consumers: 1234 publishes, ...".
[[nodiscard]] std::string DescribeSoak(const SoakOptions& options, const SoakFigures& figures);

}  // namespace hurray::soak
