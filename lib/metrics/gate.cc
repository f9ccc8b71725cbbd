#include "lib/metrics/gate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>

#include "lib/core/error.h"
#include "lib/core/json_depth.h"
#include "lib/metrics/json_path.h"

namespace cb::metrics {
namespace {

using nlohmann::json;

/// Rounding slack before a change beyond a bound counts, relative to the bound: a 5% bound is
/// not failed by a change computed as 5.000000000000004%, while an exact bound (0%) fails on
/// any change (a change is 0 only when the values are equal).
constexpr double kBoundSlack = 1e-9;

/// The non-empty pieces of `s` between `sep`s.
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> w;
  for (size_t b = 0; b <= s.size();) {
    const size_t e = std::min(s.find(sep, b), s.size());
    if (e > b) w.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return w;
}

/// Whether `w` holds one of `words`.
bool has_word(const std::vector<std::string>& w, std::initializer_list<const char*> words) {
  for (const std::string& x : w)
    for (const char* n : words)
      if (x == n) return true;
  return false;
}

/// Whether `run` appears in `w` as consecutive words ("hit", "rate" in hit_rate_dram).
bool has_run(const std::vector<std::string>& w, std::initializer_list<const char*> run) {
  const size_t n = run.size();
  for (size_t i = 0; i + n <= w.size(); ++i) {
    size_t k = 0;
    for (const char* r : run) {
      if (w[i + k] != r) break;
      ++k;
    }
    if (k == n) return true;
  }
  return false;
}

const json& metric_node(const json& summary, const std::string& metric, const std::string& name) {
  const json* node = json_at(summary, metric);
  if (node == nullptr)
    throw make_error(name, "has no metric '" + metric + "'",
                     "gate only metrics both summaries have (check the spelling of the dotted "
                     "path, e.g. hit_rate.overall)");
  if (!node->is_number())
    throw make_error(name, "metric '" + metric + "' is not a number (" + node->dump() + ")",
                     "gate a numeric leaf, e.g. ttft_ms.mean rather than ttft_ms");
  return *node;
}

/// `cur - base` for two integers of the JSON (int64 or uint64), computed on the integers: as
/// doubles, integers beyond 2^53 round, and 2^53 + 1 - 2^53 comes out 0. Exact in its sign, and
/// 0 only when they are equal.
double integer_difference(const json& base, const json& cur) {
  // Each as its sign and magnitude, which an int64's most negative value fits as a uint64.
  const auto magnitude = [](const json& v) -> std::pair<bool, uint64_t> {
    if (v.is_number_unsigned()) return {false, v.get<uint64_t>()};
    const int64_t i = v.get<int64_t>();
    return {i < 0, i < 0 ? uint64_t{0} - static_cast<uint64_t>(i) : static_cast<uint64_t>(i)};
  };
  const auto [base_neg, base_mag] = magnitude(base);
  const auto [cur_neg, cur_mag] = magnitude(cur);
  if (base_neg != cur_neg) {  // on both sides of 0: the sum may pass 2^64, but cannot be 0
    const double d = static_cast<double>(base_mag) + static_cast<double>(cur_mag);
    return cur_neg ? -d : d;
  }
  const double d = cur_mag >= base_mag ? static_cast<double>(cur_mag - base_mag)
                                       : -static_cast<double>(base_mag - cur_mag);
  return cur_neg ? -d : d;
}

/// `diff` (current - baseline) in percent of |base|; +-infinity from a zero baseline.
double change_pct(double base, double diff) {
  if (diff == 0.0) return 0.0;
  if (base == 0.0)
    return diff > 0 ? std::numeric_limits<double>::infinity()
                    : -std::numeric_limits<double>::infinity();
  return diff / std::fabs(base) * 100.0;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

Direction direction_of(const std::string& metric) {
  // Each dotted component split at '_' into words: "prefill_tok_s" is prefill, tok, s.
  std::vector<std::vector<std::string>> parts;
  for (const std::string& p : split(metric, '.')) parts.push_back(split(p, '_'));
  const auto any_part = [&](auto&& pred) {
    for (const auto& w : parts)
      if (pred(w)) return true;
    return false;
  };
  // Rates, ratios and shares of success first, so "gpu_time_x", "prefill_tok_s" and
  // "ttft_reduction_pct" are not read as times.
  // A rate is higher-is-better unless it counts failures ("miss_rate").
  const auto failure = [](const std::vector<std::string>& w) {
    return has_word(w, {"miss", "misses", "error", "errors", "failure", "failures"});
  };
  if (any_part([&](const std::vector<std::string>& w) {
        return has_word(w, {"throughput", "reduction", "saving", "speedup", "gbps", "gbs", "gflops",
                            "tflops", "mfu", "acc", "completed", "hit", "hits"}) ||
               (!w.empty() && w.back() == "rate" && !failure(w)) || has_word(w, {"reused"}) ||
               has_run(w, {"tok", "s"}) || has_run(w, {"per", "s"}) || has_word(w, {"to"}) ||
               (w.size() > 1 && w.back() == "x");
      }))
    return Direction::HigherIsBetter;
  if (any_part([&](const std::vector<std::string>& w) {
        return failure(w) ||
               has_word(w, {"ttft", "tpot", "itl", "e2el", "latency", "stall", "cost", "recomputed",
                            "duration", "ms", "us", "ns", "seconds", "ppl", "perplexity", "nll",
                            "bpb", "diff"}) ||
               has_run(w, {"gpu", "time"}) || has_run(w, {"bits", "per", "byte"}) ||
               (w.size() > 1 && w.back() == "s");
      }))
    return Direction::LowerIsBetter;
  return Direction::Exact;
}

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::HigherIsBetter: return "higher";
    case Direction::LowerIsBetter: return "lower";
    case Direction::Exact: return "exact";
  }
  return "exact";
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Ok: return "OK";
    case Verdict::Regression: return "REGRESSION";
    case Verdict::Improved: return "improved";
  }
  return "OK";
}

