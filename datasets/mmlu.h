#pragma once
/// MMLU (Hendrycks et al.) multiple-choice questions from CSV. Two layouts are read and
/// told apart by the first row:
///  - original: no header; question, A, B, C, D, answer letter A-D;
///  - converted: header "question,choice0,choice1,choice2,choice3,answer", answer 0-3.
/// A directory holds dev/<subject>_dev.csv (few-shot examples) and test/<subject>_test.csv.

#include <array>
#include <string>
#include <vector>

namespace cb::datasets {

/// One question; `answer` indexes `choices`.
struct MmluQuestion {
  std::string question;
  std::array<std::string, 4> choices;
  int answer = 0;  ///< 0..3 (A..D)
  int line = 0;    ///< 1-based line of the row in its file, for messages
};

/// Which CSV layout a file used.
enum class MmluFormat { kOriginal, kConverted };

/// The questions of one file and the layout it was written in.
struct MmluFile {
  std::string subject;  ///< from the file name, see mmlu_subject_from_path
  MmluFormat format = MmluFormat::kOriginal;
  std::vector<MmluQuestion> questions;
};

/// One subject of a directory: its dev (few-shot) and test questions.
struct MmluSubject {
  std::string name;
  std::string test_path, dev_path;  ///< the files read (dev_path empty: dev/ not read)
  std::vector<MmluQuestion> dev;
  std::vector<MmluQuestion> test;
};

/// "abstract_algebra" from ".../abstract_algebra_test.csv" (also _dev and _val); a name
/// without those suffixes gives its stem.
std::string mmlu_subject_from_path(const std::string& path);

/// Parses MMLU CSV text (`path` names it in errors). Throws cb::Error with file, line and
/// field for a header that is not the converted one, a row without 6 fields, an answer
/// out of range, an unterminated quote, or a file without questions; with file, line and offset
/// for text that is not UTF-8 or holds a NUL byte (as the corpora's loaders refuse it).
MmluFile parse_mmlu_csv(const std::string& text, const std::string& path);

/// Reads and parses one MMLU CSV file.
MmluFile load_mmlu_csv(const std::string& path);

/// Subject names with a file in `root`/test, sorted.
std::vector<std::string> list_mmlu_subjects(const std::string& root);

/// Loads every subject of `root`/test (required) and, `with_dev`, `root`/dev (then required, and
/// every test subject needs its dev file and the reverse; zero-shot runs pass false and never
/// read it). Sorted by subject name.
std::vector<MmluSubject> load_mmlu_dir(const std::string& root, bool with_dev = true);

}  // namespace cb::datasets
