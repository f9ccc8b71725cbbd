// cachebench tokenize --model MODEL [--tokenizer FILE] [--no-bos] [--pieces] [--decode] TEXT...
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
  std::string text;  // TEXT's first word; the rest are the command's extras
};

std::string joined_input(const std::vector<std::string>& parts) {
  if (parts.size() == 1 && parts[0] == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? " " : "") + parts[i];
  return s;
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "Print the token ids of TEXT (or, with --decode, the text of token ids)");
  sub->add_option("--model,-m", args->model,
                  "a .gguf file (embedded vocabulary) or a Hugging Face directory "
                  "(tokenizer.model or tokenizer.json)");
  sub->add_option("--tokenizer", args->tokenizer,
                  "tokenizer file (tokenizer.model, tokenizer.json or .gguf); overrides --model");
  sub->add_flag("--no-bos", args->no_bos,
                "do not prepend the BOS token (default: the model's own rule)");
  CLI::Option* pieces =
      sub->add_flag("--pieces", args->pieces, "print id:piece pairs instead of bare ids");
  sub->add_flag("--decode", args->decode, "TEXT is a list of token ids; print their text")
      ->excludes(pieces);
  // TEXT is one string option plus the command's extra arguments, not a vector option: CLI11
  // reads a vector argument "[a,b]" as the list a, b (dropping empty items), so "[hi]" would
  // be tokenized as "hi" and --decode "[403,,407]" would pass.
  sub->add_option("TEXT", args->text, "the text (or ids); '-' reads standard input")->required();
  sub->allow_extras();
  set_action(sub, [args, sub] {
    const std::string src = !args->tokenizer.empty() ? args->tokenizer : args->model;
    if (src.empty()) {
      throw make_error("tokenize", "no tokenizer given", "pass --model MODEL or --tokenizer FILE");
    }
    auto tok = tokenizer::load_tokenizer(src);
    std::vector<std::string> words{args->text};
    for (const std::string& w : sub->remaining()) {
      if (w.size() > 2 && w.compare(0, 2, "--") == 0) {
        throw make_error("tokenize", "unknown option " + w,
                         "see cachebench tokenize --help; to tokenize text holding a word "
                         "that starts with --, pass '-' and give the text on standard input");
      }
      words.push_back(w);
    }
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
