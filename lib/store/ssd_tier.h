#pragma once
/// The SSD tier: chunk slots in preallocated data files of a store directory, moved with
/// O_DIRECT aligned I/O through an IoBackend (io_uring or pread/pwrite). Where O_DIRECT
/// is refused (EINVAL, e.g. tmpfs) it falls back to buffered I/O and records it.

#include <memory>
#include <string>
#include <vector>

#include "lib/store/io_backend.h"
#include "lib/store/store_dir.h"
#include "lib/store/tier.h"

namespace cb::store {

/// A file-backed tier.
class SsdTier final : public Tier {
 public:
  /// Opens the data files of `info` in `dir`, preallocating them to their size; `create`:
  /// a new store, whose files are made, never over an existing file (else a missing one is an
  /// error: the store is damaged). Throws cb::Error on ENOSPC, permissions or other start-up
  /// failures, with the files it made removed.
  SsdTier(const std::string& dir, const StoreDirInfo& info, std::shared_ptr<IoBackend> io,
          bool try_direct, bool create);
  ~SsdTier() override;

  bool write(ChunkIo* ops, size_t n) override;
  bool read(ChunkIo* ops, size_t n) override;
  bool sync(const std::vector<uint64_t>& slots, std::string* error = nullptr) override;
  /// "DIR/data_N.cbd at byte OFFSET": the data file holding `slot`, and where in it.
  std::string locate(uint64_t slot) const override;
  std::string describe() const override;
  bool degraded() const override { return direct_refused_; }

  /// Whether data files are open with O_DIRECT.
  bool direct_io() const { return direct_; }
  /// Why O_DIRECT is off ("" when on or not requested).
  const std::string& direct_io_note() const { return direct_note_; }
  /// The I/O backend's name.
  std::string backend_name() const { return io_->name(); }

 private:
  /// Opens data file `i` into fds_ (made first, exclusively, when `create`; its path then
  /// appended to `made`) and preallocates it; throws cb::Error naming the file.
  void open_data_file(uint64_t i, bool create, std::vector<std::string>* made);
  bool transfer(ChunkIo* ops, size_t n, bool write);
  void probe_direct();

  std::string dir_;
  StoreDirInfo info_;
  std::shared_ptr<IoBackend> io_;
  std::vector<int> fds_;
  bool direct_ = false;
  bool direct_refused_ = false;  // asked for, refused by the file system
  std::string direct_note_;
};

}  // namespace cb::store
