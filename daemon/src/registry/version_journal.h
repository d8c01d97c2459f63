// VersionJournal: what the registry tells the daemon's journal about published versions, in
// the journal's own records (journal/journal_record.h), which the registry builds; the
// journal knows nothing of the registry.
#pragma once

#include <cstdint>
#include <string>

#include "hurray/error.h"
#include "journal/journal_record.h"

namespace hurray::daemon {

// The registry calls RecordPublish and RecordRemoval with its mutex held, and Commit after
// it released it, before it acknowledges the publish or the delete they describe, so that
// whatever a client was told survives a crash of the daemon.
// Implementations must not call back into the registry.
class VersionJournal {
 public:
  virtual ~VersionJournal() = default;

  // The version `record` describes (a kPublish record: its name, number, uids and stored
  // TensorInfo with its pool and buffers) is about to be published and to supersede the
  // name's earlier versions. An error refuses the publish (the allocation stays pending);
  // its message says why the journal could not record it.
  [[nodiscard]] virtual Status RecordPublish(const JournalRecord& record) = 0;

  // Version `number` of `name` was deleted (or evicted): a restarted daemon must not serve it.
  // Failures are logged: the delete goes ahead.
  virtual void RecordRemoval(const std::string& name, std::uint64_t number) = 0;

  // The memory of version `number` of `name` went back to its pool. Until then a version
  // that RecordPublish superseded or RecordRemoval removed keeps its memory in the journal's
  // eyes (a lease, a lease page or a client of an earlier daemon may map it), so that a
  // restarted daemon that adopts the segments reuses none of it while such a client lives.
  // Failures are logged.
  virtual void RecordFreed(const std::string& /*name*/, std::uint64_t /*number*/) {}

  // Makes what was recorded so far as durable as the journal's policy says (an fdatasync, or
  // nothing). Called without the registry's mutex, before the acknowledgement; what
  // RecordPublish returned already survives a kill -9 of the daemon. An error: the records
  // may not survive a crash of the machine.
  [[nodiscard]] virtual Status Commit() { return {}; }
};

// The VersionJournal of a journal that has these four calls but does not derive from it
// (TensorJournal, which knows nothing of the registry). `journal` must outlive it.
template <typename Journal>
class VersionJournalOf final : public VersionJournal {
 public:
  explicit VersionJournalOf(Journal& journal) : journal_(journal) {}

  [[nodiscard]] Status RecordPublish(const JournalRecord& record) override {
    return journal_.RecordPublish(record);
  }
  void RecordRemoval(const std::string& name, std::uint64_t number) override {
    journal_.RecordRemoval(name, number);
  }
  void RecordFreed(const std::string& name, std::uint64_t number) override {
    journal_.RecordFreed(name, number);
  }
  [[nodiscard]] Status Commit() override { return journal_.Commit(); }

 private:
  Journal& journal_;
};

}  // namespace hurray::daemon
