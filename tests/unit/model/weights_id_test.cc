// weights_identity: one id per set of weights (the AttentionStore's fingerprint includes it),
// whatever the files' layout (sharded or not) and the number of hashing threads; another value
// in one tensor, another dtype, another preset seed, or bf16 matrices give another id.
#include "lib/model/weights_id.h"

#include <gtest/gtest.h>

#include "lib/model/model.h"
#include "tests/support/hf_checkpoint.h"
#include "tests/support/test_data.h"

namespace cb::model {
namespace {

std::string id_of(const std::string& dir, int threads = 0) {
  return weights_identity(*ModelSource::open(dir), 0, threads);
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
}

TEST(WeightsId, PresetsAreTheirNameAndSeed) {
  auto src = ModelSource::open("preset:llama-2-7b");
  EXPECT_EQ(weights_identity(*src, 0), "preset:llama-2-7b seed 0");
  EXPECT_NE(weights_identity(*src, 1), weights_identity(*src, 0));
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
