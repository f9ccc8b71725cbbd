// cachebench tokenize --model MODEL [--tokenizer FILE] [--no-bos] [--pieces] [--decode] [--]
// TEXT...
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "apps/cachebench/model_args.h"
#include "apps/cachebench/subcommands.h"
#include "lib/core/error.h"
#include "lib/tokenizer/load.h"

namespace cb::app {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string tokenizer;
  bool no_bos = false;
  bool decode = false;
  bool pieces = false;
};

std::string joined_input(const std::vector<std::string>& parts) {
  if (parts.size() == 1 && parts[0] == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? " " : "") + parts[i];
  return s;
}

std::vector<std::string>& text_after_dashes() {
  static std::vector<std::string> words;
  return words;
}

}  // namespace

void take_tokenize_text_after_dashes(int* argc, char** argv) {
  if (*argc < 2 || std::string(argv[1]) != "tokenize") return;
  for (int i = 2; i < *argc; ++i) {
    if (std::string(argv[i]) != "--") continue;
    text_after_dashes().assign(argv + i + 1, argv + *argc);
    *argc = i;
    return;
  }
}

void register_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Print the token ids of TEXT (or, with --decode, the text of token ids)");
  CLI::Option* model =
      sub->add_option("--model,-m", args->model,
                      "a .gguf file (embedded vocabulary) or a Hugging Face directory "
                      "(tokenizer.model or tokenizer.json)");
  sub->add_option("--tokenizer", args->tokenizer,
                  "tokenizer file (tokenizer.model, tokenizer.json or .gguf), instead of --model")
      ->excludes(model);
  CLI::Option* no_bos = sub->add_flag(
      "--no-bos", args->no_bos, "do not prepend the BOS token (default: the model's own rule)");
  CLI::Option* pieces =
      sub->add_flag("--pieces", args->pieces, "print id:piece pairs instead of bare ids");
  // Decoding prints the text of the ids given: BOS and pieces have no part in it.
  sub->add_flag("--decode", args->decode, "TEXT is a list of token ids; print their text")
      ->excludes(pieces)
      ->excludes(no_bos);
  // TEXT is every argument from the first that is not an option on, in order (CLI11's prefix
  // command), not a vector option: CLI11 reads a vector argument "[a,b]" as the list a, b
  // (dropping empty items), so "[hi]" would be tokenized as "hi" and --decode "[403,,407]"
  // would pass.
  sub->prefix_command();
  sub->footer(
      "TEXT: the words after the options, joined by spaces (or ids with --decode); '-' reads "
      "standard input; the first -- ends the options wherever it stands and is dropped: put "
      "it before a TEXT that starts with '-' or holds a word such as --x");
  set_action(sub, [args, sub] {
    std::vector<std::string> words = sub->remaining();
    if (!words.empty() && words.front().size() > 1 && words.front()[0] == '-') {
      // Usage errors CLI11 would have caught without the prefix command: exit 2 as its do.
      return report_error(make_error("tokenize", "unknown option " + words.front(),
                                     "see cachebench tokenize --help; to tokenize text that "
                                     "starts with '-', put -- before it"),
                          2);
    }
    // Everything after TEXT's first word is text: an option there would be tokenized.
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string& w = words[i];
      if ((w.size() > 2 && w.compare(0, 2, "--") == 0) || w == "-m") {
        return report_error(
            make_error("tokenize", w + " comes after TEXT, where it would be tokenized as text",
                       "put the options before TEXT, or -- before a TEXT that holds it"),
            2);
      }
    }
    words.insert(words.end(), text_after_dashes().begin(), text_after_dashes().end());
    if (words.empty()) {
      throw make_usage_error("tokenize", "no TEXT given",
                             "give the text after the options, or '-' to read standard input");
    }
    const std::string src = !args->tokenizer.empty() ? args->tokenizer : args->model;
    if (src.empty()) {
      throw make_usage_error("tokenize", "no tokenizer given",
                             "pass --model MODEL or --tokenizer FILE");
    }
    auto tok = tokenizer::load_tokenizer(src);
    const std::string input = joined_input(words);
    if (args->decode) {
      const std::string text =
          tok->decode(parse_token_ids(input, static_cast<long>(tok->vocab_size()), "--decode"));
      std::fwrite(text.data(), 1, text.size(), stdout);  // a decoded NUL byte is text too
      std::fputc('\n', stdout);
      return 0;
    }
    const bool bos = !args->no_bos && tok->add_bos_default();
    const std::vector<int32_t> ids = tok->encode(input, bos);
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      out += i ? " " : "";
      out += std::to_string(ids[i]);
      if (args->pieces) out += ":" + tok->piece(ids[i]);
    }
    std::printf("%s\n", out.c_str());
    std::fflush(stdout);
    std::fprintf(stderr, "%zu tokens (%s)\n", ids.size(), tok->kind().c_str());
    return 0;
  });
}

}  // namespace cb::app
