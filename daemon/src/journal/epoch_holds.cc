#include "journal/epoch_holds.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon {

Result<EpochHolds> EpochHolds::Open(const OwnedDirectory& directory, std::uint64_t epoch) {
  const std::string own = fmt::format("{}{}", kFilePrefix, epoch);
  HURRAY_ASSIGN_OR_RETURN(std::vector<std::string> names, directory.ListNames(kFilePrefix));
  std::erase(names, own);
  // Read-only: a client's descriptor can neither write the file nor grow it.
  HURRAY_ASSIGN_OR_RETURN(UniqueFd hold,
                          directory.OpenFile(own, O_RDONLY | O_CREAT | O_EXCL, 0600));
  EpochHolds holds(directory, std::make_shared<const UniqueFd>(std::move(hold)), std::move(names));
  holds.Recheck();
  return holds;
}

bool EpochHolds::Recheck() {
  std::erase_if(earlier_, [this](const std::string& name) {
    if (Held(name)) return false;
    if (Status removed = directory_->RemoveFile(name); !removed) {
      spdlog::warn("{}", removed.error().message());
    }
    return true;
  });
  return earlier_held();
}

bool EpochHolds::Held(const std::string& name) {
  Result<UniqueFd> file = directory_->OpenFile(name, O_RDONLY | O_NONBLOCK);
  if (!file && file.error().code() == StatusCode::kNotFound) return false;
  int failed = 0;
  if (file && ::fcntl(file->get(), F_SETLEASE, F_WRLCK) == 0) {
    (void)::fcntl(file->get(), F_SETLEASE, F_UNLCK);
    return false;
  }
  if (file) failed = errno;
  if (file && (failed == EAGAIN || failed == EBUSY)) return true;  // Open elsewhere.
  if (std::ranges::find(warned_, name) == warned_.end()) {
    warned_.push_back(name);
    spdlog::warn(
        "cannot tell whether clients of an earlier hurrayd still hold {}: {}; the memory they "
        "may map stays out of use",
        directory_->PathOf(name),
        file ? ErrnoError("fcntl(F_SETLEASE)", directory_->PathOf(name), failed).message()
             : file.error().message());
  }
  return true;
}

}  // namespace hurray::daemon
