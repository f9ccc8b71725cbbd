#include "lib/model/model_source.h"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/regular_file.h"
#include "lib/model/gguf_config.h"
#include "lib/model/hf_config.h"
#include "lib/model/presets.h"

namespace cb::model {

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Whether two paths name the same file (a link to it, or another spelling of its path).
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

/// MODEL `file`, a .safetensors in checkpoint directory `dir`, is loaded as `dir`: refused
/// unless it is all the weights `dir` loads, since any other file's weights would run under the
/// directory's name (until 2026-12-07 it was checked and then `dir` loaded, whatever it held).
void refuse_other_weights(const std::string& file, const std::string& dir) {
  const std::vector<std::string> files = formats::SafetensorsCheckpoint::weight_files(dir);
  if (files.size() == 1 && same_file(files[0], file)) return;
  bool one_of = false;
  for (const auto& f : files) one_of = one_of || same_file(f, file);
  const std::string loads = files.size() == 1
                                ? files[0]
                                : std::to_string(files.size()) + " files (" + files[0] + ", ...)";
  throw make_error(file,
                   one_of ? "is one of the " + std::to_string(files.size()) +
                                " files of the checkpoint in " + dir + ", which loads them all"
                          : "is not the weights of the checkpoint in " + dir + ", which loads " +
                                loads + ": its config.json and tokenizer are that checkpoint's",
                   one_of ? "pass the directory " + dir
                          : "pass the directory " + dir +
                                ", or put this file in a directory of its own, with its "
                                "config.json, as model.safetensors");
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool dtype_ok(TensorRole role, DType t) {
  if (t == DType::I32) return false;
  if (role == TensorRole::NormWeight || role == TensorRole::NormBias) return !dtype_is_quantized(t);
  return true;
}

}  // namespace

const char* source_kind_name(SourceKind k) {
  switch (k) {
    case SourceKind::Gguf: return "gguf";
    case SourceKind::HuggingFace: return "huggingface";
    case SourceKind::Preset: return "preset";
  }
  return "?";
}

std::unique_ptr<ModelSource> ModelSource::open(const std::string& arg) {
  if (arg.empty()) {
    throw make_error("MODEL", "an empty path",
                     "MODEL is a .gguf file, a Hugging Face checkpoint directory, or preset:NAME");
  }
  std::unique_ptr<ModelSource> s(new ModelSource());
  s->location_ = arg;
  if (arg.rfind("preset:", 0) == 0) {
    s->open_preset(arg.substr(7));
  } else if (is_dir(arg)) {
    s->open_hf(arg);
  } else if (ends_with(arg, ".safetensors") && path_exists_checked(arg)) {
    // A weights file stands for the checkpoint directory it sits in (its config.json, its
    // tokenizer), so it must be the weights that directory loads. Its own faults come first.
    formats::SafetensorsFile::open(arg);
    const size_t slash = arg.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : arg.substr(0, slash);
    if (!path_exists_checked(dir + "/config.json")) {
      throw make_error(
          arg, "a safetensors file has no model configuration",
          "pass the Hugging Face checkpoint directory holding config.json and the weights");
    }
    refuse_other_weights(arg, dir);
    s->location_ = dir;
    s->open_hf(dir);
  } else if (path_exists_checked(arg)) {
    s->open_gguf(arg);
  } else {
    throw make_error(arg, "no such file or directory",
                     "MODEL is a .gguf file, a Hugging Face checkpoint directory, or preset:NAME");
  }
  return s;
}

const formats::TensorRef* ModelSource::tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second].second;
}

void ModelSource::open_preset(const std::string& name) {
  kind_ = SourceKind::Preset;
  config_ = preset_config(name);
  config_.validate(location_);
  for (const auto& spec : expected_tensors(config_))
    weight_bytes_ += dtype_bytes(config_.weight_dtype, static_cast<size_t>(spec.numel()));
}

void ModelSource::open_gguf(const std::string& path) {
  kind_ = SourceKind::Gguf;
  gguf_ = formats::GgufFile::open(path);
  config_ = config_from_gguf(*gguf_);
  if (gguf_->tensors().empty()) {
    vocab_only_ = true;
    return;
  }
  std::map<std::string, formats::TensorRef> by_name;
  for (const auto& t : gguf_->tensors()) by_name.emplace(t.name, t);
  bind_and_validate(by_name, path);
}

void ModelSource::open_hf(const std::string& dir) {
  kind_ = SourceKind::HuggingFace;
  config_ = config_from_hf(dir + "/config.json");
  st_ = formats::SafetensorsCheckpoint::open_dir(dir);
  std::map<std::string, formats::TensorRef> by_canonical;
  for (const auto& t : st_->tensors()) {
    const std::string c = hf_to_canonical(t.name, config_);
    if (!c.empty()) {
      const auto [it, inserted] = by_canonical.emplace(c, t);
      if (!inserted) throw twice_mapped(c, it->second, t);
    } else if (!ends_with(t.name, "rotary_emb.inv_freq")) {  // a buffer older exports saved
      throw unused_tensor(t);
    }
  }
  bind_and_validate(by_canonical, dir);
  // The tensors' own type, as for GGUF (config.json's torch_dtype may say otherwise).
  const formats::TensorRef* probe = tensor("blk.0.ffn_up.weight");
  if (probe == nullptr) probe = tensor("token_embd.weight");
  if (probe != nullptr) config_.weight_dtype = probe->dtype;
}

