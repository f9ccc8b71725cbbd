#include "datasets/text_io.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

#include "lib/core/error.h"
#include "lib/core/mapped_file.h"
#include "lib/core/sysinfo.h"

namespace cb::datasets {

std::string read_file_bytes(const std::string& path) {
  const MappedFile f(path);
  if (f.size() == 0) return {};
  return std::string(reinterpret_cast<const char*>(f.data()), f.size());
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, const std::string& where, uint64_t max_bytes) {
  const bool auto_bound = max_bytes == 0;
  if (auto_bound) {
    const uint64_t mem = physical_memory_bytes();
    max_bytes = mem > 0 ? mem / 2 : UINT64_MAX;
  }
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    throw make_error(where, "cannot initialise zlib", "this is a bug or out of memory");
  }
  std::string out;
  char chunk[1 << 16];
  const auto* next = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t left = bytes.size();
  int rc = Z_OK;
  while (true) {
    if (zs.avail_in == 0 && left > 0) {
      const size_t take = std::min<size_t>(left, UINT_MAX);
      zs.next_in = const_cast<unsigned char*>(next);
      zs.avail_in = static_cast<uInt>(take);
      next += take;
      left -= take;
    }
    zs.next_out = reinterpret_cast<unsigned char*>(chunk);
    zs.avail_out = sizeof(chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk, sizeof(chunk) - zs.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&zs);
      throw make_error(where,
                       "gzip stream inflates to more than " + std::to_string(max_bytes) + " bytes" +
                           (auto_bound ? " (half of this machine's memory)" : ""),
                       "check that the file is what it should be (a gzip bomb expands a "
                       "thousandfold), or decompress it and pass the plain file");
    }
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (as `cat a.gz b.gz` produces); stop at the real end.
      if (zs.avail_in == 0 && left == 0) break;
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && left == 0) {
      inflateEnd(&zs);
      throw make_error(where, "truncated gzip stream (ends before the end-of-data marker)",
                       "re-download or re-compress the file");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string msg = zs.msg != nullptr ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      throw make_error(where, "corrupt gzip stream: " + msg, "re-download or re-compress the file");
    }
  }
  inflateEnd(&zs);
  return out;
}

std::string maybe_gunzip(std::string bytes, const std::string& where) {
  if (!is_gzip(bytes)) return bytes;
  return gunzip(bytes, where);
}

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  size_t start = 0;
  int number = 1;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    size_t stop = end;
    if (stop > start && text[stop - 1] == '\r') --stop;
    lines.push_back({number++, text.substr(start, stop - start)});
    start = next;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::string where(const std::string& path, int line) {
  return path + ":" + std::to_string(line);
}

}  // namespace cb::datasets
