// GGUF reader tests. Oracles: golden files written by llama.cpp's gguf-py
// (tests/fixtures/make_gguf_fixtures.py; expected tensor values from
// gguf.quants.dequantize, offsets from gguf.GGUFReader), the shared real model files,
// and hand-built malformed files.
#include "lib/formats/gguf.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::formats {
namespace {

const std::string kFixtures = std::string(::cb::test::source_dir()) + "/tests/fixtures/gguf/";

// ---- byte writer for hand-built files -------------------------------------------------

class Bytes {
 public:
  Bytes& raw(const std::string& b) {
    s_ += b;
    return *this;
  }
  template <typename T>
  Bytes& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s_.append(b, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& v) { return u64(v.size()).raw(v); }
  Bytes& zeros(size_t n) { return raw(std::string(n, '\0')); }
  const std::string& s() const { return s_; }

 private:
  std::string s_;
};

// GGUF value type ids and ggml type ids used below.
constexpr uint32_t kU8 = 0, kU32 = 4, kI32 = 5, kBool = 7, kStr = 8, kArr = 9, kU64 = 10;
constexpr uint32_t kF32 = 0, kQ4_0 = 2, kQ4_K = 12, kIQ2_XXS = 16;

std::string kv_u32(const std::string& key, uint32_t v) {
  return Bytes().str(key).u32(kU32).u32(v).s();
}
std::string kv_u64(const std::string& key, uint64_t v) {
  return Bytes().str(key).u32(kU64).u64(v).s();
}

struct Ti {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = kF32;
  uint64_t offset = 0;
};

/// A complete file: header, `kvs` (pre-encoded pairs), tensor infos, padding to `align`
/// and `data_bytes` zero bytes of tensor data.
std::string build(const std::vector<std::string>& kvs, const std::vector<Ti>& tis,
                  size_t data_bytes, uint64_t align = 32, uint32_t version = 3) {
  Bytes b;
  b.raw("GGUF").u32(version).u64(tis.size()).u64(kvs.size());
  for (const std::string& kv : kvs) b.raw(kv);
  for (const Ti& t : tis) {
    b.str(t.name).u32(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t n : t.ne) b.u64(n);
    b.u32(t.type).u64(t.offset);
  }
  b.zeros((align - b.s().size() % align) % align);
  b.zeros(data_bytes);
  return b.s();
}

std::string header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  return Bytes().raw("GGUF").u32(version).u64(n_tensors).u64(n_kv).s();
}