Bound parse_bound(const std::string& arg) {
  const std::string where = "--max-regression " + arg;
  const std::string fix =
      "write METRIC=PCT, e.g. ttft_ms.mean=5 or hit_rate.overall=0, optionally with the "
      "direction, e.g. my_rate=5:higher (higher, lower or exact)";
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || arg.find('=', eq + 1) != std::string::npos)
    throw make_error(where, "expected exactly one '='", fix);
  Bound b;
  b.metric = arg.substr(0, eq);
  if (b.metric.empty() || b.metric.front() == '.' || b.metric.back() == '.' ||
      b.metric.find("..") != std::string::npos)
    throw make_error(where, "the metric '" + b.metric + "' is not a dotted path", fix);
  std::string pct = arg.substr(eq + 1);
  const size_t colon = pct.find(':');
  if (colon != std::string::npos) {
    const std::string d = pct.substr(colon + 1);
    pct.resize(colon);
    if (d == "higher") {
      b.direction = Direction::HigherIsBetter;
    } else if (d == "lower") {
      b.direction = Direction::LowerIsBetter;
    } else if (d == "exact") {
      b.direction = Direction::Exact;
    } else {
      throw make_error(where, "the direction '" + d + "' is not higher, lower or exact", fix);
    }
    b.direction_given = true;
  } else {
    b.direction = direction_of(b.metric);
  }
  if (!pct.empty() && pct.back() == '%') pct.pop_back();
  // A decimal number: strtod alone would also take hexadecimal ("0x10") and "infinity".
  if (pct.find_first_not_of("0123456789.eE+-") != std::string::npos) pct.clear();
  char* end = nullptr;
  const double v = pct.empty() ? 0.0 : std::strtod(pct.c_str(), &end);
  if (pct.empty() || end != pct.c_str() + pct.size() || !std::isfinite(v) || v < 0.0)
    throw make_error(where, "the bound '" + arg.substr(eq + 1) + "' is not a non-negative number",
                     fix);
  b.max_regression_pct = v;
  return b;
}

/// Up to `limit` dotted paths of numbers in `j` ("decode_tok_s", "results.0.ppl"; keys in
/// sorted order; arrays only of objects, so that a list of token ids is not a page of paths),
/// how many there are in all counted in `*total`: what a bound could name.
void numeric_paths(const json& j, const std::string& at, size_t limit,
                   std::vector<std::string>* out, size_t* total) {
  const auto child = [&](const std::string& k) { return at.empty() ? k : at + "." + k; };
  if (j.is_number()) {
    ++*total;
    if (out->size() < limit) out->push_back(at);
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      numeric_paths(*it, child(it.key()), limit, out, total);
  } else if (j.is_array() && !j.empty() && j.front().is_object()) {
    for (size_t i = 0; i < j.size(); ++i)
      numeric_paths(j[i], child(std::to_string(i)), limit, out, total);
  }
}

