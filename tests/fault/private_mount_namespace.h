// A private mount namespace kept alive by a holder process, so that a daemon killed and
// started again (through nsenter) finds the same mounts: the fault tests mount a small
// tmpfs in one (a journal's disk, a /dev/shm) and run hurrayd in it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "testing/child_process.h"

namespace hurray::fault {

class PrivateMountNamespace {
 public:
  // Runs `/bin/sh -c setup sh args...` in a new private mount namespace (unshare). `setup`
  // mounts what it needs, prints "mounted" and then execs a process that waits until killed
  // (e.g. `exec sleep 100000`): that process holds the namespace. UNAVAILABLE, with what the
  // script printed instead, when it does not print "mounted" within a minute.
  [[nodiscard]] static Result<PrivateMountNamespace> Start(const std::string& setup,
                                                           const std::vector<std::string>& args);

  // The prefix that runs a command in this namespace: nsenter --mount=/proc/<holder>/ns/mnt.
  [[nodiscard]] std::vector<std::string> EnterCommand() const;

  // Where this process sees the namespace's root (/proc/<holder>/root): its own mounts.
  [[nodiscard]] std::string Root() const;

  // Writes an executable script at `path` that execs `binary "$@"` in this namespace (the
  // script's pid becomes the binary's): a DaemonProcess binary that runs in the namespace.
  [[nodiscard]] Status WriteWrapper(const std::string& path, const std::string& binary) const;

  // Runs `command...` in this namespace to its end; its stdout. INTERNAL when it cannot be
  // started, does not end within a minute, or exits other than 0.
  [[nodiscard]] Result<std::string> Run(const std::vector<std::string>& command) const;

 private:
  explicit PrivateMountNamespace(testing::ChildProcess holder) : holder_(std::move(holder)) {}

  testing::ChildProcess holder_;
};

}  // namespace hurray::fault