/// Writes `bytes` to a scratch file and expects GgufFile::open to throw a cb::Error whose
/// message names the file and contains every one of `words`.
void expect_error(const std::string& name, const std::string& bytes,
                  const std::vector<std::string>& words) {
  SCOPED_TRACE(name);
  const std::string p = test::write_tmp("gguf_bad_" + name + ".gguf", bytes);
  try {
    GgufFile::open(p);
    ADD_FAILURE() << "no error for " << name;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p), std::string::npos) << m;
    for (const std::string& w : words) EXPECT_NE(m.find(w), std::string::npos) << w << " | " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a cb::Error: " << e.what();
  }
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::vector<float> read_f32_file(const std::string& p) {
  const std::string b = test::read_file(p);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// ---- golden fixture written by gguf-py ---------------------------------------------

TEST(Gguf, FixtureHeaderAndMetadataOrder) {
  auto f = GgufFile::open(kFixtures + "all_types.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  const std::vector<std::string> keys = {"general.architecture",
                                         "t.u8",
                                         "t.i8",
                                         "t.u16",
                                         "t.i16",
                                         "t.u32",
                                         "t.i32",
                                         "t.f32",
                                         "t.bool_true",
                                         "t.bool_false",
                                         "t.str",
                                         "t.u64",
                                         "t.i64",
                                         "t.f64",
                                         "llama.block_count",
                                         "t.arr_i32",
                                         "t.arr_u8",
                                         "t.arr_u64",
                                         "t.arr_f32",
                                         "t.arr_f64",
                                         "t.arr_str",
                                         "t.arr_bool",
                                         "t.nested",
                                         "t.nested_str",
                                         "t.nested3"};
  ASSERT_EQ(f->metadata().size(), keys.size());
  for (size_t k = 0; k < keys.size(); ++k) EXPECT_EQ(f->metadata()[k].first, keys[k]);
  EXPECT_TRUE(f->has("t.u8"));
  EXPECT_FALSE(f->has("t.missing"));
}

TEST(Gguf, FixtureScalarsOfEveryType) {
  auto f = GgufFile::open(kFixtures + "all_types.gguf");
  EXPECT_EQ(f->find("t.u8")->type, GgufType::UINT8);
  EXPECT_EQ(f->find("t.i8")->type, GgufType::INT8);
  EXPECT_EQ(f->find("t.u16")->type, GgufType::UINT16);
  EXPECT_EQ(f->find("t.i16")->type, GgufType::INT16);
  EXPECT_EQ(f->find("t.u32")->type, GgufType::UINT32);
  EXPECT_EQ(f->find("t.i32")->type, GgufType::INT32);
  EXPECT_EQ(f->find("t.f32")->type, GgufType::FLOAT32);
  EXPECT_EQ(f->find("t.bool_true")->type, GgufType::BOOL);
  EXPECT_EQ(f->find("t.str")->type, GgufType::STRING);
  EXPECT_EQ(f->find("t.u64")->type, GgufType::UINT64);
  EXPECT_EQ(f->find("t.i64")->type, GgufType::INT64);
  EXPECT_EQ(f->find("t.f64")->type, GgufType::FLOAT64);

  EXPECT_EQ(f->get_u64("t.u8"), 200u);
  EXPECT_EQ(f->get_i64("t.i8"), -128);
  EXPECT_EQ(f->get_u64("t.u16"), 65535u);
  EXPECT_EQ(f->get_i64("t.i16"), -32768);
  EXPECT_EQ(f->get_u64("t.u32"), 4294967295u);
  EXPECT_EQ(f->get_i64("t.i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->get_f64("t.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f->get_bool("t.bool_true"), true);
  EXPECT_EQ(f->get_bool("t.bool_false"), false);
  EXPECT_EQ(f->get_string("t.str"), "h\xC3\xA9llo, w\xC3\xB6rld \xE2\x9C\x93 \xF0\x9F\xA6\x99");
  EXPECT_EQ(f->get_u64("t.u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->get_i64("t.i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_f64("t.f64"), 3.141592653589793);
  EXPECT_EQ(f->get_string("general.architecture"), "testarch");
  EXPECT_EQ(f->get_u64("llama.block_count"), 7u);
  EXPECT_EQ(f->get_i64("llama.block_count"), 7);
  EXPECT_EQ(f->get_f64("llama.block_count"), 7.0);  // ints widen to f64
  EXPECT_EQ(f->get_u64("t.nope"), std::nullopt);
  EXPECT_EQ(f->get_string("t.nope"), std::nullopt);
  EXPECT_TRUE(f->find("t.u32")->is_integer());
  EXPECT_FALSE(f->find("t.bool_true")->is_integer());
  EXPECT_TRUE(f->find("t.f64")->is_float());
}

TEST(Gguf, FixtureArraysAndNestedArrays) {
  auto f = GgufFile::open(kFixtures + "all_types.gguf");
  EXPECT_EQ(f->get_i32_array("t.arr_i32"), (std::vector<int32_t>{1, -2, 3, 2147483647}));
  EXPECT_EQ(f->get_i32_array("t.arr_u8"), (std::vector<int32_t>{0, 1, 255}));
  EXPECT_EQ(f->find("t.arr_u8")->elem_type, GgufType::UINT8);
  const GgufValue* u64s = f->find("t.arr_u64");
  ASSERT_EQ(u64s->array.size(), 2u);
  EXPECT_EQ(u64s->array[1].u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->get_f32_array("t.arr_f32"), (std::vector<float>{0.5f, -1.25f, 1e-3f}));
  EXPECT_EQ(f->find("t.arr_f64")->array[1].f, -0.1);
  EXPECT_EQ(f->get_string_array("t.arr_str"), (std::vector<std::string>{"a", "",
                                                                        "\xC3\xBCn\xC3\xAF"
                                                                        "code",
                                                                        "\xE2\x96\x81the"}));
  const GgufValue* bools = f->find("t.arr_bool");
  ASSERT_EQ(bools->elem_type, GgufType::BOOL);
  ASSERT_EQ(bools->array.size(), 3u);
  EXPECT_EQ(bools->array[0].i, 1);
  EXPECT_EQ(bools->array[1].i, 0);
  EXPECT_EQ(bools->array[2].i, 1);

  const GgufValue* n = f->find("t.nested");
  ASSERT_EQ(n->type, GgufType::ARRAY);
  ASSERT_EQ(n->elem_type, GgufType::ARRAY);
  ASSERT_EQ(n->array.size(), 2u);
  EXPECT_EQ(n->array[0].elem_type, GgufType::INT32);
  ASSERT_EQ(n->array[1].array.size(), 3u);
  EXPECT_EQ(n->array[0].array[1].i, 2);
  EXPECT_EQ(n->array[1].array[2].i, 5);
  EXPECT_EQ(n->to_string(), "[[1, 2], [3, 4, 5]]");
  const GgufValue* ns = f->find("t.nested_str");
  EXPECT_EQ(ns->array[1].array[1].s, "zz");
  const GgufValue* n3 = f->find("t.nested3");
  ASSERT_EQ(n3->array.size(), 2u);
  EXPECT_EQ(n3->array[1].array[0].array[1].i, 9);
  EXPECT_EQ(n3->array[1].array[1].array[0].i, 10);
  EXPECT_EQ(f->find("t.arr_i32")->to_string(2), "[1, -2, ... (4 total)]");
}

TEST(Gguf, TypedGetterMismatchNamesKeyFileAndTypes) {
  const std::string p = kFixtures + "all_types.gguf";
  auto f = GgufFile::open(p);
  auto expect_msg = [&](auto&& fn, std::vector<std::string> words) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(p), std::string::npos) << m;
      for (const auto& w : words) EXPECT_NE(m.find(w), std::string::npos) << w << " | " << m;
    }
  };
  expect_msg([&] { f->get_string("t.u32"); }, {"'t.u32'", "uint32", "string"});
  expect_msg([&] { f->get_u64("t.str"); }, {"'t.str'", "string", "unsigned"});
  expect_msg([&] { f->get_u64("t.i8"); }, {"'t.i8'", "negative"});
  expect_msg([&] { f->get_i64("t.u64"); }, {"'t.u64'", "int64"});
  expect_msg([&] { f->get_bool("t.u8"); }, {"'t.u8'", "bool"});
  expect_msg([&] { f->get_f64("t.arr_f32"); }, {"'t.arr_f32'", "array of float32"});
  expect_msg([&] { f->get_string_array("t.arr_i32"); }, {"array of int32", "array of string"});
  expect_msg([&] { f->get_f32_array("t.arr_str"); }, {"'t.arr_str'", "array of string"});
  expect_msg([&] { f->get_i32_array("t.arr_u64"); }, {"'t.arr_u64'", "int32"});
  expect_msg([&] { f->get_i32_array("t.nested"); }, {"'t.nested'", "array of array"});
}

