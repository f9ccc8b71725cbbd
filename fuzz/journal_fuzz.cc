// Fuzz target: the AttentionStore journal read back at recovery (Journal::replay) and the
// entry metadata in its commit records (decode_entry). Records carry XXH3 checksums that
// random bytes never match, so the first input byte picks the mode:
//  - even: the rest is a journal file as it is on disk (torn tails, corrupt ranges);
//  - odd: the rest is a list of records [type u8][length u16 LE][payload], framed here with
//    valid checksums, so the fuzzer reaches the payload decoder through replay.
// Every entry replay accepts must be self-consistent and survive encode/decode.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "lib/store/checksum.h"
#include "lib/store/entry.h"
#include "lib/store/journal.h"

namespace {

constexpr uint32_t kMagic = 0x314A4243;  // "CBJ1", as lib/store/journal.cc writes it

std::string frame(uint32_t type, std::string_view payload) {
  std::string rec(20, '\0');
  const auto len = static_cast<uint32_t>(payload.size());
  const uint64_t sum = cb::store::checksum(payload.data(), payload.size(), type);
  std::memcpy(&rec[0], &kMagic, 4);
  std::memcpy(&rec[4], &type, 4);
  std::memcpy(&rec[8], &len, 4);
  std::memcpy(&rec[12], &sum, 8);
  rec.append(payload);
  return rec;
}

void check_entry(const cb::store::EntryMeta& m) {
  std::string why;
  if (!m.valid(&why)) std::abort();
  cb::store::EntryMeta back;
  if (!cb::store::decode_entry(cb::store::encode_entry(m), &back)) std::abort();
  if (back.tokens != m.tokens || back.slots != m.slots || back.checksums != m.checksums ||
      back.token_hashes != m.token_hashes || !(back.shape == m.shape)) {
    std::abort();
  }
  if (m.matching_prefix(m.tokens) != m.n_tokens()) std::abort();
  uint64_t covered = 0;
  for (uint64_t c = 0; c < m.n_token_chunks(); ++c) covered += m.tokens_in_chunk(c);
  if (covered != static_cast<uint64_t>(m.n_tokens())) std::abort();
  (void)m.data_bytes();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("journal.cbj");
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string journal;
  if ((data[0] & 1) == 0) {
    journal = std::string(in);
  } else {
    size_t pos = 0;
    while (pos + 3 <= in.size()) {
      const auto type = static_cast<uint8_t>(in[pos]);
      uint16_t len = 0;
      std::memcpy(&len, in.data() + pos + 1, 2);
      pos += 3;
      const std::string_view payload = in.substr(pos, len);
      pos += payload.size();
      cb::store::EntryMeta m;
      if (cb::store::decode_entry(std::string(payload), &m)) check_entry(m);
      journal += frame(type, payload);
    }
    journal.append(in.substr(pos));  // a torn tail
  }
  const cb::store::ReplayResult r = cb::store::Journal::replay(file.write(journal));
  if (r.valid_bytes > journal.size() || r.corrupt_bytes > journal.size()) std::abort();
  for (const auto& [session, m] : r.entries) {
    if (m.session != session || m.generation > r.max_generation) std::abort();
    check_entry(m);
  }
  return 0;
}
