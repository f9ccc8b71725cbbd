#include "lib/formats/safetensors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::formats {
namespace {

// ---- a tiny test-only safetensors writer ----

struct StTensor {
  std::string name;
  std::string dtype;  ///< "F32", "F16", "BF16" or "I32"
  std::vector<int64_t> shape;
  std::vector<float> values;
};

std::string encode(const std::string& dtype, const std::vector<float>& v) {
  std::string out;
  for (float x : v) {
    char b[4];
    size_t n = 4;
    if (dtype == "F32") {
      std::memcpy(b, &x, 4);
    } else if (dtype == "I32") {
      const auto i = static_cast<int32_t>(x);
      std::memcpy(b, &i, 4);
    } else {
      const uint16_t h = dtype == "F16" ? fp32_to_fp16(x) : fp32_to_bf16(x);
      std::memcpy(b, &h, 2);
      n = 2;
    }
    out.append(b, n);
  }
  return out;
}

/// 8-byte little-endian header length, the header text, the data buffer.
std::string st_raw(const std::string& header, const std::string& data, uint64_t len) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header + data;
}
std::string st_raw(const std::string& header, const std::string& data) {
  return st_raw(header, data, header.size());
}

std::string st_build(const std::vector<StTensor>& ts,
                     const std::map<std::string, std::string>& meta = {}) {
  std::string header = "{";
  std::string data;
  if (!meta.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : meta) {
      header += (first ? "\"" : ",\"") + k + "\":\"" + v + "\"";
      first = false;
    }
    header += "}";
  }
  for (const StTensor& t : ts) {
    if (header.size() > 1) header += ",";
    const size_t begin = data.size();
    data += encode(t.dtype, t.values);
    std::string shape;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      shape += (i > 0 ? "," : "") + std::to_string(t.shape[i]);
    }
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size()) +
              "]}";
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';  // real writers pad to 8 bytes
  return st_raw(header, data);
}

std::vector<float> read_back(const TensorRef& t) {
  std::vector<float> out;
  const size_t esize = t.dtype == DType::F16 || t.dtype == DType::BF16 ? 2 : 4;
  for (size_t off = 0; off + esize <= t.nbytes; off += esize) {
    if (t.dtype == DType::F32) {
      float f;
      std::memcpy(&f, t.data + off, 4);
      out.push_back(f);
    } else if (t.dtype == DType::I32) {
      int32_t i;
      std::memcpy(&i, t.data + off, 4);
      out.push_back(static_cast<float>(i));
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + off, 2);
      out.push_back(t.dtype == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h));
    }
  }
  return out;
}

/// Asserts that `fn` throws a one-line cb::Error containing `path` and `keyword`.
template <typename Fn>
void expect_error(Fn fn, const std::string& path, const std::string& keyword) {
  try {
    fn();
    ADD_FAILURE() << "expected cb::Error mentioning '" << keyword << "' for " << path;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(keyword), std::string::npos) << "missing '" << keyword << "' in: " << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

void expect_file_error(const std::string& bytes, const std::string& keyword) {
  // Named per test so that ctest -j runs of different tests do not share the file.
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string path = test::write_tmp("st_bad_" + name + ".safetensors", bytes);
  SCOPED_TRACE(keyword);
  expect_error([&] { SafetensorsFile::open(path); }, path, keyword);
}

/// A one-tensor header `{"w": <entry>}` with `data_bytes` zero bytes of data.
std::string one(const std::string& entry, size_t data_bytes = 8) {
  return st_raw("{\"w\":" + entry + "}", std::string(data_bytes, '\0'));
}

std::string fresh_dir(const std::string& name) {
  const std::string d = test::tmp_dir() + "/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const std::vector<StTensor> kSample = {
    {"a", "F32", {2, 3}, {1.f, -2.5f, 3.25f, 0.f, 1e-3f, -7.f}},
    {"b", "F16", {4}, {0.5f, -1.25f, 1024.f, 6.103515625e-05f}},
    {"c", "BF16", {2, 2}, {1.f, -3.f, 0.15625f, 256.f}},
    {"d", "I32", {3}, {-1.f, 0.f, 123456.f}},
};

// ---- valid files ----

TEST(SafetensorsFileTest, ReadsF32F16Bf16I32AndMetadata) {
  const std::string path =
      test::write_tmp("st_ok.safetensors", st_build(kSample, {{"format", "pt"}, {"k", "v"}}));
  const auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->path(), path);
  ASSERT_EQ(f->tensors().size(), kSample.size());
  for (size_t i = 0; i < kSample.size(); ++i) {
    const StTensor& want = kSample[i];
    const TensorRef& t = f->tensors()[i];  // file order
    EXPECT_EQ(t.name, want.name);
    EXPECT_EQ(t.shape, want.shape);
    EXPECT_EQ(t.file, path);
    EXPECT_EQ(read_back(t), want.values) << want.name;
    EXPECT_EQ(f->find_tensor(want.name), &t);
  }
  EXPECT_EQ(f->tensors()[0].dtype, DType::F32);
  EXPECT_EQ(f->tensors()[1].dtype, DType::F16);
  EXPECT_EQ(f->tensors()[2].dtype, DType::BF16);
  EXPECT_EQ(f->tensors()[3].dtype, DType::I32);
  EXPECT_EQ(f->tensors()[0].nbytes, 24u);
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
  EXPECT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
}