struct ExpectedTensor {
  const char* name;
  DType dtype;
  std::vector<int64_t> shape;
  size_t offset;  // absolute file offset of the data, as reported by gguf.GGUFReader
  size_t nbytes;
};

const std::vector<ExpectedTensor>& all_types_tensors() {
  static const std::vector<ExpectedTensor> t = {
      {"f32.a", DType::F32, {3, 5}, 1472, 60},
      {"f16.specials", DType::F16, {2, 8}, 1536, 32},
      {"f16.b", DType::F16, {2, 3, 4}, 1568, 48},
      {"bf16.c", DType::BF16, {10}, 1632, 20},
      {"q8_0.d", DType::Q8_0, {3, 64}, 1664, 204},
      {"q4_0.e", DType::Q4_0, {2, 96}, 1888, 108},
      {"q4_1.f", DType::Q4_1, {4, 32}, 2016, 80},
      {"q8_0.4d", DType::Q8_0, {2, 1, 3, 32}, 2112, 204},
      {"f32.last", DType::F32, {8}, 2336, 32},
  };
  return t;
}

TEST(Gguf, FixtureTensorInfosAndDataPointers) {
  const std::string p = kFixtures + "all_types.gguf";
  auto f = GgufFile::open(p);
  const std::string bytes = test::read_file(p);
  const auto& want = all_types_tensors();
  ASSERT_EQ(f->tensors().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const TensorRef& t = f->tensors()[k];
    SCOPED_TRACE(want[k].name);
    EXPECT_EQ(t.name, want[k].name);
    EXPECT_EQ(t.dtype, want[k].dtype);
    EXPECT_EQ(t.shape, want[k].shape);
    EXPECT_EQ(t.nbytes, want[k].nbytes);
    EXPECT_EQ(t.file, p);
    ASSERT_LE(want[k].offset + want[k].nbytes, bytes.size());
    EXPECT_EQ(std::memcmp(t.data, bytes.data() + want[k].offset, t.nbytes), 0);
    EXPECT_EQ(f->find_tensor(want[k].name), &t);
  }
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

// Every tensor of fixture `name`, dequantized, bit for bit against gguf-py's dequantizer.
void expect_fixture_matches_gguf_py(const std::string& name) {
  auto f = GgufFile::open(kFixtures + name + ".gguf");
  const std::vector<float> expected = read_f32_file(kFixtures + name + ".expected.f32");
  size_t at = 0;
  for (const TensorRef& t : f->tensors()) {
    SCOPED_TRACE(name + ": " + t.name);
    std::vector<float> got(static_cast<size_t>(t.numel()));
    to_f32(t, got.data());
    ASSERT_LE(at + got.size(), expected.size());
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_EQ(bits(got[j]), bits(expected[at + j]))
          << "element " << j << ": " << got[j] << " vs " << expected[at + j];
    }
    at += got.size();
  }
  EXPECT_EQ(at, expected.size());
}

