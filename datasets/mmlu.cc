#include "datasets/mmlu.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "datasets/corpus.h"
#include "datasets/csv.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHeader = "question,choice0,choice1,choice2,choice3,answer";
const std::array<std::string, 6> kHeaderFields = {"question", "choice0", "choice1",
                                                  "choice2",  "choice3", "answer"};

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// A first row that names columns rather than holding a question: the exact converted
// header, or something header-like that does not match it.
bool looks_like_header(const CsvRecord& r) {
  if (r.fields.empty()) return false;
  const std::string first = lower(std::string(trim(r.fields.front())));
  const std::string last = lower(std::string(trim(r.fields.back())));
  return first == "question" || last == "answer" || last == "target" || last == "label";
}

std::string joined(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) s += ",";
    s += fields[i].size() > 40 ? fields[i].substr(0, 40) + "..." : fields[i];
  }
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

int parse_answer(std::string_view raw, MmluFormat format, const std::string& at) {
  const std::string_view a = trim(raw);
  if (a.size() == 1) {
    if (format == MmluFormat::kOriginal && a[0] >= 'A' && a[0] <= 'D') return a[0] - 'A';
    if (format == MmluFormat::kConverted && a[0] >= '0' && a[0] <= '3') return a[0] - '0';
  }
  std::string shown(a.substr(0, 20));
  for (char& c : shown) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  const bool original = format == MmluFormat::kOriginal;
  throw make_error(at,
                   "field 6 (answer) is '" + shown + "', expected " +
                       (original ? "a letter A-D (original MMLU layout, no header)"
                                 : "a number 0-3 (converted layout with header)"),
                   "fix the row; answers index the four choices");
}