TEST(SafetensorsFileTest, ScalarZeroSizeAndEmpty) {
  const std::string path = test::write_tmp(
      "st_scalar.safetensors",
      st_build({{"s", "F32", {}, {42.5f}}, {"z", "BF16", {0, 7}, {}}, {"t", "F16", {1}, {2.f}}}));
  const auto f = SafetensorsFile::open(path);
  const TensorRef* s = f->find_tensor("s");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->numel(), 1);
  EXPECT_EQ(s->nbytes, 4u);
  EXPECT_EQ(read_back(*s), std::vector<float>{42.5f});
  const TensorRef* z = f->find_tensor("z");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->numel(), 0);
  EXPECT_EQ(z->nbytes, 0u);

  const std::string empty = test::write_tmp("st_empty_hdr.safetensors", st_raw("{}", ""));
  EXPECT_TRUE(SafetensorsFile::open(empty)->tensors().empty());
}

TEST(SafetensorsFileTest, AllowsGapsAndUnusedTail) {
  // b starts 4 bytes after a ends and 8 bytes after b are unused.
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  const std::string path =
      test::write_tmp("st_gap.safetensors", st_raw(header, std::string(20, '\0')));
  EXPECT_EQ(SafetensorsFile::open(path)->tensors().size(), 2u);
}

// ---- malformed files ----

TEST(SafetensorsMalformedTest, TooShortOrBadHeaderLength) {
  expect_file_error("", "too short");
  expect_file_error(std::string("\x05\0\0\0\0\0\0", 7), "too short");
  expect_file_error(st_raw("{}", "", 1000), "header length 1000");
  expect_file_error(st_raw("{}", "", uint64_t{1} << 63), "100 MB");
  expect_file_error(st_raw("{}", "", ~uint64_t{0}), "100 MB");
}

TEST(SafetensorsMalformedTest, BadJson) {
  expect_file_error(st_raw(R"({"w": {"dtype": )", ""), "not valid JSON");
  expect_file_error(st_raw("", ""), "not valid JSON");
  expect_file_error(st_raw("{\"w\xff\":1}", ""), "not valid JSON");  // ill-formed UTF-8
  expect_file_error(st_raw("[1, 2]", ""), "expected an object");
  expect_file_error(st_raw("\"str\"", ""), "expected an object");
  expect_file_error(st_raw(std::string(10000, '[') + std::string(10000, ']'), ""), "levels deep");
  expect_file_error(st_raw(R"({"w":{},"w":{}})", ""), "twice");
  expect_file_error(st_raw(R"({"a":{},"w":{"k":[{"w":1}]},"w":{}})", ""), "'w' twice");
}