TEST(Gguf, FixtureDequantizedValuesMatchGgufPyBitwise) {
  expect_fixture_matches_gguf_py("all_types");
}

// Q5_0, Q5_1 and the K-quants Q2_K..Q6_K (random blocks, zero, negative and subnormal
// super-block scales), as llama.cpp's quantized models hold them (Q4_K_M: Q4_K and Q6_K).
TEST(Gguf, FixtureKQuantsMatchGgufPyBitwise) {
  auto f = GgufFile::open(kFixtures + "kquants.gguf");
  const std::vector<std::pair<std::string, DType>> want = {
      {"q5_0.a", DType::Q5_0},      {"q5_1.b", DType::Q5_1},      {"q2_k.blocks", DType::Q2_K},
      {"q3_k.blocks", DType::Q3_K}, {"q4_k.blocks", DType::Q4_K}, {"q5_k.blocks", DType::Q5_K},
      {"q6_k.blocks", DType::Q6_K}};
  ASSERT_EQ(f->tensors().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(f->tensors()[k].name, want[k].first);
    EXPECT_EQ(f->tensors()[k].dtype, want[k].second) << want[k].first;
    EXPECT_EQ(f->tensors()[k].nbytes,
              dtype_bytes(want[k].second, static_cast<size_t>(f->tensors()[k].numel())));
  }
  EXPECT_EQ(f->tensors()[2].shape, (std::vector<int64_t>{4, 256}));
  expect_fixture_matches_gguf_py("kquants");
}

TEST(Gguf, FixtureCustomAlignment64) {
  const std::string p = kFixtures + "align64.gguf";
  auto f = GgufFile::open(p);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->get_u64("general.alignment"), 64u);
  ASSERT_EQ(f->tensors().size(), 2u);
  const std::string bytes = test::read_file(p);
  // gguf.GGUFReader: 'a' at 192 (12 bytes), 'b' at 256 (36 bytes).
  EXPECT_EQ(std::memcmp(f->tensors()[0].data, bytes.data() + 192, 12), 0);
  EXPECT_EQ(std::memcmp(f->tensors()[1].data, bytes.data() + 256, 36), 0);
  EXPECT_EQ(f->tensors()[1].shape, (std::vector<int64_t>{2, 32}));
  const std::vector<float> expected = read_f32_file(kFixtures + "align64.expected.f32");
  std::vector<float> got(3 + 64);
  to_f32(f->tensors()[0], got.data());
  to_f32(f->tensors()[1], got.data() + 3);
  ASSERT_EQ(expected.size(), got.size());
  for (size_t j = 0; j < got.size(); ++j) EXPECT_EQ(bits(got[j]), bits(expected[j])) << j;
}

TEST(Gguf, Version2Accepted) {
  std::string b = test::read_file(kFixtures + "all_types.gguf");
  b[4] = 2;
  auto f = GgufFile::open(test::write_tmp("gguf_v2.gguf", b));
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->tensors().size(), 9u);
}

