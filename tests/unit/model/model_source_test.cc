#include "lib/model/model_source.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "lib/core/error.h"
#include "lib/model/hf_config.h"
#include "lib/model/presets.h"
#include "tests/support/hf_checkpoint.h"
#include "tests/support/safetensors_writer.h"
#include "tests/support/test_data.h"

namespace {

using cb::model::ModelSource;
using nlohmann::json;

std::string error_of(const std::string& arg) {
  try {
    ModelSource::open(arg);
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelSourceTest, Stories260KGguf) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = ModelSource::open(path);
  const auto& c = src->config();
  EXPECT_EQ(src->kind(), cb::model::SourceKind::Gguf);
  EXPECT_EQ(c.arch, cb::model::Arch::Llama);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.ffn_hidden, 172);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.rope_style, cb::model::RopeStyle::Interleaved);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(src->tensors().size(), 48u);
  EXPECT_EQ(src->weight_bytes(), cb::model::parameter_count(c) * 4);  // all F32
  ASSERT_NE(src->tensor("blk.4.ffn_down.weight"), nullptr);
  EXPECT_EQ(src->tensor("blk.4.ffn_down.weight")->shape, (std::vector<int64_t>{64, 172}));
}

TEST(ModelSourceTest, VocabOnlyGgufOpensWithoutTensors) {
  CB_REQUIRE_DATA(path, "models/llamacpp-vocab/ggml-vocab-falcon.gguf");
  auto src = ModelSource::open(path);
  EXPECT_TRUE(src->vocab_only());
  EXPECT_EQ(src->config().arch, cb::model::Arch::Falcon);
  EXPECT_EQ(src->config().n_kv_heads, 1);
  EXPECT_EQ(src->config().vocab_size, 65024);
}

TEST(ModelSourceTest, Preset) {
  auto src = ModelSource::open("preset:llama-2-70b");
  EXPECT_EQ(src->kind(), cb::model::SourceKind::Preset);
  EXPECT_EQ(src->config().n_kv_heads, 8);
  EXPECT_EQ(src->weight_bytes(), 68976648192ull * 2);  // fp16
  EXPECT_NE(error_of("preset:nope").find("available presets"), std::string::npos);
}

TEST(ModelSourceTest, MissingPathSaysWhatModelIs) {
  EXPECT_NE(error_of("/no/such/model.gguf").find("preset:NAME"), std::string::npos);
}

// ---- tiny Hugging Face checkpoints --------------------------------------------------

std::vector<cb::test::StTensor> filled(
    const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs,
    const std::string& dtype) {
  std::vector<cb::test::StTensor> out;
  for (const auto& [name, shape] : specs) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> vals(static_cast<size_t>(n));
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i % 7) * 0.125f;
    out.push_back({name, dtype, shape, vals});
  }
  return out;
}

json llama_config(const std::string& arch) {
  return {{"architectures", {arch}},   {"hidden_size", 32},
          {"intermediate_size", 48},   {"num_hidden_layers", 2},
          {"num_attention_heads", 4},  {"num_key_value_heads", 2},
          {"vocab_size", 40},          {"max_position_embeddings", 128},
          {"rms_norm_eps", 1e-6},      {"rope_theta", 500000.0},
          {"torch_dtype", "bfloat16"}, {"sliding_window", 16}};
}