// JSON has no raw NUL byte, and the reference reader (serde_json) refuses one where the format
// pads with spaces; nlohmann's parser took the first NUL for the end of the text, so a header
// padded with NULs, or anything after a NUL, was read.
TEST(SafetensorsMalformedTest, ANulByteInTheHeaderIsRefused) {
  const std::string data(8, '\0');
  const std::string w = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_NO_THROW(SafetensorsFile::open(
      test::write_tmp("st_space_pad.safetensors", st_raw(w + "      ", data))));
  expect_file_error(st_raw(w + std::string(6, '\0'), data),
                    "header holds a NUL byte at offset " + std::to_string(w.size()));
  expect_file_error(st_raw(w + std::string("\0{\"x\":1}", 8), data), "NUL byte");
  const std::string d = fresh_dir("st_nul_index");
  write_file(d + "/s1.safetensors", st_raw(w, data));
  write_file(d + "/model.safetensors.index.json",
             std::string(R"({"weight_map": {"w": "s1.safetensors"}})") + std::string(4, '\0'));
  expect_error([&] { SafetensorsCheckpoint::open_dir(d); }, d + "/model.safetensors.index.json",
               "index holds a NUL byte");
}

// A header of 100,000 empty entries (1.3 MB; the format allows 100 MB) is read in one linear
// pass: a parser callback made every object's end scan its parent, and 80,000 entries took
// over five minutes.
TEST(SafetensorsMalformedTest, AHeaderOfManyEntriesParsesInLinearTime) {
  std::string h = "{";
  for (int i = 0; i < 100000; ++i) h += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{}";
  h += "}";
  const auto t0 = std::chrono::steady_clock::now();
  expect_file_error(st_raw(h, ""), "dtype");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);  // linear: well under a second
}

TEST(SafetensorsMalformedTest, BadEntryFields) {
  expect_file_error(one("5"), "not an object");
  expect_file_error(one(R"({"shape":[2],"data_offsets":[0,8]})"), "dtype");
  expect_file_error(one(R"({"dtype":7,"shape":[2],"data_offsets":[0,8]})"), "dtype");
  expect_file_error(one(R"({"dtype":"F32","data_offsets":[0,8]})"), "shape");
  expect_file_error(one(R"({"dtype":"F32","shape":[2]})"), "data_offsets");
  expect_file_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4,8]})"), "data_offsets");
  expect_file_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,-8]})"), "non-negative");
  expect_file_error(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})"), "non-negative");
  expect_file_error(st_raw(R"({"__metadata__":{"k":1}})", ""), "__metadata__");
  expect_file_error(st_raw(R"({"__metadata__":[]})", ""), "__metadata__");
}

TEST(SafetensorsMalformedTest, BadDtype) {
  expect_file_error(one(R"({"dtype":"F33","shape":[2],"data_offsets":[0,8]})"), "unknown dtype");
  expect_file_error(one(R"({"dtype":"f32","shape":[2],"data_offsets":[0,8]})"), "unknown dtype");
  expect_file_error(one(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"),
                    "tensor 'w' has dtype F64, which cachebench does not load; convert");
  expect_file_error(one(R"({"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]})"),
                    "does not load");
  // A name with an escaped newline is printed escaped, keeping the message on one line.
  expect_file_error(
      st_raw(R"({"w\n":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')),
      "tensor 'w\\x0a' has dtype F64");
}

TEST(SafetensorsMalformedTest, BadShape) {
  expect_file_error(one(R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), "non-negative");
  expect_file_error(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), "non-negative");
  expect_file_error(one(R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), "non-negative");
  expect_file_error(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"),
                    "overflow");
  expect_file_error(
      one(R"({"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]})"), "overflow");
  expect_file_error(one(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})"),
                    "non-negative");
  expect_file_error(one(R"({"dtype":"F32","shape":[1e30],"data_offsets":[0,8]})"), "non-negative");
}

TEST(SafetensorsMalformedTest, BadOffsets) {
  expect_file_error(one(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"), "begin > end");
  expect_file_error(one(R"({"dtype":"F32","shape":[100],"data_offsets":[0,400]})"), "past the end");
  expect_file_error(one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]})"),
                    "non-negative");
  expect_file_error(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), "size mismatch");
  expect_file_error(one(R"({"dtype":"BF16","shape":[1099511627776],"data_offsets":[0,8]})"),
                    "size mismatch");
  expect_file_error(st_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           std::string(12, '\0')),
                    "overlap");
  expect_file_error(st_raw(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           std::string(16, '\0')),
                    "overlap");
}

