#pragma once
// Helpers for the store tests: deterministic KV contents, save/load round trips, scratch dirs.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/store/attention_store.h"
#include "lib/store/io_backend.h"
#include "tests/support/test_paths.h"

namespace cb::store::testing {

/// An IoBackend that holds every write back while closed, so a save stays in flight as long
/// as a test needs; hold_syncs() holds only the data syncs (a save's writes are done, its
/// commit waits), hold_reads() only the reads; open() lets everything through.
class GatedIo final : public IoBackend {
 public:
  explicit GatedIo(std::shared_ptr<IoBackend> inner) : inner_(std::move(inner)) {}
  void close() {
    std::lock_guard<std::mutex> g(mu_);
    open_ = false;
  }
  void hold_syncs() {
    std::lock_guard<std::mutex> g(mu_);
    syncs_open_ = false;
  }
  void hold_reads() {
    std::lock_guard<std::mutex> g(mu_);
    reads_open_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> g(mu_);
    open_ = syncs_open_ = reads_open_ = true;
    cv_.notify_all();
  }
  void submit(IoOp* ops, size_t n) override {
    bool writes = false, reads = false;
    for (size_t i = 0; i < n; ++i) (ops[i].write ? writes : reads) = true;
    if (writes || reads) {
      std::unique_lock<std::mutex> g(mu_);
      const auto go = [&] { return (!writes || open_) && (!reads || reads_open_); };
      if (!go()) {
        ++held_;
        cv_.notify_all();
        cv_.wait(g, go);
        --held_;
      }
    }
    inner_->submit(ops, n);
  }
  /// Blocks until some I/O is held at the gate.
  void wait_until_held() {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait(g, [&] { return held_ > 0; });
  }
  int sync(int fd) override {
    {
      std::unique_lock<std::mutex> g(mu_);
      cv_.wait(g, [&] { return syncs_open_; });
    }
    return inner_->sync(fd);
  }
  std::string name() const override { return "gated(" + inner_->name() + ")"; }

 private:
  std::shared_ptr<IoBackend> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true, syncs_open_ = true, reads_open_ = true;
  int held_ = 0;  ///< reads and writes waiting at the gate
};

/// Bytes written to the SSD tier so far.
inline uint64_t ssd_written(const AttentionStore& st) {
  return st.stats().get(TierKind::Ssd, TierCounter::BytesWritten);
}

/// The tier holding `s` (Hbm, with a failed expectation, when it is not stored).
inline TierKind where(const AttentionStore& st, SessionId s) {
  TierKind t = TierKind::Hbm;
  EXPECT_TRUE(st.where(s, &t)) << s;
  return t;
}

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb3fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/// K (kv=0) or V (kv=1) bytes of `layer` for tokens at original `positions`.
inline std::vector<char> layer_bytes(uint64_t seed, const EntryShape& shape, int layer, int kv,
                                     const std::vector<int64_t>& positions) {
  std::vector<char> out(positions.size() * shape.token_bytes);
  for (size_t i = 0; i < positions.size(); ++i) {
    uint64_t h =
        mix(seed * 1000003u + static_cast<uint64_t>(layer) * 131u + static_cast<uint64_t>(kv) * 7u +
            static_cast<uint64_t>(positions[i]) * 0x9e37u);
    for (uint32_t j = 0; j < shape.token_bytes; ++j) {
      if (j % 8 == 0 && j > 0) h = mix(h + j);
      out[i * shape.token_bytes + j] = static_cast<char>(h >> ((j % 8) * 8));
    }
  }
  return out;
}

inline std::vector<int64_t> iota_positions(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  return p;
}

/// Token ids of session `s` at positions.
inline std::vector<TokenId> tokens_for(uint64_t seed, const std::vector<int64_t>& positions) {
  std::vector<TokenId> t;
  for (int64_t p : positions)
    t.push_back(static_cast<TokenId>(mix(seed + 17 * static_cast<uint64_t>(p)) % 32000));
  return t;
}

inline ModelFingerprint test_fp(const std::string& d = "test-model/4x64/f16") {
  return ModelFingerprint::from_description(d);
}

/// Saves an entry whose contents are layer_bytes(seed, ...); returns commit's result.
/// `created`: SaveRequest::created (NaN: kept from the entry it replaces, or now).
inline bool save_entry(AttentionStore& st, SessionId s, uint64_t seed, const EntryShape& shape,
                       const std::vector<int64_t>& positions,
                       KeyEncoding enc = KeyEncoding::PreRope,
                       const ModelFingerprint& fp = test_fp(), double ttl = -1,
                       double created = std::numeric_limits<double>::quiet_NaN()) {
  SaveRequest req{s, fp, enc, shape, tokens_for(seed, positions), ttl, created};
  SaveHandle h = st.begin_save(req);
  if (!h.ok()) return false;
  std::vector<std::vector<char>> bufs;
  for (int l = 0; l < shape.n_layers; ++l) {
    bufs.push_back(layer_bytes(seed, shape, l, 0, positions));
    bufs.push_back(layer_bytes(seed, shape, l, 1, positions));
  }
  for (int l = 0; l < shape.n_layers; ++l) {
    h.write_layer(l, LayerSource{bufs[2 * l].data(), bufs[2 * l + 1].data()});
  }
  return h.commit().get();
}

inline LookupKey key_for(SessionId s, uint64_t seed, const std::vector<int64_t>& positions,
                         KeyEncoding enc = KeyEncoding::PreRope,
                         const ModelFingerprint& fp = test_fp()) {
  return LookupKey{s, fp, enc, tokens_for(seed, positions), EntryShape{}};
}

/// Loads session `s` with the history of `positions`; returns tokens loaded and verified
/// (-1 on a miss, -2 on a failed load, -3 on wrong data).
inline int64_t load_check(AttentionStore& st, SessionId s, uint64_t seed, const EntryShape& shape,
                          const std::vector<int64_t>& positions,
                          KeyEncoding enc = KeyEncoding::PreRope,
                          const ModelFingerprint& fp = test_fp()) {
  std::vector<std::vector<char>> bufs(
      2 * static_cast<size_t>(shape.n_layers),
      std::vector<char>(positions.size() * shape.token_bytes, 0x5a));
  std::vector<LayerTarget> targets;
  for (int l = 0; l < shape.n_layers; ++l) {
    targets.push_back(LayerTarget{bufs[2 * l].data(), bufs[2 * l + 1].data()});
  }
  LookupKey key = key_for(s, seed, positions, enc, fp);
  key.shape = shape;  // what the targets hold, as a real caller says
  LoadHandle h = st.load(key, targets);
  if (!h.ok()) return -1;
  if (!h.wait_all()) return -2;
  const int64_t n = h.tokens();
  std::vector<int64_t> prefix(positions.begin(), positions.begin() + n);
  for (int l = 0; l < shape.n_layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const auto want = layer_bytes(seed, shape, l, kv, prefix);
      if (std::memcmp(want.data(), bufs[2 * l + kv].data(), want.size()) != 0) return -3;
    }
  }
  return n;
}

/// A fresh, empty scratch directory under tmp_dir().
inline std::string fresh_dir(const std::string& name) {
  const char* env = std::getenv("CACHEBENCH_TEST_TMP");
  const std::string base =
      (env != nullptr && *env != '\0') ? env : std::string(::cb::test::binary_dir()) + "/test_tmp";
  const std::string d = base + "/store_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace cb::store::testing
