// The names and contents of the soak's tensors: every byte a function of the tensor's name
// and version, so that a consumer (or the soak's own checks after a daemon restart) can
// tell any stale, misplaced or overwritten byte. Pure functions; thread-safe.
//
// A producer incarnation owns the names "soak/p<producer>-<incarnation>/t<slot>-<generation>":
// nobody else publishes under them, a deleted name is never published again (the slot moves
// to its next generation), so the producer knows each version number before it publishes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hurray::soak {

// The prefix of every soak tensor.
inline constexpr std::string_view kSoakPrefix = "soak/";

[[nodiscard]] std::string SoakName(std::uint64_t producer, std::uint64_t incarnation,
                                   std::uint64_t slot, std::uint64_t generation);

// Bytes of version `version` of `name`: between 4 KiB and 68 KiB, not page multiples.
[[nodiscard]] std::uint64_t SoakByteSize(std::string_view name, std::uint64_t version);

// Writes the contents of version `version` of `name` into its one buffer.
void FillSoakTensor(std::span<std::byte> buffer, std::string_view name, std::uint64_t version);

// Empty when `buffer` is exactly version `version` of `name` (size included); otherwise
// says what differs.
[[nodiscard]] std::string CheckSoakTensor(std::span<const std::byte> buffer, std::string_view name,
                                          std::uint64_t version);

}  // namespace hurray::soak