/// What to bound in `baseline`, said after "give --max-regression METRIC=PCT".
std::string metrics_hint(const json& baseline) {
  std::vector<std::string> paths;
  size_t total = 0;
  numeric_paths(baseline, "", 6, &paths, &total);
  if (paths.empty()) return " for a number the files hold (the baseline holds none)";
  std::string s = " for the metrics it has (its numbers: ";
  for (size_t i = 0; i < paths.size(); ++i) s += (i ? ", " : "") + paths[i];
  if (total > paths.size()) s += ", and " + std::to_string(total - paths.size()) + " more";
  // The example: the first that reads as a measurement (a rate, a time, a ratio), not a
  // setting such as chunk_bytes.
  std::string example = paths.front();
  for (const std::string& p : paths) {
    bool measured = false;
    for (const char* end : {"gbs", "gbps", "tok_s", "_ms", "_s", "ppl", "accuracy", "_x", "_pct"}) {
      const size_t n = std::strlen(end);
      measured |= p.size() >= n && p.compare(p.size() - n, n, end) == 0;
    }
    if (measured) {
      example = p;
      break;
    }
  }
  return s + "), e.g. --max-regression " + example + "=5";
}

std::vector<Bound> default_bounds() {
  std::vector<Bound> v;
  for (const char* m : {"hit_rate.overall", "hit_rate.dram", "hit_rate.ssd", "reused_tokens",
                        "recomputed_tokens", "bytes_loaded", "bytes_saved", "completed"})
    v.push_back(Bound{m, 0.0, direction_of(m)});
  return v;
}

std::vector<Bound> gate_bounds(const std::vector<Bound>& given, bool no_defaults,
                               const json& baseline) {
  for (size_t i = 0; i < given.size(); ++i) {
    for (size_t k = 0; k < i; ++k) {
      if (given[k].metric == given[i].metric) {
        throw make_error("--max-regression " + given[i].metric,
                         "is given twice; which bound is meant is unclear",
                         "give each metric once");
      }
    }
  }
  std::vector<Bound> v;
  std::vector<bool> used(given.size(), false);
  if (!no_defaults) {
    // A default the baseline lacks is left out when bounds were given, or when the baseline
    // has none of them (not a replay's summary); alone, it is a summary missing a metric.
    bool any_default = false;
    for (const Bound& d : default_bounds()) any_default |= json_at(baseline, d.metric) != nullptr;
    for (Bound d : default_bounds()) {
      if ((!given.empty() || !any_default) && json_at(baseline, d.metric) == nullptr) continue;
      for (size_t i = 0; i < given.size(); ++i) {
        if (given[i].metric == d.metric) {
          d = given[i];
          used[i] = true;
        }
      }
      v.push_back(d);
    }
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (!used[i]) v.push_back(given[i]);
  }
  if (v.empty() && no_defaults) {
    throw make_error("--no-default-bounds", "leaves nothing to check",
                     "give at least one --max-regression METRIC=PCT");
  }
  if (v.empty()) {
    throw make_error("--max-regression",
                     "none given, and the baseline has none of the default bounds' metrics "
                     "(a replay's hit rates and token counts)",
                     "give --max-regression METRIC=PCT" + metrics_hint(baseline));
  }
  return v;
}

json select_summary(const json& doc, const std::string& name) {
  if (doc.is_object()) {
    const auto it = doc.find("summary");
    if (it == doc.end() || !it->is_object()) return doc;
    json s = *it;
    for (const char* k : {"comparison", "baseline"}) {
      if (doc.contains(k) && doc[k].is_object() && !s.contains(k)) s[k] = doc[k];
    }
    return s;
  }
  throw make_error(name, std::string("holds a JSON ") + doc.type_name() + ", not an object",
                   "pass a summary written with --out (a JSON object, or one with a "
                   "\"summary\" object)");
}

std::string json_reason(const std::exception& e) {
  const std::string w = e.what();
  const size_t end = w.find("] ");
  return w.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? w.substr(end + 2) : w;
}