std::vector<fs::path> csv_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".csv") continue;
    std::error_code fe;  // a dangling link's own error, not the listing's
    if (!it->is_regular_file(fe)) {
      throw make_error(it->path().string(),
                       "named like a subject's CSV but not a regular file" +
                           (fe ? " (" + fe.message() + ")" : std::string()),
                       "replace it with the CSV file or rename it");
    }
    files.push_back(it->path());
  }
  if (ec) {
    throw make_error(dir.string(), "cannot list directory: " + ec.message(),
                     "check the path and its permissions");
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::map<std::string, fs::path> subject_files(const fs::path& dir) {
  std::map<std::string, fs::path> by_subject;
  for (const fs::path& p : csv_files(dir)) {
    const std::string subject = mmlu_subject_from_path(p.string());
    auto [it, inserted] = by_subject.emplace(subject, p);
    if (!inserted) {
      throw make_error(dir.string(),
                       "two files for subject '" + subject +
                           "': " + it->second.filename().string() + " and " + p.filename().string(),
                       "keep one file per subject in each folder");
    }
  }
  return by_subject;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

}  // namespace

std::string mmlu_subject_from_path(const std::string& path) {
  std::string stem = fs::path(path).stem().string();
  for (const char* suffix : {"_test", "_dev", "_val"}) {
    const std::string s(suffix);
    if (stem.size() > s.size() && stem.compare(stem.size() - s.size(), s.size(), s) == 0) {
      return stem.substr(0, stem.size() - s.size());
    }
  }
  return stem;
}

MmluFile parse_mmlu_csv(const std::string& text, const std::string& path) {
  // A file in another encoding (Latin-1) or a binary one would be scored as garbled prompts;
  // the line of the first bad byte helps find it in a 100-row file.
  const size_t bad = first_invalid_utf8(text);
  if (bad != std::string::npos) {
    const auto line =
        1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    require_utf8_text(text, where(path, static_cast<int>(line)), false,
                      "save the CSV as UTF-8 text");
  }
  MmluFile file;
  file.subject = mmlu_subject_from_path(path);
  const std::vector<CsvRecord> records = parse_csv(text, path);
  size_t first = 0;
  if (!records.empty() && looks_like_header(records[0])) {
    const CsvRecord& h = records[0];
    const bool exact = h.fields.size() == kHeaderFields.size() &&
                       std::equal(h.fields.begin(), h.fields.end(), kHeaderFields.begin(),
                                  [](const std::string& a, const std::string& b) {
                                    return std::string(trim(a)) == b;
                                  });
    if (!exact) {
      throw make_error(where(path, h.line),
                       "header row '" + joined(h.fields) +
                           "' does not match the converted MMLU header '" + kHeader + "'",
                       "use that header (answers 0-3) or the original layout without a header "
                       "(answers A-D)");
    }
    file.format = MmluFormat::kConverted;
    first = 1;
  }
  file.questions.reserve(records.size() - first);
  for (size_t r = first; r < records.size(); ++r) {
    const CsvRecord& rec = records[r];
    const std::string at = where(path, rec.line);
    if (rec.fields.size() != 6) {
      throw make_error(at,
                       "expected 6 fields (question, 4 choices, answer), found " +
                           std::to_string(rec.fields.size()),
                       "quote fields that contain commas or line breaks");
    }
    MmluQuestion q;
    q.question = rec.fields[0];
    for (size_t c = 0; c < 4; ++c) q.choices[c] = rec.fields[c + 1];
    q.answer = parse_answer(rec.fields[5], file.format, at);
    q.line = rec.line;
    file.questions.push_back(std::move(q));
  }
  if (file.questions.empty()) {
    throw make_error(path, "no questions in the file",
                     "pass an MMLU CSV with at least one question row");
  }
  return file;
}

MmluFile load_mmlu_csv(const std::string& path) {
  return parse_mmlu_csv(read_file_bytes(path), path);
}

std::vector<std::string> list_mmlu_subjects(const std::string& root) {
  const fs::path test_dir = fs::path(root) / "test";
  if (!is_dir(test_dir)) {
    throw make_error(root, "no test/ folder",
                     "pass the MMLU root holding test/<subject>_test.csv (and dev/)");
  }
  std::vector<std::string> names;
  for (const auto& [name, p] : subject_files(test_dir)) names.push_back(name);
  return names;
}

std::vector<MmluSubject> load_mmlu_dir(const std::string& root, bool with_dev) {
  const fs::path test_dir = fs::path(root) / "test";
  const fs::path dev_dir = fs::path(root) / "dev";
  if (!is_dir(test_dir)) {
    throw make_error(root, "no test/ folder",
                     "pass the MMLU root holding test/<subject>_test.csv (and dev/)");
  }
  const auto tests = subject_files(test_dir);
  if (tests.empty()) {
    throw make_error(test_dir.string(), "no .csv files", "put <subject>_test.csv files there");
  }
  std::map<std::string, fs::path> devs;
  if (with_dev) {
    // Few-shot runs take their examples from dev/: without it every subject would fail alike,
    // so say so once, naming the folder.
    if (!is_dir(dev_dir)) {
      throw make_error(dev_dir.string(), "no dev/ folder (the few-shot examples)",
                       "add dev/<subject>_dev.csv files, or pass --shots 0");
    }
    devs = subject_files(dev_dir);
    for (const auto& [name, p] : tests) {
      if (devs.count(name) == 0) {
        throw make_error((dev_dir / (name + "_dev.csv")).string(),
                         "missing dev file for test subject '" + name + "'",
                         "add it (the few-shot examples) or remove " + p.string());
      }
    }
    for (const auto& [name, p] : devs) {
      if (tests.count(name) == 0) {
        throw make_error((test_dir / (name + "_test.csv")).string(),
                         "missing test file for dev subject '" + name + "'",
                         "add it or remove " + p.string());
      }
    }
  }
  std::vector<MmluSubject> subjects;
  subjects.reserve(tests.size());
  for (const auto& [name, p] : tests) {
    MmluSubject s;
    s.name = name;
    s.test_path = p.string();
    s.test = load_mmlu_csv(s.test_path).questions;
    auto d = devs.find(name);
    if (d != devs.end()) {
      s.dev_path = d->second.string();
      s.dev = load_mmlu_csv(s.dev_path).questions;
    }
    subjects.push_back(std::move(s));
  }
  return subjects;
}

}  // namespace cb::datasets