// ---- hand-built valid files ----------------------------------------------------------

TEST(Gguf, MetadataOnlyFileWithoutPadding) {
  const std::string b = header(0, 1) + Bytes().str("k").u32(kStr).str("v").s();
  auto f = GgufFile::open(test::write_tmp("gguf_meta_only.gguf", b));
  EXPECT_EQ(f->get_string("k"), "v");
  EXPECT_TRUE(f->tensors().empty());
}

TEST(Gguf, EmptyArrayAndEmptyString) {
  const std::string kv1 = Bytes().str("e").u32(kArr).u32(kI32).u64(0).s();
  const std::string kv2 = Bytes().str("s").u32(kStr).str("").s();
  auto f = GgufFile::open(test::write_tmp("gguf_empty_arr.gguf", build({kv1, kv2}, {}, 0)));
  EXPECT_EQ(f->get_i32_array("e"), std::vector<int32_t>{});
  EXPECT_EQ(f->get_string("s"), "");
  EXPECT_EQ(f->find("e")->to_string(), "[]");
}

TEST(Gguf, AlignmentOneAllowsUnalignedData) {
  std::string b = build({kv_u32("general.alignment", 1)}, {{"w", {3}, kF32, 1}}, 13, 1);
  const float vals[3] = {1.0f, -2.5f, 1e30f};
  std::memcpy(&b[b.size() - 12], vals, sizeof vals);
  auto f = GgufFile::open(test::write_tmp("gguf_align1.gguf", b));
  ASSERT_EQ(f->tensors().size(), 1u);
  float out[3];
  to_f32(f->tensors()[0], out);
  for (int j = 0; j < 3; ++j) EXPECT_EQ(out[j], vals[j]);
}

// ---- real files from ../shared ------------------------------------------------------

TEST(GgufRealFile, Stories260K) {
  CB_REQUIRE_DATA(p, "models/stories260K/stories260K.gguf");
  auto f = GgufFile::open(p);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->tensors().size(), 48u);
  const TensorRef* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(emb->dtype, DType::F32);
  EXPECT_EQ(f->get_u64("llama.block_count"), 5u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type")->size(), 512u);
  std::vector<float> w(static_cast<size_t>(emb->numel()));
  to_f32(*emb, w.data());
  for (float v : w) ASSERT_TRUE(std::isfinite(v));
}

TEST(GgufRealFile, FalconVocabOnly) {
  CB_REQUIRE_DATA(p, "models/llamacpp-vocab/ggml-vocab-falcon.gguf");
  auto f = GgufFile::open(p);
  EXPECT_EQ(f->tensors().size(), 0u);
  auto merges = f->get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.has_value());
  EXPECT_EQ(merges->size(), 64784u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 65024u);
}

// ---- malformed files ----------------------------------------------------------------

