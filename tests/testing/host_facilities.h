// What some tests need of the machine beyond a kernel and root, asked of the machine itself,
// so that a test whose facility is missing skips saying which (as a GPU test does without a
// GPU) instead of failing for a reason that is not the product's. A chroot, such as a fresh
// debootstrap root, lacks both: its / is not a mount point and /dev/pts is not mounted.
//
// Thread-safe: each call asks again and keeps nothing.
#pragma once

#include <optional>
#include <string>

namespace hurray::testing {

// Why this process cannot open a pseudo-terminal (tmux, script(1) and every terminal test
// need one), or nullopt when it can.
[[nodiscard]] std::optional<std::string> WhyNoPseudoTerminal();

// Why `unshare --mount --propagation private` cannot make a private mount namespace here
// (it needs root, and a / that is a mount point), or nullopt when it can.
[[nodiscard]] std::optional<std::string> WhyNoPrivateMountNamespace();

}  // namespace hurray::testing
