#pragma once
/// MMLU as lm-evaluation-harness's default "mmlu" task runs it (the original Hendrycks
/// prompt, tasks/mmlu/default):
///   description  "The following are multiple choice questions (with answers) about
///                {subject, '_' -> ' '}.\n\n"
///   doc_to_text  "{question.strip()}\nA. {c0}\nB. {c1}\nC. {c2}\nD. {c3}\nAnswer:"
///   few-shot     the first k dev questions in file order (sampler first_n), each
///                doc_to_text + " " + letter, joined and followed by "\n\n"
///   request      context = description + few-shot + doc_to_text(test question),
///                continuations " A", " B", " C", " D" (target_delimiter " ")
///   metric       acc: the argmax of the four log-likelihoods (first on ties) is the answer;
///                per subject, then the size-weighted (micro) average over all questions,
///                plus the unweighted (macro) mean of the subjects.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "datasets/mmlu.h"
#include "eval/loglik.h"

namespace cb::eval {

/// "The following are multiple choice questions (with answers) about {subject}.\n\n".
std::string mmlu_description(const std::string& subject);

/// doc_to_text: "{question.strip()}\nA. ...\nD. {c3}\nAnswer:".
std::string mmlu_format_question(const datasets::MmluQuestion& q);

/// Description plus the first `shots` dev questions with their answers (each followed by
/// "\n\n"); throws cb::Error when dev holds fewer than `shots` questions.
std::string mmlu_fewshot_prefix(const std::string& subject,
                                const std::vector<datasets::MmluQuestion>& dev, int shots);

/// The full context of one test question: prefix + mmlu_format_question(q).
std::string mmlu_prompt(const std::string& subject, const std::vector<datasets::MmluQuestion>& dev,
                        int shots, const datasets::MmluQuestion& q);

/// Run options.
struct MmluOptions {
  int shots = 5;
  int limit = 0;                      ///< at most this many test questions per subject (0: all)
  std::vector<std::string> subjects;  ///< only these (empty: all); unknown names are an error
};

/// Accuracy of one subject.
struct MmluSubjectResult {
  std::string name;
  int64_t n = 0;
  int64_t correct = 0;
  int64_t truncated = 0;  ///< questions whose prompt was cut (or overflowed) to fit the window
  double accuracy() const { return n > 0 ? static_cast<double>(correct) / n : 0.0; }
};

/// A whole run under one scorer.
struct MmluResult {
  std::string scorer;  ///< ContextScorer::name()
  std::vector<MmluSubjectResult> subjects;
  int64_t n = 0;
  int64_t correct = 0;
  int64_t truncated = 0;
  double micro = 0.0;  ///< correct / n over all questions (size-weighted)
  double macro = 0.0;  ///< mean of the subjects' accuracies
  double seconds = 0.0;
  ScorerStats stats;
};

/// Keeps the subjects named in `names` (all when empty), in `subjects` order; throws
/// cb::Error naming an unknown subject and listing a few known ones.
std::vector<datasets::MmluSubject> mmlu_select(const std::vector<datasets::MmluSubject>& subjects,
                                               const std::vector<std::string>& names);

/// Throws cb::Error naming the first of `subjects` whose dev file holds fewer than `shots`
/// questions (and the file), so that a run stops before scoring rather than after whole
/// subjects.
void mmlu_check_shots(const std::vector<datasets::MmluSubject>& subjects, int shots);

/// Micro and macro averages and totals from rs.subjects.
void mmlu_finish(MmluResult& rs);

/// Progress callback: (questions done, questions in total).
using MmluProgress = std::function<void(int64_t, int64_t)>;

/// Evaluates `subjects` (already selected) with `scorer`. Each subject needs `shots` dev
/// questions (mmlu_check_shots, before any scoring); a subject with no test question is an
/// error.
MmluResult run_mmlu(const std::vector<datasets::MmluSubject>& subjects, const MmluOptions& opt,
                    ContextScorer& scorer, const MmluProgress& progress = {});

}  // namespace cb::eval
