#include "apps/cachebench/model_args.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "apps/cachebench/cuda_backend.h"
#include "apps/cachebench/validators.h"
#include "lib/core/error.h"
#include "lib/device/gpu_info.h"
#include "lib/tokenizer/load.h"

namespace cb::app {
namespace {

// Whether anything is at `p`: what it is (a FIFO, a directory, a file it cannot read) the
// tokenizer's loader judges, naming it. Never opened here, which would block on a FIFO.
bool file_exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

}  // namespace

void add_sampling_options(CLI::App* sub, model::SamplerConfig* c) {
  sub->add_option("--temperature", c->temperature, "sampling temperature; 0 is greedy")
      ->capture_default_str()
      ->check(in_range(0.0, 100.0));
  sub->add_option("--top-k", c->top_k, "sample from the k likeliest tokens only; 0: all")
      ->capture_default_str()
      ->check(at_least(0));
  sub->add_option("--top-p", c->top_p,
                  "nucleus sampling: from the smallest set of likeliest tokens whose probability "
                  "reaches p; 1: all")
      ->capture_default_str()
      ->check(detail::number("in (0, 1]", "in (0, 1]", [](double v) { return v > 0 && v <= 1; }));
  sub->add_option("--min-p", c->min_p,
                  "drop tokens less likely than min-p times the likeliest token; 0: none")
      ->capture_default_str()
      ->check(in_range(0.0, 1.0));
  sub->add_option(
         "--repeat-penalty", c->repeat_penalty,
         "divide a recent token's positive logit by this (multiply a negative one); 1: off")
      ->capture_default_str()
      ->check(in_range(0.01, 100.0));
  sub->add_option("--repeat-last-n", c->repeat_last_n,
                  "how many recent tokens --repeat-penalty looks at; -1: the whole context, 0: "
                  "none (as llama.cpp)")
      ->capture_default_str()
      ->check(at_least(-1));
  sub->add_option("--seed", c->seed, "sampling seed")->capture_default_str();
}

void refuse_idle_sampling_options(CLI::App& sub, const model::SamplerConfig& c) {
  if (c.greedy()) {
    refuse_given(sub, {"--seed", "--top-k", "--top-p", "--min-p"},
                 "has no effect when decoding is greedy (--temperature 0, the default)",
                 "pass --temperature T above 0 to sample, or drop it");
  }
  if (c.repeat_penalty == 1.0) {
    refuse_given(sub, {"--repeat-last-n"}, "has no effect while --repeat-penalty is 1 (off)",
                 "pass --repeat-penalty P other than 1, or drop it");
  }
}

void add_backend_options(CLI::App* sub, ModelArgs* a) {
  sub->add_option("--backend", a->backend,
                  "compute backend: cpu; cuda (an NVIDIA GPU; parity-tested, not yet at the "
                  "hardware's limits: docs/perf.md); auto: cuda when a GPU is usable, else cpu")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--gpu-storage", a->gpu_storage,
                  "--backend cuda: storage of weights, activations and KV (fp32 accumulation)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  sub->add_option("--gpu", a->gpu, "--backend cuda: device index")
      ->check(at_least(0))
      ->capture_default_str();
  a->backend_sub = sub;
}

void add_cpu_weights_option(CLI::App* sub, ModelArgs* a) {
  sub->add_option("--cpu-weights", a->cpu_weights,
                  "--backend cpu: weight storage; bf16 holds the matrices (embedding, linear "
                  "layers, LM head) in bfloat16, half the memory, rounded to nearest even (fp32 "
                  "math either way)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
}

model::WeightStorage cpu_weight_storage(const ModelArgs& a) {
  model::WeightStorage s = model::WeightStorage::F32;
  if (!model::parse_weight_storage(a.cpu_weights, &s)) {
    throw make_error("--cpu-weights", "unknown storage '" + a.cpu_weights + "'",
                     "pass f32 or bf16");
  }
  if (s != model::WeightStorage::F32 && a.backend == "cuda") {
    throw make_error("--cpu-weights",
                     "applies to the CPU backend, and this run uses --backend cuda (its weight "
                     "storage is --gpu-storage)",
                     "add --backend cpu, or drop --cpu-weights");
  }
  return s;
}

void resolve_backend(ModelArgs* a, bool cuda_ok) {
  if (a->backend == "cpu" && a->backend_sub != nullptr) {
    refuse_given(*a->backend_sub, {"--gpu-storage", "--gpu"}, "has no effect with --backend cpu",
                 "drop it, or pass --backend cuda");
  }
  if (a->backend != "auto") return;
  std::string why;
  if (a->cpu_weights != "f32") {  // --cpu-weights asks for the CPU backend
    why = "--cpu-weights " + a->cpu_weights + " asks for the CPU backend";
  } else if (!cuda_ok) {
    why = "this subcommand runs on the CPU in the mode asked for";
  } else if (!device::list_gpus(&why).empty()) {
    a->backend = "cuda";
    return;
  } else {
    why = "no usable GPU" + (why.empty() ? "" : ": " + why);
  }
  a->backend = "cpu";
  // The GPU options were given for a GPU that is not used: say so rather than drop them unseen.
  for (const char* n : {"--gpu-storage", "--gpu"}) {
    if (a->backend_sub != nullptr && was_given(*a->backend_sub, n)) {
      std::fprintf(stderr, "cachebench: note: %s is ignored: --backend auto runs on the CPU (%s)\n",
                   n, why.c_str());
    }
  }
}

void add_model_options(CLI::App* sub, ModelArgs* a, bool cuda) {
  sub->add_option("--model,-m", a->model,
                  "a .gguf file, a Hugging Face checkpoint directory, or preset:NAME")
      ->required();
  sub->add_option(
      "--tokenizer", a->tokenizer,
      "tokenizer file (tokenizer.model, tokenizer.json or .gguf); default: the model's own");
  if (cuda) {
    add_backend_options(sub, a);
  } else {
    a->backend = "cpu";
    sub->add_option("--backend", a->backend,
                    "compute backend (this subcommand runs on the CPU backend only)")
        ->check(CLI::IsMember({"cpu"}))
        ->capture_default_str();
  }
  add_cpu_weights_option(sub, a);
  sub->add_option("--weights-seed", a->seed, "seed of preset weights")->capture_default_str();
  a->model_sub = sub;
}

void refuse_weights_seed_for_file(const ModelArgs& a, const model::ModelSource& src) {
  if (src.kind() != model::SourceKind::Preset && a.model_sub != nullptr) {
    refuse_given(*a.model_sub, {"--weights-seed"},
                 "seeds a preset's random weights, and " + a.model + " has its own",
                 "drop it, or pass --model preset:NAME");
  }
}

LoadedModel load_model(const ModelArgs& a, bool need_tokenizer, bool load_weights) {
  LoadedModel m;
  m.source = model::ModelSource::open(a.model);
  refuse_weights_seed_for_file(a, *m.source);
  if (!a.tokenizer.empty()) {
    m.tok = tokenizer::load_tokenizer(a.tokenizer);
  } else if (m.source->gguf() != nullptr && m.source->gguf()->has("tokenizer.ggml.model")) {
    m.tok = tokenizer::tokenizer_from_gguf(*m.source->gguf());
  } else if (m.source->kind() == model::SourceKind::HuggingFace &&
             (file_exists(m.source->location() + "/tokenizer.model") ||
              file_exists(m.source->location() + "/tokenizer.json"))) {
    try {
      m.tok = tokenizer::load_tokenizer(m.source->location());
    } catch (const Error& e) {
      // A command that runs token ids (forward --tokens, a length trace) runs without it.
      if (need_tokenizer) throw;
      std::fprintf(stderr, "cachebench: note: the checkpoint's tokenizer is not used: %s\n",
                   e.what());
    }
  }
  if (need_tokenizer && !m.tok) {
    throw make_error(a.model, "no tokenizer for this model", "pass --tokenizer FILE");
  }
  if (m.tok && m.tok->vocab_size() > static_cast<size_t>(m.source->config().vocab_size)) {
    throw make_error(a.tokenizer.empty() ? a.model : a.tokenizer,
                     "tokenizer has " + std::to_string(m.tok->vocab_size()) +
                         " tokens but the model's vocabulary is " +
                         std::to_string(m.source->config().vocab_size),
                     "pass the tokenizer that belongs to this model");
  }
  if (a.backend == "auto") {
    throw make_error("--backend", "auto was not resolved (internal error)");
  }
  const model::WeightStorage storage = cpu_weight_storage(a);
  if (load_weights && a.backend == "cuda") {
    m.device_model = make_cuda_model(*m.source, a.seed, a.gpu_storage, a.gpu);
  } else if (load_weights) {
    m.model = model::Model::load(*m.source, a.seed, storage);
  }
  return m;
}

std::vector<int32_t> parse_token_ids(const std::string& s, long vocab, const std::string& option) {
  const std::string hint = "pass ids separated by commas or spaces, e.g. 1,403,407";
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  if (e - b >= 2 && s[b] == '[' && s[e - 1] == ']') ++b, --e;
  std::vector<int32_t> ids;
  bool comma_pending = false;  // a comma after the last id, not yet followed by one
  for (size_t i = b; i < e;) {
    if (space(s[i])) {
      ++i;
    } else if (s[i] == ',') {
      if (ids.empty() || comma_pending) {
        throw make_error(option,
                         "empty item at character " + std::to_string(i + 1) +
                             " of the id list (a comma with no id before it)",
                         hint);
      }
      comma_pending = true;
      ++i;
    } else {
      size_t j = i;
      while (j < e && !space(s[j]) && s[j] != ',') ++j;
      const std::string w = s.substr(i, j - i);
      const bool digits = w.size() <= 18 && std::all_of(w.begin(), w.end(), [](char c) {
                            return c >= '0' && c <= '9';
                          });
      const long long v = digits ? std::stoll(w) : -1;
      if (v < 0 || v >= vocab) {
        throw make_error(option, "'" + w + "' is not a token id in 0.." + std::to_string(vocab - 1),
                         hint);
      }
      ids.push_back(static_cast<int32_t>(v));
      comma_pending = false;
      i = j;
    }
  }
  if (comma_pending) throw make_error(option, "the id list ends with a comma", hint);
  if (ids.empty()) throw make_error(option, "no token ids given", hint);
  return ids;
}

datasets::TokenizeFn trace_tokenizer(const LoadedModel& lm, datasets::TraceLoadOptions* lo) {
  if (!lm.tok) return {};
  const tokenizer::Tokenizer* tk = lm.tok.get();
  if (tk->add_bos_default()) lo->bos = tk->bos_id();  // before each conversation, as chat
  return [tk](const std::string& s) { return tk->encode(s, false); };
}

}  // namespace cb::app
