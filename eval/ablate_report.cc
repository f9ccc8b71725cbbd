// Ablation results as JSON, a Markdown table, and a gnuplot script (data + plot).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "eval/ablate.h"
#include "lib/core/atomic_file.h"

namespace cb::eval {
namespace {

std::string num(const nlohmann::json& v, int digits) {
  if (!v.is_number()) return "n/a";
  const double d = v.get<double>();
  if (!std::isfinite(d)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, d);
  return b;
}

// Series in order of first appearance.
std::vector<std::string> series_of(const AblateResult& r) {
  std::vector<std::string> s;
  for (const auto& row : r.rows) {
    if (std::find(s.begin(), s.end(), row.series) == s.end()) s.push_back(row.series);
  }
  return s;
}

std::vector<std::string> labels_of(const AblateResult& r) {
  std::vector<std::string> s;
  for (const auto& row : r.rows) {
    if (std::find(s.begin(), s.end(), row.label) == s.end()) s.push_back(row.label);
  }
  return s;
}

// A gnuplot string literal ('...' with ' doubled).
std::string gq(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o += '\'';
    o += c;
  }
  return o + "'";
}

std::string dq(const std::string& s) {  // a quoted data-file field
  std::string o = "\"";
  for (char c : s) o += c == '"' ? '\'' : c;
  return o + "\"";
}

}  // namespace

nlohmann::json ablation_json(const AblateResult& r) {
  nlohmann::json j;
  j["study"] = r.study;
  j["title"] = r.title;
  j["paper_figure"] = r.figure;
  j["x"] = r.x_title;
  j["categorical"] = r.categorical;
  for (const auto& m : r.metrics) j["metrics"].push_back({{"key", m.key}, {"title", m.title}});
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    j["rows"].push_back(
        {{"series", row.series}, {"label", row.label}, {"x", row.x}, {"values", row.values}});
  }
  j["config"] = r.config;
  j["notes"] = r.notes;
  return j;
}

std::string ablation_table(const AblateResult& r) {
  const bool series = series_of(r).size() > 1 || (!r.rows.empty() && !r.rows[0].series.empty());
  std::string t = "## " + r.study + ": " + r.title + " (paper " + r.figure + ")\n\n|";
  if (series) t += " series |";
  t += " " + r.x_title + " |";
  for (const auto& m : r.metrics) t += " " + m.title + " |";
  t += "\n|";
  if (series) t += "---|";
  t += "---|";
  for (size_t i = 0; i < r.metrics.size(); ++i) t += "---:|";
  t += "\n";
  for (const auto& row : r.rows) {
    t += "|";
    if (series) t += " " + row.series + " |";
    t += " " + row.label + " |";
    for (const auto& m : r.metrics) {
      t += " " + num(row.values.contains(m.key) ? row.values[m.key] : nlohmann::json(), m.digits) +
           " |";
    }
    t += "\n";
  }
  for (const auto& n : r.notes) t += "\nNote: " + n;
  if (!r.notes.empty()) t += "\n";
  return t;
}

std::string write_ablation_plot(const AblateResult& r, const std::string& dir) {
  std::vector<const AblateMetric*> ms;
  for (const auto& m : r.metrics) {
    if (m.plot) ms.push_back(&m);
  }
  const std::vector<std::string> series = series_of(r);
  const std::string dat = r.study + ".dat", gp = dir + "/" + r.study + ".gp";
  std::ostringstream d;
  const auto value = [](const AblateRow& row, const std::string& key) {
    const auto& v = row.values.contains(key) ? row.values[key] : nlohmann::json();
    return v.is_number() ? num(v, 9) : std::string("NaN");
  };
  if (r.categorical) {
    // One row per label; columns: label, then per series the plotted metrics.
    d << "# label";
    for (const auto& s : series) {
      for (const auto* m : ms) d << " | " << s << ": " << m->key;
    }
    d << "\n";
    for (const auto& label : labels_of(r)) {
      d << dq(label);
      for (const auto& s : series) {
        const AblateRow* hit = nullptr;
        for (const auto& row : r.rows) {
          if (row.series == s && row.label == label) hit = &row;
        }
        for (const auto* m : ms) d << ' ' << (hit ? value(*hit, m->key) : std::string("NaN"));
      }
      d << "\n";
    }
  } else {
    // One block per series: x and the plotted metrics.
    for (const auto& s : series) {
      d << "# " << s << "\n";
      for (const auto& row : r.rows) {
        if (row.series != s) continue;
        d << num(row.x, 9);
        for (const auto* m : ms) d << ' ' << value(row, m->key);
        d << "\n";
      }
      d << "\n\n";
    }
  }
  write_file_atomically(dir + "/" + dat, d.str(), "the plot data");
  std::ostringstream g;
  const size_t k = std::max<size_t>(ms.size(), 1);
  // Wide enough for the title on one line (up to 9 px a character at 11 pt, and margins).
  const std::string heading = r.study + ": " + r.title;
  const size_t width = std::max<size_t>(480 * k, 9 * heading.size() + 60);
  g << "# gnuplot script written by cachebench ablate; run: gnuplot " << r.study << ".gp\n"
    << "set terminal svg size " << width << ",480 dynamic enhanced font 'Helvetica,11' "
    << "background rgb 'white'\n"
    << "set output " << gq(r.study + ".svg") << "\n"
    << "set multiplot layout 1," << k << " title " << gq(heading) << "\n"
    // Below the axes, where it hides no line.
    << "set grid ytics\nset key below font ',9'\nset xlabel " << gq(r.x_title) << "\n";
  if (r.categorical) {
    g << "set style data histogram\nset style histogram clustered gap 1\n"
      << "set style fill solid 0.8 border -1\nset xtics rotate by -25 font ',9'\n"
      << "set yrange [0:*]\n";
  }
  for (size_t mi = 0; mi < ms.size(); ++mi) {
    g << "set ylabel " << gq(ms[mi]->title) << "\nplot ";
    for (size_t si = 0; si < series.size(); ++si) {
      const std::string title = series[si].empty() ? "notitle" : "title " + gq(series[si]);
      if (si > 0) g << ", ";
      g << (si == 0 ? gq(dat) : std::string("''"));
      if (r.categorical) {
        g << " using " << 2 + si * ms.size() + mi << (si == 0 ? ":xtic(1)" : "") << " " << title;
      } else {
        g << " index " << si << " using 1:" << 2 + mi << " with linespoints " << title;
      }
    }
    g << "\n";
  }
  g << "unset multiplot\n";
  write_file_atomically(gp, g.str(), "the plot script");
  return gp;
}

}  // namespace cb::eval