Error ModelSource::twice_mapped(const std::string& canonical, const formats::TensorRef& a,
                                const formats::TensorRef& b) const {
  // Two names for one weight (Falcon's input_layernorm and ln_attn): keeping either would
  // compute a model that depends on the order of the files.
  const std::string where = a.file == b.file ? a.file : a.file + " and " + b.file;
  return make_error(where,
                    "tensors '" + a.name + "' and '" + b.name + "' are both the " +
                        arch_name(config_.arch) + " model's '" + canonical +
                        "': using one would ignore the other and compute another model",
                    "keep only the tensor the checkpoint's config means (remove the other)");
}

Error ModelSource::unused_tensor(const formats::TensorRef& t) const {
  return make_error(t.file,
                    "tensor '" + t.name + "' is not part of the " + arch_name(config_.arch) +
                        " model its config describes (a bias, RoPE frequencies or another "
                        "variant cachebench does not run): ignoring it would compute another "
                        "model",
                    "use a checkpoint of a supported variant (no biases, no RoPE scaling)");
}

namespace {

/// A tied model's lm_head.weight must be a copy of its embeddings (same type, shape and bytes).
void check_tied_head(const formats::TensorRef& head,
                     std::map<std::string, formats::TensorRef>::const_iterator embd,
                     std::map<std::string, formats::TensorRef>::const_iterator end) {
  if (embd == end) return;  // reported as a missing tensor
  const formats::TensorRef& e = embd->second;
  if (head.dtype == e.dtype && head.shape == e.shape && head.nbytes == e.nbytes &&
      std::memcmp(head.data, e.data, e.nbytes) == 0) {
    return;
  }
  throw make_error(head.file,
                   "tensor '" + head.name + "' differs from the embeddings '" + e.name +
                       "', while config.json says tie_word_embeddings: true (transformers 4 "
                       "ties the head to the embeddings whatever the file holds, transformers 5 "
                       "keeps the file's)",
                   "set tie_word_embeddings to false in config.json to use the file's head, or "
                   "drop the tensor to tie it");
}

}  // namespace

void ModelSource::bind_and_validate(const std::map<std::string, formats::TensorRef>& by_canonical,
                                    const std::string& where) {
  // Layers past the config's count are a checkpoint that does not match it (llama.cpp
  // refuses a GGUF whose tensor count is off): silently dropping them would run another model.
  for (const auto& [name, t] : by_canonical) {
    if (name.rfind("blk.", 0) != 0) continue;
    const int64_t layer = std::strtoll(name.c_str() + 4, nullptr, 10);
    if (layer >= config_.n_layers) {
      throw make_error(t.file,
                       "tensor '" + t.name + "' belongs to layer " + std::to_string(layer) +
                           ", but the model config has " + std::to_string(config_.n_layers) +
                           " layers",
                       "the checkpoint does not match its config (block_count / "
                       "num_hidden_layers)");
    }
  }
  const std::vector<TensorSpec> expected = expected_tensors(config_);
  std::set<std::string> names;
  for (const auto& spec : expected) names.insert(spec.name);
  for (const auto& [name, t] : by_canonical) {
    // A tied model's checkpoint may still hold lm_head.weight, a copy of the embeddings; a head
    // that differs is ambiguous (transformers 4 ties it to the embeddings whatever the file
    // holds, transformers 5 then keeps the file's), so it is refused. Any other tensor the
    // model does not use would leave another model computed.
    const bool tied_head =
        name == "output.weight" && config_.tied_embeddings && kind_ == SourceKind::HuggingFace;
    if (tied_head) {
      check_tied_head(t, by_canonical.find("token_embd.weight"), by_canonical.end());
      continue;
    }
    if (names.count(name) == 0) throw unused_tensor(t);
  }
  for (const auto& spec : expected) {
    auto it = by_canonical.find(spec.name);
    if (it == by_canonical.end()) {
      const std::string hf =
          kind_ == SourceKind::HuggingFace ? canonical_to_hf(spec.name, config_) : "";
      throw make_error(where,
                       "missing tensor '" + (hf.empty() ? spec.name : hf + "' ('" + spec.name) +
                           (hf.empty() ? "'" : "')") + " (shape " + formats::shape_str(spec.shape) +
                           ") required by the model config",
                       "the checkpoint is incomplete or does not match its config");
    }
    const formats::TensorRef& t = it->second;
    const std::string label =
        t.name == spec.name ? "'" + t.name + "'" : "'" + t.name + "' (" + spec.name + ")";
    if (t.shape != spec.shape) {
      throw make_error(t.file,
                       "tensor " + label + " has shape " + formats::shape_str(t.shape) +
                           ", expected " + formats::shape_str(spec.shape) +
                           " from the model config",
                       "the checkpoint does not match its config");
    }
    if (!dtype_ok(spec.role, t.dtype)) {
      throw make_error(t.file,
                       std::string("tensor ") + label + " has dtype " + dtype_name(t.dtype) +
                           ", which cachebench cannot use for this tensor",
                       "use f32, f16 or bf16 (GGUF quantized types for matrices only)");
    }
    index_[spec.name] = tensors_.size();
    tensors_.emplace_back(spec.name, t);
    weight_bytes_ += t.nbytes;
  }
}

}  // namespace cb::model
