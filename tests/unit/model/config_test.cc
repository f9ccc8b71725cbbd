#include "lib/model/config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lib/core/error.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"
#include "tests/support/test_data.h"

namespace {

using cb::model::preset_config;

// Parameter counts published with the checkpoints (Hugging Face model cards / papers);
// our count is derived from the dimensions only, so these are an independent check.
TEST(PresetTest, ParameterCountsMatchPublishedCheckpoints) {
  EXPECT_EQ(cb::model::parameter_count(preset_config("llama-2-7b")), 6738415616ull);
  EXPECT_EQ(cb::model::parameter_count(preset_config("llama-7b")), 6738415616ull);
  EXPECT_EQ(cb::model::parameter_count(preset_config("llama-2-13b")), 13015864320ull);
  EXPECT_EQ(cb::model::parameter_count(preset_config("llama-2-70b")), 68976648192ull);
  EXPECT_EQ(cb::model::parameter_count(preset_config("mistral-7b")), 7241732096ull);
  EXPECT_EQ(cb::model::parameter_count(preset_config("falcon-7b")), 6921720704ull);
}

TEST(PresetTest, KvBytesPerToken) {
  // 2 (K,V) x layers x kv_heads x head_dim x 2 bytes.
  EXPECT_EQ(preset_config("llama-2-7b").kv_bytes_per_token(), 512u * 1024u);
  EXPECT_EQ(preset_config("llama-2-70b").kv_bytes_per_token(), 320u * 1024u);
  EXPECT_EQ(preset_config("llama-13b").kv_bytes_per_token(), 2u * 40 * 40 * 128 * 2);
  EXPECT_EQ(preset_config("falcon-7b").kv_bytes_per_token(), 2u * 32 * 1 * 64 * 2);
  EXPECT_EQ(preset_config("llama-2-7b").kv_bytes_per_token(cb::DType::F32), 1024u * 1024u);
}

TEST(PresetTest, AttentionKinds) {
  EXPECT_STREQ(preset_config("llama-2-7b").attention_kind(), "MHA");
  EXPECT_STREQ(preset_config("llama-2-70b").attention_kind(), "GQA");
  EXPECT_STREQ(preset_config("falcon-7b").attention_kind(), "MQA");
  EXPECT_STREQ(preset_config("falcon-40b").attention_kind(), "GQA");
  EXPECT_EQ(preset_config("mistral-7b").sliding_window, 4096);
  EXPECT_TRUE(preset_config("falcon-40b").separate_mlp_norm);
  EXPECT_FALSE(preset_config("falcon-7b").separate_mlp_norm);
}

TEST(PresetTest, EveryPresetIsValidAndTinyOnesExist) {
  int tiny = 0;
  for (const auto& n : cb::model::preset_names()) {
    EXPECT_NO_THROW(preset_config(n).validate("preset:" + n)) << n;
    if (n.rfind("tiny-", 0) == 0) ++tiny;
  }
  EXPECT_EQ(tiny, 4);
}

TEST(PresetTest, UnknownPresetListsAvailableOnes) {
  try {
    preset_config("llama-3-8b");
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("llama-2-70b"), std::string::npos);
  }
}

TEST(PresetTest, WeightsAreDeterministicSliceableAndScaled) {
  const auto cfg = preset_config("tiny-llama");
  const auto specs = cb::model::expected_tensors(cfg);
  const auto& q = specs[2];  // blk.0.attn_q.weight
  ASSERT_EQ(q.name, "blk.0.attn_q.weight");
  std::vector<float> all(static_cast<size_t>(q.numel())), part(100), again(all.size());
  cb::model::preset_fill(cfg, q, 7, 0, q.numel(), all.data());
  cb::model::preset_fill(cfg, q, 7, 1000, 100, part.data());
  cb::model::preset_fill(cfg, q, 7, 0, q.numel(), again.data());
  EXPECT_EQ(all, again);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(part[i], all[1000 + i]);
  double sum = 0, sq = 0;
  for (float v : all) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(all.size());
  const double stddev = std::sqrt(sq / n - (sum / n) * (sum / n));
  EXPECT_NEAR(stddev, 1.0 / std::sqrt(64.0), 0.01);
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  std::vector<float> other(all.size());
  cb::model::preset_fill(cfg, q, 8, 0, q.numel(), other.data());
  EXPECT_NE(all, other);
  std::vector<float> norm(64);
  cb::model::preset_fill(cfg, specs[1], 7, 0, 64, norm.data());  // attn_norm.weight
  for (float v : norm) EXPECT_EQ(v, 1.0f);
}

TEST(ConfigTest, ValidateRejectsInconsistentConfigs) {
  auto cfg = preset_config("tiny-llama");
  cfg.n_kv_heads = 3;  // does not divide 4
  try {
    cfg.validate("x.json");
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_kv_heads"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos);
  }
  // A head count that makes the heads too small for the rotary dimensions: the message gives
  // the head size it implies, and where that came from.
  cfg = preset_config("tiny-llama");
  cfg.n_heads *= 4;
  cfg.n_kv_heads = cfg.n_heads;
  cfg.head_dim = cfg.hidden / cfg.n_heads;
  try {
    cfg.validate("x");
    FAIL();
  } catch (const cb::Error& e) {
    const std::string want = "must be even and in 2..head_dim = " + std::to_string(cfg.head_dim) +
                             ", hidden " + std::to_string(cfg.hidden) + " / n_heads " +
                             std::to_string(cfg.n_heads);
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  cfg = preset_config("tiny-llama");
  cfg.n_layers = 0;
  EXPECT_THROW(cfg.validate("x"), cb::Error);
}

TEST(TensorSpecTest, FalconLayoutsAndTiedEmbeddings) {
  auto specs = cb::model::expected_tensors(preset_config("tiny-falcon-40b"));
  bool has_norm2 = false, has_output = false;
  for (const auto& s : specs) {
    if (s.name == "blk.1.attn_norm_2.bias") has_norm2 = true;
    if (s.name == "output.weight") has_output = true;
    if (s.name == "blk.0.attn_qkv.weight") {
      EXPECT_EQ(s.shape, (std::vector<int64_t>{64 + 2 * 32, 64}));
    }
  }
  EXPECT_TRUE(has_norm2);
  EXPECT_FALSE(has_output);  // Falcon ties the LM head to the embedding
}

// A model's name is shown and written to results: a file's bytes in it that are not text (not
// UTF-8, an escape sequence, a NUL) come out as \xNN, never raw. stories260K's general.name,
// "llama", is replaced by five such bytes of the same length.
TEST(ConfigTest, AGgufNameThatIsNotTextIsEscaped) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  std::string bytes = cb::test::read_file(path);
  const std::string key = "general.name";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t value = at + key.size() + 4 + 8;  // the value's type, then its length
  ASSERT_EQ(bytes.substr(value, 5), "llama");
  bytes.replace(value, 5, std::string("a\xFF\x1B\0z", 5));
  const auto src = cb::model::ModelSource::open(cb::test::write_tmp("bad_name.gguf", bytes));
  EXPECT_EQ(src->config().name, "a\\xFF\\x1B\\x00z");
}

}  // namespace
