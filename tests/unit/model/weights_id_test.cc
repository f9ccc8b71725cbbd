// weights_identity: one id per model (the AttentionStore's fingerprint includes it), whatever
// the files' layout (sharded or not), the number of hashing threads or how many blocks a tensor
// is hashed in; another value in one tensor, another dtype, another rope_theta or norm epsilon,
// another preset seed, or bf16 matrices give another id.
#include "lib/model/weights_id.h"

#include <gtest/gtest.h>

#include "lib/model/model.h"
#include "tests/support/hf_checkpoint.h"
#include "tests/support/test_data.h"

namespace cb::model {
namespace {

std::string id_of(const std::string& dir, int threads = 0, size_t block = 0) {
  return weights_identity(*ModelSource::open(dir), 0, threads, block);
}

TEST(WeightsId, OneIdPerSetOfWeightsWhateverTheFileLayout) {
  const auto specs = test::llama_hf_tensors(2, 32, 32, 16, 48, 40);
  const auto cfg = test::tiny_llama_hf_config();
  auto tensors = test::random_filled(specs, "F32", 1);
  const std::string one = id_of(test::write_checkpoint("wid_one", cfg, tensors));
  EXPECT_EQ(one.rfind("xxh3:", 0), 0u) << one;
  EXPECT_EQ(one.size(), 5u + 16u) << one;
  EXPECT_EQ(id_of(test::write_checkpoint("wid_sharded", cfg, tensors, 3)), one);
  EXPECT_EQ(id_of(test::write_checkpoint("wid_one", cfg, tensors), 1), one);
  EXPECT_EQ(id_of(test::write_checkpoint("wid_one", cfg, tensors), 7), one);

  // One value of the final norm changed: another checkpoint of the same name and shape.
  auto tuned = tensors;
  for (auto& t : tuned) {
    if (t.name == "model.norm.weight") t.values[5] += 0.25f;
  }
  EXPECT_NE(id_of(test::write_checkpoint("wid_tuned", cfg, tuned)), one);
  // The same values stored as bf16.
  auto bf16 = tensors;
  for (auto& t : bf16) t.dtype = "BF16";
  EXPECT_NE(id_of(test::write_checkpoint("wid_bf16", cfg, bf16)), one);
  // The same tensors re-exported with another rope_theta, or another norm epsilon: other KV.
  for (const char* field : {"rope_theta", "rms_norm_eps"}) {
    auto edited = cfg;
    edited[field] = std::string(field) == "rope_theta" ? 500000.0 : 1e-5;
    EXPECT_NE(id_of(test::write_checkpoint("wid_cfg", edited, tensors)), one) << field;
  }
  // Only the window it was trained for: the same numbers, the same id.
  auto longer = cfg;
  longer["max_position_embeddings"] = 4096;
  EXPECT_EQ(id_of(test::write_checkpoint("wid_cfg", longer, tensors)), one);
}

TEST(WeightsId, TensorsHashedInManyBlocksAreHashedWhole) {
  // 256-byte blocks: every 2-D tensor here is several (the embedding, 40 x 32 floats, is 20).
  const auto specs = test::llama_hf_tensors(2, 32, 32, 16, 48, 40);
  const auto cfg = test::tiny_llama_hf_config();
  auto tensors = test::random_filled(specs, "F32", 2);
  const std::string dir = test::write_checkpoint("wid_blocks", cfg, tensors);
  const std::string one = id_of(dir, 1, 256);
  EXPECT_EQ(id_of(dir, 3, 256), one);
  EXPECT_EQ(id_of(dir, 16, 256), one);
  EXPECT_NE(id_of(dir, 1, 0), one);  // another block size is another hash (of the same bytes)
  // The last value of the embedding, in its last block, changed.
  for (auto& t : tensors) {
    if (t.name == "model.embed_tokens.weight") t.values.back() -= 0.125f;
  }
  EXPECT_NE(id_of(test::write_checkpoint("wid_blocks_tuned", cfg, tensors), 3, 256), one);
}

TEST(WeightsId, PresetsAreTheirNameSeedAndConfig) {
  auto src = ModelSource::open("preset:llama-2-7b");
  const std::string id = weights_identity(*src, 0);
  EXPECT_EQ(id.rfind("preset:llama-2-7b seed 0 config ", 0), 0u) << id;
  EXPECT_NE(weights_identity(*src, 1), id);
  EXPECT_NE(weights_identity(*ModelSource::open("preset:llama-2-13b"), 0), id);
}

TEST(WeightsId, ALoadedModelCarriesItsIdAndHowItsMatricesAreHeld) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = ModelSource::open(path);
  const std::string id = weights_identity(*src, 0);
  EXPECT_EQ(Model::load(*src)->config().weights_id, id);
  EXPECT_EQ(Model::load(*ModelSource::open(path))->config().weights_id, id);  // loaded again
  const std::string bf16 = Model::load(*src, 0, WeightStorage::BF16)->config().weights_id;
  EXPECT_NE(bf16, id);
  EXPECT_EQ(bf16.rfind(id, 0), 0u) << bf16;
  EXPECT_TRUE(src->config().weights_id.empty());  // a config alone names no weights
}

}  // namespace
}  // namespace cb::model
