#pragma once
/// Shared by subcommands that run a model: --model, --tokenizer, --backend, --seed.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/tokenizer/tokenizer.h"

namespace cb::app {

struct ModelArgs {
  std::string model;
  std::string tokenizer;
  std::string backend = "cpu";
  uint64_t seed = 0;  ///< preset weights
};

/// Adds --model (required), --tokenizer, --backend, --weights-seed to `sub`.
void add_model_options(CLI::App* sub, ModelArgs* a);

struct LoadedModel {
  std::unique_ptr<model::ModelSource> source;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tok;  ///< null when none is available and none is needed
};

/// Opens the source, validates --backend, loads weights, and the tokenizer (required when
/// `need_tokenizer`; a clear error names what to pass). Without `load_weights` (sim mode)
/// only the config and tokenizer are read and `model` stays null.
LoadedModel load_model(const ModelArgs& a, bool need_tokenizer, bool load_weights = true);

}  // namespace cb::app