TEST(GgufMalformed, MissingFile) {
  const std::string p = test::tmp_dir() + "/gguf_does_not_exist.gguf";
  try {
    GgufFile::open(p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(GgufMalformed, EmptyMagicAndVersion) {
  expect_error("empty", "", {"empty"});
  expect_error("magic", "GGML" + Bytes().u32(3).u64(0).u64(0).s(), {"magic"});
  expect_error("short_magic", "GG", {"too short"});
  expect_error("v1", header(0, 0, 1), {"version 1", "not supported"});
  expect_error("v99", header(0, 0, 99), {"version 99"});
  expect_error("big_endian", header(0, 0, 0x03000000u), {"big-endian"});
}

TEST(GgufMalformed, EveryTruncatedPrefixOfFixtureIsAnError) {
  // The fixture's last tensor ends exactly at end of file, so every strict prefix is
  // truncated. One scratch file is shortened in place (truncate) from the longest prefix
  // to the empty file.
  const std::string b = test::read_file(kFixtures + "all_types.gguf");
  ASSERT_GT(b.size(), 2000u);
  const std::string p = test::write_tmp("gguf_trunc.gguf", b);
  EXPECT_NO_THROW(GgufFile::open(p));
  size_t errors = 0;
  for (size_t len = b.size(); len-- > 0;) {
    ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(len)), 0);
    try {
      GgufFile::open(p);
      ADD_FAILURE() << "prefix of " << len << " bytes parsed without error";
    } catch (const Error& e) {
      ++errors;
      ASSERT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(errors, b.size());
}

TEST(GgufMalformed, RandomByteMutationsNeverCrash) {
  // Deterministic mutations of 1-4 bytes of the fixture, written in place: each file
  // must either parse (and then convert every tensor) or give a cb::Error naming it.
  const std::string b = test::read_file(kFixtures + "all_types.gguf");
  const std::string p = test::write_tmp("gguf_mutate.gguf", b);
  const int fd = ::open(p.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  std::mt19937 rng(12345);
  const uint8_t interesting[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0x02, 0x20, 0x40};
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<size_t> at(1 + rng() % 4);
    for (size_t& a : at) {
      a = rng() % b.size();
      const uint8_t v = (rng() % 2) != 0 ? interesting[rng() % 8] : static_cast<uint8_t>(rng());
      ASSERT_EQ(::pwrite(fd, &v, 1, static_cast<off_t>(a)), 1);
    }
    try {
      auto f = GgufFile::open(p);
      for (const TensorRef& t : f->tensors()) {
        std::vector<float> out(static_cast<size_t>(t.numel()));
        to_f32(t, out.data());
      }
      ++parsed;
    } catch (const Error& e) {
      ++rejected;
      ASSERT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
    for (size_t a : at) ASSERT_EQ(::pwrite(fd, &b[a], 1, static_cast<off_t>(a)), 1);
  }
  ::close(fd);
  EXPECT_GT(rejected, 100);
  EXPECT_GT(parsed, 100);  // most mutations land in tensor data or string bytes
}

TEST(GgufMalformed, AbsurdCounts) {
  expect_error("tensor_count", header(uint64_t{1} << 62, 0), {"tensor_count"});
  expect_error("kv_count", header(0, uint64_t{1} << 62), {"kv_count"});
  expect_error("kv_count_small", header(0, 3) + kv_u32("a", 1), {"kv_count"});
  expect_error("array_u8_2p60",
               header(0, 1) + Bytes().str("arr").u32(kArr).u32(kU8).u64(uint64_t{1} << 60).s(),
               {"array count", "'arr'"});
  expect_error("array_arr_2p60",
               header(0, 1) + Bytes().str("aa").u32(kArr).u32(kArr).u64(uint64_t{1} << 60).s(),
               {"array count", "'aa'"});
  // 5M one-byte values fit the file (5 MB) but pass the limit on metadata values (~100 bytes
  // of memory each): refused before 0.5 GB is spent on them.
  const uint64_t many = 5u << 20;
  expect_error("array_u8_5M",
               header(0, 1) + Bytes().str("big").u32(kArr).u32(kU8).u64(many).zeros(many).s(),
               {"array count 5242880", "'big'", "metadata values per file"});
  // 100 strings need at least 800 bytes; only 40 remain.
  expect_error("array_str",
               header(0, 1) + Bytes().str("s").u32(kArr).u32(kStr).u64(100).zeros(40).s(),
               {"array count", "'s'"});
}

TEST(GgufMalformed, StringLengths) {
  expect_error("key_len_2p50", header(0, 1) + Bytes().u64(uint64_t{1} << 50).raw("k").zeros(40).s(),
               {"string length", "past end"});
  expect_error("value_len", header(0, 1) + Bytes().str("k").u32(kStr).u64(1000).raw("short").s(),
               {"string length", "'k'"});
  expect_error("tensor_name_len", header(1, 0) + Bytes().u64(~uint64_t{0}).zeros(40).s(),
               {"string length", "tensor"});
}

TEST(GgufMalformed, BadValueTypes) {
  expect_error("unknown_type", header(0, 1) + Bytes().str("k").u32(13).u32(0).s(),
               {"'k'", "unknown value type 13"});
  expect_error("unknown_elem_type",
               header(0, 1) + Bytes().str("k").u32(kArr).u32(99).u64(1).u32(0).s(),
               {"'k'", "array element type 99"});
  expect_error("bool_2", header(0, 1) + Bytes().str("flag").u32(kBool).u8(2).s(),
               {"bool value 2", "'flag'"});
  expect_error("bool_array_2",
               header(0, 1) + Bytes().str("fl").u32(kArr).u32(kBool).u64(2).u8(1).u8(7).s(),
               {"bool value 7", "'fl'"});
  Bytes deep;
  deep.str("deep").u32(kArr);
  for (int d = 0; d < 20; ++d) deep.u32(kArr).u64(1);
  deep.u32(kU8).u64(1).u8(0).zeros(64);
  expect_error("nested_deep", header(0, 1) + deep.s(), {"'deep'", "nests arrays"});
}

TEST(GgufMalformed, DuplicateKeyAndTensorName) {
  expect_error("dup_key", build({kv_u32("a.b", 1), kv_u32("a.b", 2)}, {}, 0),
               {"duplicate metadata key", "'a.b'"});
  expect_error("dup_tensor", build({}, {{"w", {8}, kF32, 0}, {"w", {8}, kF32, 32}}, 64),
               {"duplicate tensor name", "'w'"});
}

TEST(GgufMalformed, Alignment) {
  expect_error("align0", build({kv_u32("general.alignment", 0)}, {}, 0),
               {"general.alignment 0", "power of two"});
  expect_error("align48", build({kv_u32("general.alignment", 48)}, {}, 0),
               {"general.alignment 48", "power of two"});
  expect_error("align_u64", build({kv_u64("general.alignment", 32)}, {}, 0),
               {"'general.alignment'", "uint64", "uint32"});
  expect_error("misaligned", build({}, {{"w", {4}, kF32, 4}}, 64),
               {"'w'", "misaligned", "offset 4"});
  expect_error("misaligned64",
               build({kv_u32("general.alignment", 64)}, {{"w", {4}, kF32, 32}}, 128, 64),
               {"'w'", "misaligned", "64"});
}

TEST(GgufMalformed, Dimensions) {
  expect_error("n_dims_0", build({}, {{"w0", {}, kF32, 0}}, 32), {"'w0'", "n_dims 0"});
  expect_error("n_dims_5", build({}, {{"w5", {1, 1, 1, 1, 1}, kF32, 0}}, 32), {"'w5'", "n_dims 5"});
  expect_error("ne_zero", build({}, {{"wz", {4, 0}, kF32, 0}}, 32),
               {"'wz'", "invalid dimension", "ne[1] = 0"});
  expect_error("ne_overflow",
               build({}, {{"big", {uint64_t{1} << 32, uint64_t{1} << 32}, kF32, 0}}, 32),
               {"'big'", "overflow"});
  expect_error("q4_0_ne0_48", build({}, {{"q", {48, 2}, kQ4_0, 0}}, 64),
               {"'q'", "q4_0", "ne[0] = 48", "multiple of the 32"});
  // K-quants come in super-blocks of 256: a row of 128 is not whole blocks.
  expect_error("q4_k_ne0_128", build({}, {{"q", {128, 2}, kQ4_K, 0}}, 288),
               {"'q'", "q4_k", "ne[0] = 128", "multiple of the 256"});
}

TEST(GgufMalformed, UnsupportedGgmlType) {
  expect_error("iq2_xxs", build({}, {{"blk.0.ffn_up.weight", {256}, kIQ2_XXS, 0}}, 256),
               {"'blk.0.ffn_up.weight'", "ggml type id 16", "iq2_xxs", "q2_K-q6_K"});
  expect_error("type_999", build({}, {{"x", {32}, 999, 0}}, 256), {"'x'", "ggml type id 999"});
}

TEST(GgufMalformed, DataOutOfBounds) {
  expect_error("past_end", build({}, {{"w", {16}, kF32, 1024}}, 64),
               {"'w'", "offset 1024", "64 bytes", "past end of file"});
  expect_error("partly_past_end", build({}, {{"w", {32}, kF32, 0}}, 100),
               {"'w'", "128 bytes", "past end of file"});
  expect_error("nbytes_wraps", build({}, {{"huge", {uint64_t{1} << 62}, kF32, 0}}, 64),
               {"'huge'", "past end of file"});
  expect_error("offset_huge", build({}, {{"w", {8}, kF32, ~uint64_t{31}}}, 64),
               {"'w'", "past end of file"});
  expect_error("overlap", build({}, {{"a", {16}, kF32, 0}, {"b", {16}, kF32, 32}}, 128),
               {"'a'", "'b'", "overlap"});
  expect_error("overlap_reordered",
               build({}, {{"b", {8}, kF32, 64}, {"a", {32}, kF32, 0}, {"c", {8}, kF32, 96}}, 128),
               {"'a'", "'b'", "overlap"});
}

}  // namespace
}  // namespace cb::formats