json parse_document(const std::string& text, const std::string& name) {
  // A result nests a few levels; rendering a deeper value in a message would recurse per level.
  check_json_depth(text, 64, name, "pass a result written with --out");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers beyond a double
    throw make_error(name, "is not valid JSON (" + json_reason(e) + ")",
                     "pass a result written with --out");
  }
}

json parse_summary(const std::string& text, const std::string& name) {
  return select_summary(parse_document(text, name), name);
}

GateReport run_gate(const json& baseline, const json& current, const std::vector<Bound>& bounds,
                    const std::string& baseline_name, const std::string& current_name) {
  GateReport r;
  for (const Bound& b : bounds) {
    GateCheck c;
    c.metric = b.metric;
    const json& base_v = metric_node(baseline, b.metric, baseline_name);
    const json& cur_v = metric_node(current, b.metric, current_name);
    c.baseline = base_v.get<double>();
    c.current = cur_v.get<double>();
    if (base_v.is_number_integer() && cur_v.is_number_integer()) {
      c.baseline_integer = base_v;
      c.current_integer = cur_v;
      c.change_pct = change_pct(c.baseline, integer_difference(base_v, cur_v));
    } else {
      c.change_pct = change_pct(c.baseline, c.current - c.baseline);
    }
    c.bound_pct = b.max_regression_pct;
    c.direction = b.direction;
    double worse = 0;  // how much worse, in percent (negative: better)
    switch (c.direction) {
      case Direction::HigherIsBetter: worse = -c.change_pct; break;
      case Direction::LowerIsBetter: worse = c.change_pct; break;
      case Direction::Exact: worse = std::fabs(c.change_pct); break;
    }
    if (worse > c.bound_pct * (1.0 + kBoundSlack)) {
      c.verdict = Verdict::Regression;
      ++r.regressions;
    } else if (c.direction != Direction::Exact && worse < 0.0) {
      c.verdict = Verdict::Improved;
    }
    r.checks.push_back(c);
  }
  return r;
}

std::string gate_markdown(const GateReport& report) {
  // Whole numbers (counts, bytes) exactly, and a change too small for two decimals in
  // significant digits: an exact bound's failure by one byte must show. Integers of the JSON
  // with all their digits, as the summaries hold them (a double's beyond 2^53 are rounded).
  const auto value = [](double v, const json& integer) {
    if (integer.is_number_integer()) return integer.dump();
    return std::nearbyint(v) == v && std::fabs(v) < 1e15 ? fmt("%.0f", v) : fmt("%.6g", v);
  };
  std::string s = "| metric | baseline | current | change % | bound % | better | verdict |\n";
  s += "|---|---|---|---|---|---|---|\n";
  for (const GateCheck& c : report.checks) {
    const std::string change = std::isinf(c.change_pct) ? (c.change_pct > 0 ? "+inf" : "-inf")
                               : c.change_pct != 0 && std::fabs(c.change_pct) < 0.005
                                   ? fmt("%+.3g", c.change_pct)
                                   : fmt("%+.2f", c.change_pct);
    s += "| " + c.metric + " | " + value(c.baseline, c.baseline_integer) + " | " +
         value(c.current, c.current_integer) + " | " + change + " | " + fmt("%.2f", c.bound_pct) +
         " | " + direction_name(c.direction) + " | " + verdict_name(c.verdict) + " |\n";
  }
  return s;
}

json gate_json(const GateReport& report) {
  const auto exact = [](double v, const json& integer) {
    return integer.is_number_integer() ? integer : json(v);
  };
  json checks = json::array();
  for (const GateCheck& c : report.checks) {
    checks.push_back({{"metric", c.metric},
                      {"baseline", exact(c.baseline, c.baseline_integer)},
                      {"current", exact(c.current, c.current_integer)},
                      {"change_pct", std::isinf(c.change_pct) ? json(nullptr) : json(c.change_pct)},
                      {"bound_pct", c.bound_pct},
                      {"direction", direction_name(c.direction)},
                      {"verdict", verdict_name(c.verdict)}});
  }
  return {
      {"checks", checks}, {"regressions", report.regressions}, {"passed", report.regressions == 0}};
}

}  // namespace cb::metrics