TEST(ModelSourceTest, HfLlamaAndMistralDirectories) {
  const auto tensors = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "BF16");
  auto src = ModelSource::open(
      cb::test::write_checkpoint("hf_llama", llama_config("LlamaForCausalLM"), tensors));
  const auto& c = src->config();
  EXPECT_EQ(c.arch, cb::model::Arch::Llama);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_style, cb::model::RopeStyle::RotateHalf);
  EXPECT_EQ(c.sliding_window, 0);  // LLaMA ignores the field
  EXPECT_EQ(c.weight_dtype, cb::DType::BF16);
  ASSERT_NE(src->tensor("blk.1.attn_k.weight"), nullptr);
  EXPECT_EQ(src->tensor("blk.1.attn_k.weight")->name, "model.layers.1.self_attn.k_proj.weight");

  auto m = ModelSource::open(
      cb::test::write_checkpoint("hf_mistral", llama_config("MistralForCausalLM"), tensors, 3));
  EXPECT_EQ(m->config().arch, cb::model::Arch::Mistral);
  EXPECT_EQ(m->config().sliding_window, 16);
  EXPECT_EQ(m->tensors().size(), src->tensors().size());

  // The tensors' own type wins over config.json's torch_dtype (bfloat16 here).
  auto f32 = ModelSource::open(
      cb::test::write_checkpoint("hf_llama_f32", llama_config("LlamaForCausalLM"),
                                 filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32")));
  EXPECT_EQ(f32->config().weight_dtype, cb::DType::F32);

  // The name is shown and written to results: an escape sequence in it comes out as \xNN.
  json named = llama_config("LlamaForCausalLM");
  named["_name_or_path"] = "org/\x1b[31mred";
  auto n = ModelSource::open(cb::test::write_checkpoint("hf_llama_named", named, tensors));
  EXPECT_EQ(n->config().name, "org/\\x1B[31mred");
}

TEST(ModelSourceTest, HfFalcon7bAnd40bStyles) {
  auto falcon = [](bool new_arch) {
    return cb::test::falcon_hf_tensors(new_arch, 2, 32, 4, new_arch ? 2 : 1, 128, 40);
  };
  json c7 = {{"architectures", {"FalconForCausalLM"}},
             {"hidden_size", 32},
             {"num_hidden_layers", 2},
             {"num_attention_heads", 4},
             {"vocab_size", 40},
             {"multi_query", true},
             {"parallel_attn", true},
             {"bias", false},
             {"alibi", false},
             {"new_decoder_architecture", false}};
  auto s7 =
      ModelSource::open(cb::test::write_checkpoint("hf_falcon7", c7, filled(falcon(false), "F16")));
  EXPECT_EQ(s7->config().n_kv_heads, 1);
  EXPECT_FALSE(s7->config().separate_mlp_norm);
  EXPECT_TRUE(s7->config().tied_embeddings);
  EXPECT_EQ(s7->config().qkv_layout, cb::model::QkvLayout::Contiguous);

  // Older RWForCausalLM key names, 40B style.
  json c40 = {{"architectures", {"RWForCausalLM"}},
              {"n_embed", 32},
              {"n_layer", 2},
              {"n_head", 4},
              {"n_head_kv", 2},
              {"vocab_size", 40},
              {"new_decoder_architecture", true},
              {"bias", false}};
  auto s40 = ModelSource::open(
      cb::test::write_checkpoint("hf_falcon40", c40, filled(falcon(true), "F32")));
  EXPECT_EQ(s40->config().n_kv_heads, 2);
  EXPECT_TRUE(s40->config().separate_mlp_norm);
  EXPECT_EQ(s40->config().qkv_layout, cb::model::QkvLayout::Grouped);
  EXPECT_NE(s40->tensor("blk.1.attn_norm_2.bias"), nullptr);
}

// Configs transformers loads that an earlier reading got wrong (their numbers are checked
// against the numpy reference in tests/reference: tiny-falcon-mha, tiny-falcon2,
// tiny-falcon-40b-rw).
TEST(ModelSourceTest, HfFalconVariantsReadAsTransformersReadsThem) {
  const json base = {{"architectures", {"FalconForCausalLM"}},
                     {"hidden_size", 32},
                     {"num_hidden_layers", 2},
                     {"num_attention_heads", 4},
                     {"vocab_size", 40},
                     {"parallel_attn", true}};
  // Without multi_query every head has its own K and V, fused per head as [q, k, v]: the
  // grouped layout with one query head a group.
  json mha = base;
  mha["multi_query"] = false;
  mha["new_decoder_architecture"] = false;
  auto s = ModelSource::open(cb::test::write_checkpoint(
      "hf_falcon_mha", mha,
      filled(cb::test::falcon_hf_tensors(false, 2, 32, 4, 4, 128, 40), "F32")));
  EXPECT_EQ(s->config().n_kv_heads, 4);
  EXPECT_EQ(s->config().qkv_layout, cb::model::QkvLayout::Grouped);
  EXPECT_FALSE(s->config().separate_mlp_norm);
  // Falcon2-11B: the new architecture with one input_layernorm.
  json f2 = base;
  f2["new_decoder_architecture"] = true;
  f2["num_kv_heads"] = 2;
  f2["num_ln_in_parallel_attn"] = 1;
  s = ModelSource::open(cb::test::write_checkpoint(
      "hf_falcon2", f2, filled(cb::test::falcon_hf_tensors(false, 2, 32, 4, 2, 128, 40), "F32")));
  EXPECT_EQ(s->config().n_kv_heads, 2);
  EXPECT_EQ(s->config().qkv_layout, cb::model::QkvLayout::Grouped);
  EXPECT_FALSE(s->config().separate_mlp_norm);
  // The original falcon-40b config: model_type RefinedWeb, no new_decoder_architecture key.
  const json rw = {{"architectures", {"RWForCausalLM"}},
                   {"model_type", "RefinedWeb"},
                   {"hidden_size", 32},
                   {"n_layer", 2},
                   {"n_head", 4},
                   {"n_head_kv", 2},
                   {"vocab_size", 40},
                   {"parallel_attn", true},
                   {"bias", false}};
  s = ModelSource::open(cb::test::write_checkpoint(
      "hf_falcon_rw", rw, filled(cb::test::falcon_hf_tensors(true, 2, 32, 4, 2, 128, 40), "F32")));
  EXPECT_EQ(s->config().n_kv_heads, 2);
  EXPECT_EQ(s->config().qkv_layout, cb::model::QkvLayout::Grouped);
  EXPECT_TRUE(s->config().separate_mlp_norm);
  // Configs transformers' FalconDecoderLayer cannot run (it crashes on both): refused, not run
  // as a guess.
  json serial = f2;
  serial["parallel_attn"] = false;
  std::string e = error_of(cb::test::write_checkpoint(
      "hf_falcon_new_serial", serial,
      filled(cb::test::falcon_hf_tensors(false, 2, 32, 4, 2, 128, 40), "F32")));
  EXPECT_NE(e.find("field 'parallel_attn' is false"), std::string::npos) << e;
  json two_norms = mha;
  two_norms["num_ln_in_parallel_attn"] = 2;
  e = error_of(cb::test::write_checkpoint(
      "hf_falcon_7b_two_norms", two_norms,
      filled(cb::test::falcon_hf_tensors(false, 2, 32, 4, 4, 128, 40), "F32")));
  EXPECT_NE(e.find("field 'num_ln_in_parallel_attn' is 2 without new_decoder_architecture"),
            std::string::npos)
      << e;
}

// RoPE fields and defaults as transformers reads them: a Mistral config without a
// sliding_window key gets MistralConfig's 4096 (null: no window); transformers 5's
// rope_parameters carries rope_theta; scaled RoPE is refused for Falcon as for LLaMA (it was
// run unscaled); a new-architecture Falcon config without num_kv_heads has one KV head a query
// head, as FalconConfig defaults it.
TEST(ModelSourceTest, HfRopeFieldsAndDefaultsReadAsTransformersReadsThem) {
  const auto llama = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32");
  json c = llama_config("MistralForCausalLM");
  c.erase("sliding_window");
  EXPECT_EQ(ModelSource::open(cb::test::write_checkpoint("hf_mistral_nowin", c, llama))
                ->config()
                .sliding_window,
            4096);
  c["sliding_window"] = nullptr;
  EXPECT_EQ(ModelSource::open(cb::test::write_checkpoint("hf_mistral_nullwin", c, llama))
                ->config()
                .sliding_window,
            0);
  c = llama_config("LlamaForCausalLM");
  c.erase("rope_theta");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  EXPECT_EQ(ModelSource::open(cb::test::write_checkpoint("hf_rope_params", c, llama))
                ->config()
                .rope_theta,
            1000000.0f);
  c["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0}};
  std::string e = error_of(cb::test::write_checkpoint("hf_rope_llama3", c, llama));
  EXPECT_NE(e.find("field 'rope_parameters.rope_type' is 'llama3'"), std::string::npos) << e;

  const json falcon = {{"architectures", {"FalconForCausalLM"}},
                       {"hidden_size", 32},
                       {"num_hidden_layers", 2},
                       {"num_attention_heads", 4},
                       {"vocab_size", 40},
                       {"parallel_attn", true},
                       {"new_decoder_architecture", true}};
  const auto mha = filled(cb::test::falcon_hf_tensors(true, 2, 32, 4, 4, 128, 40), "F32");
  auto s = ModelSource::open(cb::test::write_checkpoint("hf_falcon_nokv", falcon, mha));
  EXPECT_EQ(s->config().n_kv_heads, 4);
  json scaled = falcon;
  scaled["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  e = error_of(cb::test::write_checkpoint("hf_falcon_scaled", scaled, mha));
  EXPECT_NE(e.find("field 'rope_scaling' is of type 'linear'"), std::string::npos) << e;
  // transformers 4's rope_scaling of type "default" is plain RoPE, as in rope_parameters.
  for (const char* key : {"rope_type", "type"}) {
    c = llama_config("LlamaForCausalLM");
    c["rope_scaling"] = {{key, "default"}};
    EXPECT_EQ(ModelSource::open(cb::test::write_checkpoint("hf_rope_default", c, llama))
                  ->config()
                  .rope_theta,
              500000.0f)
        << key;
  }
  c["rope_scaling"] = {{"factor", 2.0}};
  e = error_of(cb::test::write_checkpoint("hf_rope_untyped", c, llama));
  EXPECT_NE(e.find("field 'rope_scaling' is {\"factor\":2.0}"), std::string::npos) << e;
}

// A tensor the model would not use (a bias of LLaMA's attention_bias, say) is refused: ignoring
// it computes another model. An exported rotary inv_freq buffer, or lm_head beside tied
// embeddings (a copy of them), is not a weight of another model.
TEST(ModelSourceTest, HfTensorsTheModelDoesNotUseAreRefused) {
  const json cfg = llama_config("LlamaForCausalLM");
  auto with = [](std::vector<std::pair<std::string, std::vector<int64_t>>> extra) {
    auto specs = cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40);
    for (auto& e : extra) specs.push_back(e);
    return filled(specs, "F32");
  };
  std::string e = error_of(cb::test::write_checkpoint(
      "hf_bias", cfg, with({{"model.layers.1.self_attn.q_proj.bias", {32}}})));
  EXPECT_NE(e.find("tensor 'model.layers.1.self_attn.q_proj.bias' is not part of the llama model"),
            std::string::npos)
      << e;
  e = error_of(cb::test::write_checkpoint("hf_mlpbias", cfg,
                                          with({{"model.layers.0.mlp.up_proj.bias", {48}}})));
  EXPECT_NE(e.find("'model.layers.0.mlp.up_proj.bias' is not part"), std::string::npos) << e;
  // llama_hf_tensors holds a rotary_emb.inv_freq buffer in every layer, and lm_head.weight.
  EXPECT_NO_THROW(ModelSource::open(cb::test::write_checkpoint("hf_untied_head", cfg, with({}))));
  json tied = cfg;
  tied["tie_word_embeddings"] = true;
  EXPECT_NO_THROW(ModelSource::open(cb::test::write_checkpoint("hf_tied_head", tied, with({}))));
  // A head that is not the embeddings' copy: which one transformers uses depends on its
  // version (4 ties, 5 keeps the file's), so it is refused.
  auto other_head = with({});
  for (auto& t : other_head) {
    if (t.name == "lm_head.weight") t.values[3] += 1.0f;
  }
  e = error_of(cb::test::write_checkpoint("hf_tied_other_head", tied, other_head));
  EXPECT_NE(e.find("tensor 'lm_head.weight' differs from the embeddings"), std::string::npos) << e;
}

TEST(ModelSourceTest, HfErrorsNameTheFileTensorAndShape) {
  auto tensors = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32");
  // Wrong shape: k_proj as if MHA.
  for (auto& t : tensors)
    if (t.name == "model.layers.0.self_attn.k_proj.weight") {
      t.shape = {32, 32};
      t.values.resize(32 * 32);
    }
  std::string e = error_of(
      cb::test::write_checkpoint("hf_badshape", llama_config("LlamaForCausalLM"), tensors));
  EXPECT_NE(e.find("model.layers.0.self_attn.k_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[32, 32]"), std::string::npos) << e;
  EXPECT_NE(e.find("expected [16, 32]"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;

  // Missing tensor.
  auto missing = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32");
  const std::string gone = missing[5].name;
  missing.erase(missing.begin() + 5);
  e = error_of(cb::test::write_checkpoint("hf_missing", llama_config("LlamaForCausalLM"), missing));
  // Named as the checkpoint names it (the user's files), and by its canonical name.
  EXPECT_NE(e.find("missing tensor '" + gone + "' ('blk.0."), std::string::npos) << e;

  // A layer more than the config says: refused, not silently dropped.
  const auto extra = filled(cb::test::llama_hf_tensors(3, 32, 32, 16, 48, 40), "F32");
  e = error_of(cb::test::write_checkpoint("hf_extra", llama_config("LlamaForCausalLM"), extra));
  EXPECT_NE(e.find("tensor 'model.layers.2."), std::string::npos) << e;
  EXPECT_NE(e.find("belongs to layer 2, but the model config has 2 layers"), std::string::npos)
      << e;

  // Config problems.
  const auto ok = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32");
  json c = llama_config("LlamaForCausalLM");
  c.erase("hidden_size");
  e = error_of(cb::test::write_checkpoint("hf_nohidden", c, ok));
  EXPECT_NE(e.find("config.json: missing field 'hidden_size'"), std::string::npos) << e;
  c = llama_config("GPTNeoXForCausalLM");
  e = error_of(cb::test::write_checkpoint("hf_arch", c, ok));
  EXPECT_NE(e.find("unsupported architecture 'GPTNeoXForCausalLM'"), std::string::npos) << e;
  // Another activation would compute another model: refused, as RoPE scaling is.
  c = llama_config("LlamaForCausalLM");
  c["hidden_act"] = "gelu";
  e = error_of(cb::test::write_checkpoint("hf_gelu", c, ok));
  EXPECT_NE(e.find("config.json: field 'hidden_act' is 'gelu'"), std::string::npos) << e;
  c = llama_config("LlamaForCausalLM");
  c["num_attention_heads"] = "four";
  e = error_of(cb::test::write_checkpoint("hf_type", c, ok));
  EXPECT_NE(e.find("'num_attention_heads' must be an integer from 0 to 2147483647"),
            std::string::npos)
      << e;
  const std::string dir = cb::test::make_dir(cb::test::tmp_dir() + "/hf_badjson");
  cb::test::write_bytes(dir + "/config.json", "{\"hidden_size\": 32,");
  e = error_of(dir);
  EXPECT_NE(e.find("malformed JSON"), std::string::npos) << e;
  // A value nested 100,000 deep where a count belongs: refused before parsing (rendering it in
  // the error message recursed once per level and overflowed the stack).
  cb::test::write_bytes(dir + "/config.json",
                        "{\"architectures\": [\"LlamaForCausalLM\"], \"num_hidden_layers\": " +
                            std::string(100000, '[') + std::string(100000, ']') + "}");
  e = error_of(dir);
  EXPECT_NE(e.find("config.json: nests JSON more than 64 levels deep"), std::string::npos) << e;
  // A long value in an error message is cut short.
  json big = llama_config("LlamaForCausalLM");
  big["num_hidden_layers"] = std::vector<int>(10000, 7);
  e = error_of(cb::test::write_checkpoint("hf_bigvalue", big, ok));
  EXPECT_NE(e.find("'num_hidden_layers' must be an integer"), std::string::npos) << e;
  EXPECT_LT(e.size(), 600u) << e;
  const std::string empty = cb::test::make_dir(cb::test::tmp_dir() + "/hf_noconfig");
  e = error_of(empty);
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
}

// Falcon's 7B and 40B names both map onto attn_norm: a checkpoint holding both ran whichever
// came first in the file, so its logits depended on the byte order.
TEST(ModelSourceTest, HfTwoTensorsForOneWeightAreRefused) {
  const json c7 = {{"architectures", {"FalconForCausalLM"}},
                   {"hidden_size", 32},
                   {"num_hidden_layers", 2},
                   {"num_attention_heads", 4},
                   {"vocab_size", 40},
                   {"multi_query", true},
                   {"parallel_attn", true},
                   {"new_decoder_architecture", false}};
  auto specs = cb::test::falcon_hf_tensors(false, 2, 32, 4, 1, 128, 40);
  for (const bool first : {true, false}) {
    auto with = specs;
    const std::pair<std::string, std::vector<int64_t>> extra = {"transformer.h.0.ln_attn.weight",
                                                                {32}};
    with.insert(first ? with.begin() : with.end(), extra);
    const std::string dir = cb::test::write_checkpoint("hf_falcon_dup", c7, filled(with, "F32"));
    const std::string e = error_of(dir);
    SCOPED_TRACE(first);
    EXPECT_NE(e.find(dir + "/model.safetensors: tensors '"), std::string::npos) << e;
    EXPECT_NE(e.find("'transformer.h.0.input_layernorm.weight'"), std::string::npos) << e;
    EXPECT_NE(e.find("'transformer.h.0.ln_attn.weight'"), std::string::npos) << e;
    EXPECT_NE(e.find("are both the falcon model's 'blk.0.attn_norm.weight'"), std::string::npos)
        << e;
  }
  // In two shards, both files are named (write_checkpoint deals the tensors out in turn, so
  // neighbours land in different shards).
  auto at = specs.begin();
  while (at->first != "transformer.h.1.input_layernorm.weight") ++at;
  specs.insert(at + 1, {"transformer.h.1.ln_attn.weight", {32}});
  const std::string dir =
      cb::test::write_checkpoint("hf_falcon_dup_shards", c7, filled(specs, "F32"), 2);
  const std::string e = error_of(dir);
  EXPECT_NE(e.find("-of-00002.safetensors and " + dir + "/model-0000"), std::string::npos) << e;
}

// A .safetensors MODEL stands for its directory (config.json, tokenizer, location): only the
// file that directory loads is taken; another file's weights ran silently as the directory's.
TEST(ModelSourceTest, HfWeightsFileMustBeWhatItsDirectoryLoads) {
  const auto tensors = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32");
  const std::string dir =
      cb::test::write_checkpoint("hf_named_file", llama_config("LlamaForCausalLM"), tensors);
  auto src = ModelSource::open(dir + "/model.safetensors");
  EXPECT_EQ(src->location(), dir);
  EXPECT_EQ(src->kind(), cb::model::SourceKind::HuggingFace);
  cb::test::write_bytes(dir + "/other.safetensors", cb::test::safetensors_bytes(tensors));
  std::string e = error_of(dir + "/other.safetensors");
  EXPECT_NE(e.find(dir + "/other.safetensors: is not the weights of the checkpoint in " + dir +
                   ", which loads " + dir + "/model.safetensors"),
            std::string::npos)
      << e;
  const std::string sharded =
      cb::test::write_checkpoint("hf_named_shard", llama_config("LlamaForCausalLM"), tensors, 2);
  e = error_of(sharded + "/model-00001-of-00002.safetensors");
  EXPECT_NE(e.find("is one of the 2 files of the checkpoint in " + sharded), std::string::npos)
      << e;
  EXPECT_NE(e.find("pass the directory " + sharded), std::string::npos) << e;
}

// Every file of a checkpoint that is not a regular file is refused, named, without blocking
// (a FIFO's open for reading waits for a writer: each of these hung), and a directory or a
// symbolic link loop is named as one, not read as a library error or as a missing file.
TEST(ModelSourceTest, HfFilesThatAreNotRegularFilesAreNamed) {
  ::alarm(60);  // a blocked open ends as SIGALRM, which fails the test
  const auto tensors = filled(cb::test::llama_hf_tensors(2, 32, 32, 16, 48, 40), "F32");
  const json cfg = llama_config("LlamaForCausalLM");
  auto replace = [](const std::string& path, const std::string& how) {
    std::remove(path.c_str());
    if (how == "fifo") {
      EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
    } else if (how == "dir") {
      EXPECT_EQ(::mkdir(path.c_str(), 0755), 0) << path;
    }
    if (how == "loop") {
      const std::string name = path.substr(path.find_last_of('/') + 1);
      EXPECT_EQ(::symlink(name.c_str(), path.c_str()), 0) << path;
    }
  };
  const std::string fifo = ": not a regular file (a FIFO)";
  const std::string loop =
      ": cannot open file: Too many levels of symbolic links (a symbolic "
      "link loop)";
  const struct {
    const char* file;
    int shards;
    const char* how;
    std::string want;
  } cases[] = {
      {"config.json", 1, "fifo", fifo},
      {"config.json", 1, "dir", ": a directory, not a file"},
      {"config.json", 1, "loop", loop},
      {"model.safetensors", 1, "fifo", fifo},
      {"model.safetensors", 1, "loop", loop},
      {"model.safetensors.index.json", 2, "fifo", fifo},
      {"model-00002-of-00002.safetensors", 2, "fifo", fifo},
  };
  for (const auto& c : cases) {
    // What a killed run left (a FIFO that write_checkpoint would wait on) is removed first.
    std::filesystem::remove_all(cb::test::tmp_dir() + "/hf_irregular");
    const std::string dir = cb::test::write_checkpoint("hf_irregular", cfg, tensors, c.shards);
    replace(dir + "/" + c.file, c.how);
    const std::string e = error_of(dir);
    EXPECT_NE(e.find(dir + "/" + c.file + c.want), std::string::npos) << c.how << ": " << e;
    std::filesystem::remove_all(dir);
  }
  const std::string gguf = cb::test::tmp_dir() + "/fifo_model.gguf";
  replace(gguf, "fifo");
  EXPECT_NE(error_of(gguf).find(gguf + fifo), std::string::npos) << error_of(gguf);
  std::remove(gguf.c_str());
  ::alarm(0);
}

TEST(HfConfigTest, NameMappingCoversEveryExpectedTensor) {
  // Every canonical tensor of a LLaMA config has exactly one HF name mapping to it.
  const auto cfg = cb::model::preset_config("tiny-llama");
  std::map<std::string, int> hits;
  for (const auto& [name, shape] : cb::test::llama_hf_tensors(cfg.n_layers, 64, 64, 32, 160, 512)) {
    const std::string c = cb::model::hf_to_canonical(name, cfg);
    if (!c.empty()) ++hits[c];
  }
  for (const auto& s : cb::model::expected_tensors(cfg)) EXPECT_EQ(hits[s.name], 1) << s.name;
  EXPECT_EQ(cb::model::hf_to_canonical("model.layers.0.self_attn.rotary_emb.inv_freq", cfg), "");
}

TEST(HfConfigTest, CanonicalNamesMapBackToTheirHfNames) {
  // For LLaMA and Falcon, every tensor the model expects has an HF name that maps back to it.
  for (const char* preset : {"tiny-llama", "tiny-mistral", "tiny-falcon-7b", "tiny-falcon-40b"}) {
    const auto cfg = cb::model::preset_config(preset);
    for (const auto& s : cb::model::expected_tensors(cfg)) {
      const std::string hf = cb::model::canonical_to_hf(s.name, cfg);
      EXPECT_FALSE(hf.empty()) << preset << " " << s.name;
      EXPECT_EQ(cb::model::hf_to_canonical(hf, cfg), s.name) << preset << " " << hf;
    }
    EXPECT_EQ(cb::model::canonical_to_hf("blk.0.no_such.weight", cfg), "");
  }
  const auto llama = cb::model::preset_config("tiny-llama");
  EXPECT_EQ(cb::model::canonical_to_hf("blk.3.attn_q.weight", llama),
            "model.layers.3.self_attn.q_proj.weight");
}

}  // namespace
