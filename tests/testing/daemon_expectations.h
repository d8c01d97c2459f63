// Expectations on a DaemonProcess (daemon_process.h), for GoogleTest tests.
#pragma once

#include <gtest/gtest.h>

#include "testing/daemon_process.h"
#include "testing/status_matchers.h"

namespace hurray::testing {

// Stops `daemon` (SIGTERM) and expects a clean end: its segments existed while it ran (or
// the check that none is left proves nothing), it exits 0, and it leaves no socket file and
// no segment behind (DaemonProcess::Stop). No-op when it was already stopped.
inline void ExpectStopsCleanly(DaemonProcess& daemon) {
  if (daemon.stopped()) return;
  EXPECT_FALSE(daemon.Segments().empty())
      << "no /dev/shm/" << daemon.shm_prefix() << "-* segment while running";
  EXPECT_OK(daemon.Stop());
}

}  // namespace hurray::testing
