#pragma once
/// Shared by subcommands that run a model: --model, --tokenizer, --backend, --seed.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/trace.h"
#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/model/sampler.h"
#include "lib/tokenizer/tokenizer.h"

namespace cb::app {

struct ModelArgs {
  std::string model;
  std::string tokenizer;
  std::string backend = "auto";     ///< cpu, cuda, or auto (resolve_backend picks one)
  std::string gpu_storage = "f16";  ///< --backend cuda: f32, f16 or bf16
  std::string cpu_weights = "f32";  ///< --backend cpu: f32, or bf16 matrices
  int gpu = 0;                      ///< --backend cuda: device index
  uint64_t seed = 0;                ///< preset weights
  /// The subcommand when it has --gpu-storage and --gpu (add_backend_options), so that
  /// resolve_backend can refuse them with --backend cpu, which would ignore them.
  CLI::App* backend_sub = nullptr;
  /// The subcommand that has --weights-seed (add_model_options sets it), so that
  /// refuse_weights_seed_for_file can refuse it for a model file, whose weights it would not
  /// touch.
  CLI::App* model_sub = nullptr;
};

/// Whether the model is a preset, whose random weights --weights-seed picks: results record the
/// seed then (`weights_seed`), which gate compares.
inline bool seeded_weights(const ModelArgs& a) {
  return a.model.rfind("preset:", 0) == 0;
}

/// "cpu", "cpu bf16" (bf16 weights), or "cuda f16" (the backend and the GPU storage) for
/// results and reports.
inline std::string backend_label(const ModelArgs& a) {
  if (a.backend == "cuda") return "cuda " + a.gpu_storage;
  return a.backend == "cpu" && a.cpu_weights != "f32" ? "cpu " + a.cpu_weights : a.backend;
}

/// Adds --backend auto|cpu|cuda, --gpu-storage and --gpu to `sub`.
void add_backend_options(CLI::App* sub, ModelArgs* a);

/// Replaces --backend auto by what runs: cuda when `cuda_ok` (the subcommand, in the mode
/// asked for, runs on the GPU), no --cpu-weights other than f32 was asked for, this build has
/// the CUDA backend and a GPU is usable; else cpu.
/// An explicit cpu or cuda is kept (load_model reports a cuda that cannot run); an explicit
/// cpu with --gpu-storage or --gpu given is an error naming the option.
void resolve_backend(ModelArgs* a, bool cuda_ok = true);

/// Adds --model (required), --tokenizer, --backend, --cpu-weights, --weights-seed to `sub`;
/// with `cuda` the subcommand runs on either backend (--backend cpu|cuda, --gpu-storage, --gpu).
void add_model_options(CLI::App* sub, ModelArgs* a, bool cuda = false);

/// Adds --temperature, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n and --seed
/// (the sampler's; greedy by default) to `sub`.
void add_sampling_options(CLI::App* sub, model::SamplerConfig* c);
/// Refuses the sampling options of `sub` that `c` makes idle, naming the first given: --seed,
/// --top-k, --top-p and --min-p when greedy (--temperature 0), --repeat-last-n without a
/// --repeat-penalty other than 1.
void refuse_idle_sampling_options(CLI::App& sub, const model::SamplerConfig& c);

/// Refuses --weights-seed, given on a.model_sub, when `src` is a model file (not a preset):
/// load_model does; a command that opens its source itself calls it.
void refuse_weights_seed_for_file(const ModelArgs& a, const model::ModelSource& src);

struct LoadedModel {
  std::unique_ptr<model::ModelSource> source;
  std::unique_ptr<model::Model> model;                ///< the CPU model (null with --backend cuda)
  std::unique_ptr<model::ForwardModel> device_model;  ///< --backend cuda
  std::unique_ptr<tokenizer::Tokenizer> tok;  ///< null when none is available and none is needed

  /// The model forward passes run on: the GPU's with --backend cuda, else the CPU's.
  const model::ForwardModel& runner() const {
    return device_model ? *device_model : static_cast<const model::ForwardModel&>(*model);
  }
  const model::ModelConfig& config() const { return source->config(); }
};

/// Adds --cpu-weights f32|bf16 (the CPU backend's weight storage) to `sub`.
void add_cpu_weights_option(CLI::App* sub, ModelArgs* a);
/// The storage --cpu-weights names; refuses bf16 with --backend cuda, which would ignore it.
model::WeightStorage cpu_weight_storage(const ModelArgs& a);

/// Opens the source, validates --backend, loads weights, and the tokenizer (required when
/// `need_tokenizer`; a clear error names what to pass). Without `load_weights` (sim mode)
/// only the config and tokenizer are read and `model` stays null.
LoadedModel load_model(const ModelArgs& a, bool need_tokenizer, bool load_weights = true);

/// The model's tokenizer as a served ShareGPT conversation meets it (replay, ablate): each
/// message without BOS, and the tokenizer's BOS before each conversation's first message when
/// it adds one (set in `lo`). Empty without a tokenizer (a length trace needs none).
datasets::TokenizeFn trace_tokenizer(const LoadedModel& lm, datasets::TraceLoadOptions* lo);

/// Token ids from `s`: integers in 0..vocab-1 separated by commas and/or whitespace, with an
/// optional surrounding [ ] (a JSON list). An empty item ("1,,2", "1,2,") or no ids at all is an
/// error naming `option`, as is anything else that is not an id.
std::vector<int32_t> parse_token_ids(const std::string& s, long vocab, const std::string& option);

}  // namespace cb::app
