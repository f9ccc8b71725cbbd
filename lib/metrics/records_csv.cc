#include "lib/metrics/records_csv.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <string>

#include "lib/core/atomic_file.h"

namespace cb::metrics {
namespace {

/// Shortest round-trip decimal form of `v`.
std::string num(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

/// RFC 4180 quoting when a field holds a comma, quote or line break.
std::string field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::string turn_csv_header() {
  return "session,turn,warmup,arrival_s,start_s,first_token_s,finish_s,ttft_ms,history_tokens,"
         "new_tokens,output_tokens,reused_tokens,recomputed_tokens,truncated_tokens,tier,"
         "bytes_loaded,bytes_saved,load_ms,preload_stall_ms,save_stall_ms,done_s,conversation";
}

std::string turn_csv_row(const TurnRecord& r, const std::string& conversation) {
  std::string s;
  s += std::to_string(r.session) + ',' + std::to_string(r.turn) + ',' + (r.warmup ? "1" : "0");
  for (double v : {r.arrival_s, r.start_s, r.first_token_s, r.finish_s,
                   (r.first_token_s - r.arrival_s) * 1000.0})
    s += ',' + num(v);
  for (int64_t v : {r.history_tokens, r.new_tokens, r.output_tokens, r.reused_tokens,
                    r.recomputed_tokens, r.truncated_tokens})
    s += ',' + std::to_string(v);
  s += ',' + field(r.tier);
  s += ',' + std::to_string(r.bytes_loaded) + ',' + std::to_string(r.bytes_saved);
  for (double v : {r.load_s * 1000.0, r.preload_stall_s * 1000.0, r.save_stall_s * 1000.0})
    s += ',' + num(v);
  s += ',' + num(std::max(r.finish_s, r.done_s));
  s += ',' + field(conversation);
  return s;
}

void write_turn_csv(const std::string& path, const std::vector<TurnRecord>& records,
                    const std::vector<std::string>& conversations) {
  std::string out = turn_csv_header() + '\n';
  for (const TurnRecord& r : records) {
    const bool named = r.session < conversations.size();
    out += turn_csv_row(r, named ? conversations[r.session] : std::string()) + '\n';
  }
  write_file_atomically(path, out, "the turn CSV");
}

}  // namespace cb::metrics
