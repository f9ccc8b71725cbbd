#include "eval/mmlu.h"

#include <algorithm>
#include <chrono>

#include "datasets/corpus.h"
#include "lib/core/error.h"
#include "lib/core/format.h"

namespace cb::eval {
namespace {

constexpr const char* kLetters[4] = {"A", "B", "C", "D"};

}  // namespace

std::string mmlu_description(const std::string& subject) {
  std::string s = subject;
  std::replace(s.begin(), s.end(), '_', ' ');
  return "The following are multiple choice questions (with answers) about " + s + ".\n\n";
}

std::string mmlu_format_question(const datasets::MmluQuestion& q) {
  // lm-eval's doc["question"].strip(): Python's, Unicode whitespace (U+0085 ...) included.
  std::string s(datasets::py_strip(q.question));
  for (int i = 0; i < 4; ++i) {
    s += "\n";
    s += kLetters[i];
    s += ". " + q.choices[static_cast<size_t>(i)];
  }
  return s + "\nAnswer:";
}

std::string mmlu_fewshot_prefix(const std::string& subject,
                                const std::vector<datasets::MmluQuestion>& dev, int shots) {
  if (shots < 0 || static_cast<size_t>(shots) > dev.size()) {
    throw make_error("--shots",
                     std::to_string(shots) + " few-shot examples requested but subject " + subject +
                         " has " + std::to_string(dev.size()) + " dev questions",
                     "pass a smaller --shots");
  }
  std::string s = mmlu_description(subject);
  for (int i = 0; i < shots; ++i) {
    const auto& q = dev[static_cast<size_t>(i)];
    s += mmlu_format_question(q) + " " + kLetters[q.answer] + "\n\n";
  }
  return s;
}

std::string mmlu_prompt(const std::string& subject, const std::vector<datasets::MmluQuestion>& dev,
                        int shots, const datasets::MmluQuestion& q) {
  return mmlu_fewshot_prefix(subject, dev, shots) + mmlu_format_question(q);
}

std::vector<datasets::MmluSubject> mmlu_select(const std::vector<datasets::MmluSubject>& subjects,
                                               const std::vector<std::string>& names) {
  if (names.empty()) return subjects;
  for (const auto& n : names) {
    const bool known = std::any_of(subjects.begin(), subjects.end(),
                                   [&](const datasets::MmluSubject& s) { return s.name == n; });
    if (!known) {
      std::string some;
      for (size_t i = 0; i < subjects.size() && i < 5; ++i) {
        some += (i ? ", " : "") + subjects[i].name;
      }
      throw make_error("--subjects", "unknown subject \"" + n + "\"",
                       "known subjects include " + some);
    }
  }
  std::vector<datasets::MmluSubject> out;
  for (const auto& s : subjects) {
    if (std::find(names.begin(), names.end(), s.name) != names.end()) out.push_back(s);
  }
  return out;
}

void mmlu_check_shots(const std::vector<datasets::MmluSubject>& subjects, int shots) {
  for (const auto& s : subjects) {
    if (shots >= 0 && static_cast<size_t>(shots) <= s.dev.size()) continue;
    const std::string file = s.dev_path.empty() ? "" : " (" + s.dev_path + ")";
    throw make_error("--shots",
                     std::to_string(shots) + " few-shot examples requested but subject " + s.name +
                         " has " + count_of(static_cast<long long>(s.dev.size()), "dev question") +
                         file,
                     "pass a smaller --shots, or add dev questions");
  }
}

void mmlu_finish(MmluResult& rs) {
  rs.n = rs.correct = rs.truncated = 0;
  double sum = 0.0;
  for (const auto& s : rs.subjects) {
    rs.n += s.n;
    rs.correct += s.correct;
    rs.truncated += s.truncated;
    sum += s.accuracy();
  }
  rs.micro = rs.n > 0 ? static_cast<double>(rs.correct) / static_cast<double>(rs.n) : 0.0;
  rs.macro = rs.subjects.empty() ? 0.0 : sum / static_cast<double>(rs.subjects.size());
}

MmluResult run_mmlu(const std::vector<datasets::MmluSubject>& subjects, const MmluOptions& opt,
                    ContextScorer& scorer, const MmluProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto count = [&](const datasets::MmluSubject& s) {
    const int64_t n = static_cast<int64_t>(s.test.size());
    return opt.limit > 0 ? std::min<int64_t>(n, opt.limit) : n;
  };
  int64_t total = 0;
  for (const auto& s : subjects) {
    if (s.test.empty()) throw make_error("mmlu", "subject " + s.name + " has no test questions");
    total += count(s);
  }
  mmlu_check_shots(subjects, opt.shots);
  const std::vector<std::string> conts = {" A", " B", " C", " D"};
  MmluResult rs;
  rs.scorer = scorer.name();
  int64_t done = 0;
  for (const auto& s : subjects) {
    const std::string prefix = mmlu_fewshot_prefix(s.name, s.dev, opt.shots);
    MmluSubjectResult sr;
    sr.name = s.name;
    const int64_t n = count(s);
    for (int64_t i = 0; i < n; ++i) {
      const auto& q = s.test[static_cast<size_t>(i)];
      const std::vector<LoglikResult> r = scorer.score(prefix, mmlu_format_question(q), conts);
      int best = 0;
      for (int c = 1; c < 4; ++c) {
        if (r[static_cast<size_t>(c)].logprob > r[static_cast<size_t>(best)].logprob) best = c;
      }
      ++sr.n;
      if (best == q.answer) ++sr.correct;
      if (std::any_of(r.begin(), r.end(), [](const LoglikResult& x) { return x.truncated; })) {
        ++sr.truncated;
      }
      ++done;
      if (progress) progress(done, total);
    }
    rs.subjects.push_back(sr);
  }
  mmlu_finish(rs);
  rs.stats = scorer.stats();
  rs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rs;
}

}  // namespace cb::eval