TEST(SafetensorsMalformedTest, EveryTruncationThrows) {
  const std::string full = st_build(kSample, {{"format", "pt"}});
  for (size_t len = 0; len < full.size(); ++len) {
    const std::string path = test::write_tmp("st_trunc.safetensors", full.substr(0, len));
    SCOPED_TRACE(len);
    expect_error([&] { SafetensorsFile::open(path); }, path, "");
  }
}

TEST(SafetensorsMalformedTest, ByteMutationsNeverCrash) {
  const std::string full = st_build(kSample, {{"format", "pt"}});
  const std::string path = test::tmp_dir() + "/st_mut.safetensors";
  size_t rejected = 0;
  const char kValues[] = {'\0', '\xff', '"', '9', '[', '-', ','};
  for (size_t i = 0; i < full.size(); ++i) {
    for (size_t k = 0; k < 2; ++k) {  // two of the values per byte keeps the test fast
      const char c = kValues[(i + k * 3) % sizeof kValues];
      std::string m = full;
      m[i] = c;
      write_file(path, m);
      try {
        SafetensorsFile::open(path);
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(rejected, 0u);
}

// ---- checkpoint directories ----

TEST(SafetensorsCheckpointTest, ShardedWithIndex) {
  const std::string d = fresh_dir("st_sharded");
  write_file(d + "/model-00001-of-00002.safetensors", st_build({kSample[0], kSample[1]}));
  write_file(d + "/model-00002-of-00002.safetensors", st_build({kSample[2], kSample[3]}));
  write_file(d + "/unrelated.safetensors", "garbage that is never opened");
  write_file(d + "/model.safetensors.index.json",
             R"({"metadata":{"total_size":60},"weight_map":{)"
             R"("a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors",)"
             R"("c":"model-00002-of-00002.safetensors"}})");  // "d" is in shard 2 only
  const auto ck = SafetensorsCheckpoint::open_dir(d);
  EXPECT_EQ(ck->dir(), d);
  ASSERT_EQ(ck->files().size(), 2u);
  ASSERT_EQ(ck->tensors().size(), 4u);
  for (const StTensor& want : kSample) {
    const TensorRef* t = ck->find_tensor(want.name);
    ASSERT_NE(t, nullptr) << want.name;
    EXPECT_EQ(read_back(*t), want.values);
  }
  EXPECT_EQ(ck->find_tensor("c")->file, d + "/model-00002-of-00002.safetensors");
  EXPECT_EQ(ck->find_tensor("zzz"), nullptr);
}

TEST(SafetensorsCheckpointTest, PrefersModelSafetensors) {
  const std::string d = fresh_dir("st_single");
  write_file(d + "/model.safetensors", st_build(kSample));
  write_file(d + "/other.safetensors", "not opened");
  const auto ck = SafetensorsCheckpoint::open_dir(d + "/");
  ASSERT_EQ(ck->files().size(), 1u);
  EXPECT_EQ(ck->tensors().size(), kSample.size());
}

// transformers loads model.safetensors before the index, vLLM the index's shards: a directory
// holding both is refused (it loaded the index's), as is a name that cannot be told missing.
TEST(SafetensorsCheckpointTest, ModelSafetensorsBesideAnIndexIsRefused) {
  const std::string d = fresh_dir("st_both");
  write_file(d + "/s1.safetensors", st_build({kSample[0]}));
  write_file(d + "/model.safetensors.index.json", R"({"weight_map": {"a": "s1.safetensors"}})");
  EXPECT_EQ(SafetensorsCheckpoint::weight_files(d),
            std::vector<std::string>{d + "/s1.safetensors"});
  write_file(d + "/model.safetensors", st_build(kSample));
  const std::string both = "holds both model.safetensors and model.safetensors.index.json";
  expect_error([&] { SafetensorsCheckpoint::open_dir(d); }, d, both);
  expect_error([&] { SafetensorsCheckpoint::weight_files(d); }, d, both);

  const std::string loop = fresh_dir("st_loop");
  std::filesystem::create_symlink("model.safetensors", loop + "/model.safetensors");
  write_file(loop + "/a.safetensors", st_build(kSample));  // was loaded in its place
  expect_error([&] { SafetensorsCheckpoint::open_dir(loop); }, loop + "/model.safetensors",
               "a symbolic link loop");
}

TEST(SafetensorsCheckpointTest, FallsBackToAllFilesSorted) {
  const std::string d = fresh_dir("st_fallback");
  write_file(d + "/b.safetensors", st_build({kSample[2], kSample[3]}));
  write_file(d + "/a.safetensors", st_build({kSample[0], kSample[1]}));
  write_file(d + "/._a.safetensors", "macOS resource fork, skipped");
  write_file(d + "/notes.txt", "x");
  const auto ck = SafetensorsCheckpoint::open_dir(d);
  ASSERT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(ck->files()[0]->path(), d + "/a.safetensors");
  ASSERT_EQ(ck->tensors().size(), 4u);
  EXPECT_EQ(ck->tensors()[0].name, "a");
  EXPECT_EQ(ck->tensors()[3].name, "d");
}

TEST(SafetensorsCheckpointTest, BadDirectories) {
  const std::string file = test::write_tmp("st_plain_file", "x");
  expect_error([&] { SafetensorsCheckpoint::open_dir(file); }, file, "not a directory");
  const std::string missing = test::tmp_dir() + "/st_no_such_dir";
  expect_error([&] { SafetensorsCheckpoint::open_dir(missing); }, missing, "not a directory");
  const std::string empty = fresh_dir("st_empty_dir");
  write_file(empty + "/config.json", "{}");
  expect_error([&] { SafetensorsCheckpoint::open_dir(empty); }, empty,
               "no model.safetensors, model.safetensors.index.json or *.safetensors in " + empty);
}

TEST(SafetensorsCheckpointTest, BadIndex) {
  const std::string d = fresh_dir("st_bad_index");
  const std::string index = d + "/model.safetensors.index.json";
  write_file(d + "/s1.safetensors", st_build({kSample[0], kSample[1]}));
  write_file(d + "/s2.safetensors", st_build({kSample[1], kSample[2]}));
  auto open = [&] { SafetensorsCheckpoint::open_dir(d); };

  write_file(index, R"({"weight_map": {"a": "s1.safetensors",)");
  expect_error(open, index, "not valid JSON");
  write_file(index, R"([1])");
  expect_error(open, index, "expected an object");
  write_file(index, R"({"metadata": {}})");
  expect_error(open, index, "weight_map");
  write_file(index, R"({"weight_map": {}})");
  expect_error(open, index, "empty");
  write_file(index, R"({"weight_map": {"a": 3}})");
  expect_error(open, index, "not a file name");
  write_file(index, R"({"weight_map": {"a": "s9.safetensors"}})");
  expect_error(open, index, "does not exist");
  write_file(index, R"({"weight_map": {"a": "s1.safetensors", "c": "s1.safetensors"}})");
  expect_error(open, index, "tensor 'c' in shard 's1.safetensors'");
  write_file(index, R"({"weight_map": {"a": "s1.safetensors", "c": "s2.safetensors"}})");
  expect_error(open, d, "appears in both");  // "b" is in both shards
  for (const char* shard : {"../s1.safetensors", "/etc/passwd", "sub/s1.safetensors", "..", ""}) {
    write_file(index, std::string(R"({"weight_map": {"a": ")") + shard + "\"}}");
    SCOPED_TRACE(shard);
    expect_error(open, index, "not a plain file name");
  }
  write_file(d + "/bad.safetensors", std::string("\x01\0\0\0\0\0\0\0{", 9));
  write_file(index, R"({"weight_map": {"a": "s1.safetensors", "x": "bad.safetensors"}})");
  expect_error(open, d + "/bad.safetensors", "not valid JSON");
}

TEST(SafetensorsCheckpointTest, DuplicateAcrossShardsWithoutIndex) {
  const std::string d = fresh_dir("st_dup");
  write_file(d + "/a.safetensors", st_build({kSample[0]}));
  write_file(d + "/b.safetensors", st_build({kSample[0]}));
  expect_error([&] { SafetensorsCheckpoint::open_dir(d); }, d + "/b.safetensors",
               "tensor 'a' appears in both");
}

}  // namespace
}  // namespace cb::formats
