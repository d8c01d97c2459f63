// hurrayd: parse the configuration, start the daemon, serve until told to stop.
#include <cstdio>

#include "config.h"
#include "daemon.h"

namespace {

int Fail(const hurray::Error& error) {
  std::fprintf(stderr, "hurrayd: %s\n", error.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  auto invocation = hurray::daemon::LoadConfig(argc, argv);
  if (!invocation) return Fail(invocation.error());
  if (const std::optional<std::string>& output = invocation->output) {
    return std::fputs(output->c_str(), stdout) < 0 ? 1 : 0;
  }
  if (invocation->discard_state) {
    auto discarded = hurray::daemon::Daemon::DiscardState(invocation->config);
    if (!discarded) return Fail(discarded.error());
    return std::fputs(discarded->c_str(), stdout) < 0 ? 1 : 0;
  }
  auto daemon = hurray::daemon::Daemon::Start(std::move(invocation->config));
  if (!daemon) return Fail(daemon.error());
  if (auto waited = (*daemon)->Wait(); !waited) return Fail(waited.error());
  return 0;
}
