// Hardware profiles: the built-ins round-trip and name a source for every field; malformed
// files (not JSON, a field twice, a FIFO, a huge file) are refused naming them. Sim mode against
// out-of-range input: a profile's fields each within a sensible range (the message names the
// file, the field and the range); a virtual clock that cannot run away or
// stop (a replay that used to spin forever, deaf to SIGTERM, on an overhead of 1e306 s); the KV
// pool's and the SSD rates' messages naming the profile as the cause.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "eval/calibrate.h"
#include "eval/sim_replay.h"
#include "lib/core/error.h"
#include "lib/model/model.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/sim/profile.h"
#include "lib/sim/sim_engine.h"
#include "tests/support/test_data.h"
#include "tests/unit/sim/calibrate_retry.h"

namespace cb::sim {
namespace {

[[maybe_unused]] const int kVerifySimEnv = setenv("CACHEBENCH_SIM_VERIFY", "1", 1);

/// The A100 profile with `field` set to `value`, written to a file named `name`.
std::string profile_file(const std::string& name, const std::string& field, double value) {
  nlohmann::json j = builtin_profile("a100-80gb").to_json();
  j[field] = value;
  return test::write_tmp(name, j.dump());
}

/// load_profile's error for `path` ("no error" when it loads).
std::string load_error(const std::string& path) {
  try {
    load_profile(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<engine::SessionInput> conversations(size_t n, size_t message, int64_t output) {
  std::vector<engine::SessionInput> sessions(n);
  for (size_t i = 0; i < n; ++i) {
    sessions[i].id = i;
    for (int t = 0; t < 3; ++t) {
      sessions[i].turns.emplace_back();
      sessions[i].turns.back().ids.resize(message);
      sessions[i].turns.back().output_tokens = output;
    }
  }
  return sessions;
}

/// run_sim_replay's error in CA mode ("no error" when it runs).
std::string replay_error(const HardwareProfile& p, const eval::ReplayOptions& o,
                         const char* model = "llama-13b", engine::Mode mode = engine::Mode::CA) {
  eval::SimOptions so;
  so.profile = p;
  try {
    eval::run_sim_replay(model::preset_config(model), conversations(5, 400, 50), mode, o, so);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

eval::ReplayOptions closed_loop() {
  eval::ReplayOptions o;
  o.engine.sched.rate = 0;
  o.store.dram_bytes = 8'000'000'000;
  return o;
}

TEST(SimProfileLimits, EachFieldHasItsRangeAndTheMessageNamesFileFieldAndRange) {
  struct Case {
    const char* field;
    double value;
    const char* range;
  };
  const Case bad[] = {
      {"step_overhead_s", 1e306, "it must be from 0 to 10 seconds"},
      {"seq_overhead_s", 1e308, "it must be from 0 to 1 seconds"},
      {"layer_overhead_s", 2, "it must be from 0 to 1 seconds"},
      {"pcie_latency_s", 5, "it must be from 0 to 1 seconds"},
      {"ssd_latency_s", -1, "it must be from 0 to 1 seconds"},
      {"gemm_tflops", 1e300, "it must be from 1e-06 to 100000 TFLOP/s"},
      {"attn_tflops", 1e-7, "it must be from 1e-06 to 100000 TFLOP/s"},
      {"decode_attn_tflops", 0, "it must be from 1e-06 to 100000 TFLOP/s"},
      {"hbm_gbps", 1e-300, "it must be 0 (no memory term) or from 1e-06 to 1e+06 GB/s"},
      {"nvlink_gbps", 1e9, "it must be 0 (no all-reduce cost) or from 1e-06 to 100000 GB/s"},
      {"d2d_gbps", 1e7, "it must be from 1e-06 to 1e+06 GB/s"},
      {"h2d_gbps", 1e-310, "it must be from 1e-06 to 100000 GB/s"},
      {"d2h_gbps", 1e6, "it must be from 1e-06 to 100000 GB/s"},
      {"ssd_read_gbps", 1e5, "it must be from 1e-06 to 10000 GB/s"},
      {"ssd_write_gbps", 1e300, "it must be from 1e-06 to 10000 GB/s"},
      {"hbm_bytes", 1e19,
       "it must be 0 (the KV pool is sized by the engine) or from 1 to 4.61169e+18 bytes (2^62)"},
      {"dram_bytes", 1e20, "it must be from 0 to 4.61169e+18 bytes (2^62)"},
      {"ssd_bytes", -1, "it must be from 0 to 4.61169e+18 bytes (2^62)"},
      {"gpu_usd_per_hour", 1e7, "it must be from 0 to 1e+06 USD"},
  };
  for (const Case& c : bad) {
    const std::string path =
        profile_file(std::string("bad_") + c.field + ".json", c.field, c.value);
    const std::string m = load_error(path);
    EXPECT_EQ(m.rfind(path + ": field '" + c.field + "' is ", 0), 0u) << m;
    EXPECT_NE(m.find(c.range), std::string::npos) << m;
  }
  // The ends of the ranges, and the zeros that mean something, load.
  const Case good[] = {
      {"step_overhead_s", 10, ""}, {"seq_overhead_s", 1, ""},     {"layer_overhead_s", 0, ""},
      {"hbm_gbps", 0, ""},         {"nvlink_gbps", 0, ""},        {"hbm_bytes", 0, ""},
      {"gemm_tflops", 1e-6, ""},   {"gemm_tflops", 1e5, ""},      {"ssd_read_gbps", 1e4, ""},
      {"ssd_bytes", 4e18, ""},     {"gpu_usd_per_hour", 1e6, ""},
  };
  for (const Case& c : good) {
    EXPECT_EQ(load_error(profile_file("good.json", c.field, c.value)), "no error")
        << c.field << " " << c.value;
  }
}

// The replay that hung (and ignored SIGTERM): a profile's overhead of 1e306 s put the virtual
// clock at 1e306 s, the next steps at infinity and then NaN, and the idle branch of the loop
// then spun, calling nothing that checks for an interrupt. Such a profile no longer loads; run
// anyway (the struct bypasses the loader), the loop refuses the clock. A watchdog turns a hang
// back into a failure.
TEST(SimClock, ARunawayClockIsRefusedNotSpunOn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-runs only this test
  struct Huge {
    const char* field;
    double HardwareProfile::*member;
    double value;
  };
  for (const Huge& h : {Huge{"step_overhead_s", &HardwareProfile::step_overhead_s, 1e306},
                        Huge{"seq_overhead_s", &HardwareProfile::seq_overhead_s, 1e308}}) {
    HardwareProfile p = builtin_profile("a100-80gb");
    p.*h.member = h.value;
    EXPECT_EXIT(
        {
          alarm(30);  // a hang ends as SIGALRM, which fails the expectation
          std::fprintf(stderr, "%s", replay_error(p, closed_loop()).c_str());
          std::_Exit(0);
        },
        ::testing::ExitedWithCode(0), "the virtual clock reached .* past the 4e9 s")
        << h.field;
  }
  // In range but absurdly slow (1 MFLOP/s): a long trace passes the limit instead of running
  // on with times that no longer resolve a microsecond.
  HardwareProfile slow = builtin_profile("a100-80gb");
  slow.gemm_tflops = slow.attn_tflops = slow.decode_attn_tflops = 1e-6;
  eval::SimOptions so;
  so.profile = slow;
  try {
    eval::run_sim_replay(model::preset_config("llama-13b"), conversations(300, 500, 50),
                         engine::Mode::RE, closed_loop(), so);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("virtual clock reached"), std::string::npos) << e.what();
  }
}

// The replay command's interrupt check is its progress callback: it must also run when the
// clock skips ahead to the next arrival (an idle stretch), not only after steps.
TEST(SimClock, ProgressIsReportedWhenTheClockSkipsAhead) {
  eval::ReplayOptions o = closed_loop();
  o.engine.sched.rate = 0.001;  // arrivals ~1,000 s apart: idle between the conversations
  eval::SimOptions so;
  so.profile = builtin_profile("a100-80gb");
  int64_t calls = 0;
  const eval::ReplayRun r =
      eval::run_sim_replay(model::preset_config("llama-13b"), conversations(4, 100, 4),
                           engine::Mode::CA, o, so, [&](int64_t, int64_t) { ++calls; });
  EXPECT_GE(calls, r.result.steps + 3);
  // An interrupt (the callback throws, as check_interrupted does) stops the run.
  try {
    eval::run_sim_replay(model::preset_config("llama-13b"), conversations(4, 100, 4),
                         engine::Mode::CA, o, so, [&](int64_t done, int64_t) {
                           if (done >= 3) throw make_error("SIGTERM", "interrupted");
                         });
    ADD_FAILURE() << "not interrupted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "SIGTERM: interrupted");
  }
}

// hbm_bytes 0 is documented (profile.h, docs/sim.md, what calibrate writes): the KV pool is the
// engine's (--max-batch full windows), as in a real replay. Any positive size is a real HBM, and
// one too small for the weights is refused naming the file and the field.
TEST(SimKvPool, HbmZeroIsTheEnginesPoolAndTooSmallNamesTheProfileFile) {
  const std::string zero = profile_file("hbm_zero.json", "hbm_bytes", 0);
  eval::SimOptions so;
  so.profile = load_profile(zero);
  eval::ReplayOptions o = closed_loop();
  o.engine.ctx = 2048;
  o.engine.sched.max_batch = 4;
  const eval::ReplayRun r = eval::run_sim_replay(model::preset_config("llama-13b"),
                                                 conversations(2, 100, 4), engine::Mode::CA, o, so);
  EXPECT_EQ(r.summary["kv_blocks"].get<int64_t>(), 4 * (2048 / 16 + 1));
  for (const double hbm : {1.0, 1e10}) {
    const std::string path = profile_file("hbm_small.json", "hbm_bytes", hbm);
    const std::string m = replay_error(load_profile(path), closed_loop());
    EXPECT_EQ(m.rfind("--profile " + path + " (profile 'a100-80gb'): llama-13b does not fit", 0),
              0u)
        << m;
    EXPECT_NE(m.find("hbm_bytes"), std::string::npos) << m;
  }
}

// A pool of some blocks but not one window's: the cause is the profile's HBM, not the
// --kv-blocks the user did not give.
TEST(SimKvPool, APoolShortOfOneWindowBlamesTheProfileUnlessKvBlocksWasGiven) {
  const std::string path = profile_file("hbm_3e10.json", "hbm_bytes", 3e10);
  const HardwareProfile p = load_profile(path);
  eval::ReplayOptions o = closed_loop();
  const std::string m = replay_error(p, o);
  EXPECT_EQ(m.rfind("--profile " + path + " (profile 'a100-80gb'): its hbm_bytes 3e+10", 0), 0u)
      << m;
  EXPECT_NE(m.find("holds 73 KV blocks of 16 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("fewer than the 129 one full window of 2048 tokens needs"), std::string::npos)
      << m;
  EXPECT_NE(m.find("--kv-blocks 129 or more"), std::string::npos) << m;
  o.engine.num_blocks = 73;  // given: then it is --kv-blocks' message
  EXPECT_EQ(replay_error(p, o).rfind("--kv-blocks: 73 blocks cannot hold one full window", 0), 0u);
  o.engine.num_blocks = 0;
  o.engine.ctx = 1024;  // a window that fits runs
  EXPECT_EQ(replay_error(p, o), "no error");
}

// The labels of built-in and file profiles in messages.
TEST(SimKvPool, ProfilesAreNamedByTheirFile) {
  EXPECT_EQ(builtin_profile("a100").label(), "a100-80gb");
  nlohmann::json j = builtin_profile("h200").to_json();
  j.erase("name");
  const std::string path = test::write_tmp("unnamed.json", j.dump());
  EXPECT_EQ(load_profile(path).label(), path);
  EXPECT_EQ(load_profile(profile_file("named.json", "hbm_bytes", 0)).label(),
            test::tmp_dir() + "/named.json (profile 'a100-80gb')");
}

// calibrate --ssd-dir "" writes stand-in SSD rates marked "not measured": an SSD tier on them is
// refused (its timings would be made up); without an SSD tier, or in RE, the profile runs.
TEST(SimSsd, PlaceholderSsdRatesRefuseAnSsdTier) {
  nlohmann::json j = builtin_profile("a100-80gb").to_json();
  j["ssd_read_gbps"] = j["ssd_write_gbps"] = 1;
  j["sources"]["ssd_read_gbps"] = j["sources"]["ssd_write_gbps"] = "not measured (no --ssd-dir)";
  const std::string path = test::write_tmp("no_ssd.json", j.dump());
  const HardwareProfile p = load_profile(path);
  EXPECT_TRUE(p.unmeasured("ssd_read_gbps"));
  EXPECT_FALSE(p.unmeasured("h2d_gbps"));
  eval::ReplayOptions o = closed_loop();
  EXPECT_EQ(replay_error(p, o), "no error");
  o.store.ssd_bytes = 1'000'000'000'000;
  const std::string m = replay_error(p, o);
  EXPECT_EQ(
      m.rfind("--profile " + path + " (profile 'a100-80gb'): its SSD rates were not measured", 0),
      0u)
      << m;
  EXPECT_NE(m.find("placeholders"), std::string::npos) << m;
  EXPECT_NE(m.find("--ssd-dir"), std::string::npos) << m;
  EXPECT_EQ(replay_error(p, o, "llama-13b", engine::Mode::RE), "no error");
  EXPECT_EQ(replay_error(builtin_profile("a100-80gb"), o), "no error");  // datasheet rates
}

TEST(SimSsd, CalibrateWithoutSsdDirMarksItsSsdRatesUnmeasured) {
  CB_REQUIRE_DATA(path, "models/stories260K/stories260K.gguf");
  auto src = model::ModelSource::open(path);
  auto m = model::Model::load(*src);
  eval::CalibrateOptions co;
  co.ssd_dir = "";
  co.reps = 1;
  const HardwareProfile p = eval::test_util::calibrate_retried(*m, co).profile;
  EXPECT_TRUE(p.unmeasured("ssd_read_gbps"));
  EXPECT_TRUE(p.unmeasured("ssd_write_gbps"));
  EXPECT_FALSE(p.unmeasured("h2d_gbps"));
}

TEST(Profile, BuiltinsValidateAndRoundTripThroughJson) {
  for (const std::string& n : builtin_profile_names()) {
    const HardwareProfile p = builtin_profile(n);
    EXPECT_NO_THROW(p.validate(n));
    EXPECT_FALSE(p.sources.at("gemm_tflops").empty()) << n;
    const HardwareProfile q = HardwareProfile::from_json(p.to_json(), n);
    EXPECT_EQ(q.to_json(), p.to_json()) << n;
  }
  EXPECT_THROW(builtin_profile("tpu"), Error);
}

TEST(Profile, MalformedProfilesNameTheField) {
  nlohmann::json j = builtin_profile("a100-80gb").to_json();
  const auto msg = [](const nlohmann::json& x) {
    try {
      HardwareProfile::from_json(x, "p.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  nlohmann::json a = j;
  a.erase("h2d_gbps");
  EXPECT_NE(msg(a).find("h2d_gbps"), std::string::npos);
  nlohmann::json b = j;
  b["gemm_tflops"] = -1;
  EXPECT_NE(msg(b).find("gemm_tflops"), std::string::npos);
  nlohmann::json c = j;
  c["ssd_read_gbps"] = "fast";
  EXPECT_NE(msg(c).find("ssd_read_gbps"), std::string::npos);
  nlohmann::json d = j;
  d["gpus"] = 0;
  EXPECT_NE(msg(d).find("field 'gpus' is 0; it must be an integer from 1 to 4096"),
            std::string::npos)
      << msg(d);
  d["gpus"] = -2;  // the same range said for every value out of it
  EXPECT_NE(msg(d).find("it must be an integer from 1 to 4096"), std::string::npos) << msg(d);
  EXPECT_NE(msg(nlohmann::json::array()).find("object"), std::string::npos);
  // Values that would not convert: a capacity past uint64_t, an integer past int.
  nlohmann::json e = j;
  e["dram_bytes"] = 1e20;
  EXPECT_NE(msg(e).find("dram_bytes"), std::string::npos);
  nlohmann::json f = j;
  f["kv_bytes_per_element"] = 4294967298ll;
  EXPECT_NE(msg(f).find("kv_bytes_per_element"), std::string::npos);
  nlohmann::json g = j;
  g["gpus"] = 18446744073709551615ull;
  EXPECT_NE(msg(g).find("field 'gpus' is 18446744073709551615;"), std::string::npos) << msg(g);
  // The value given, not one clamped for the check (4294967298 used to print as 2147483648);
  // the range is replay's and ablate's --gpus (kMaxGpus).
  g["gpus"] = 4294967298ull;
  EXPECT_NE(msg(g).find("field 'gpus' is 4294967298; it must be an integer from 1 to 4096"),
            std::string::npos)
      << msg(g);
  g["gpus"] = 4097;
  EXPECT_NE(msg(g).find("field 'gpus' is 4097;"), std::string::npos) << msg(g);
  g["gpus"] = 4096;
  EXPECT_EQ(msg(g), "no error");
  nlohmann::json h = j;
  h["ssd_bytes"] = 4e18;  // 4 EB still converts
  nlohmann::json k = j;
  k["h2d_gbps"] = 1e-310;  // denormal: transfer times overflow
  EXPECT_NE(msg(k).find("h2d_gbps"), std::string::npos);
  EXPECT_EQ(msg(h), "no error");
  // A misspelt field is named, not ignored (its default would stand in silently); calibrate's
  // provenance is not a field but is read back.
  nlohmann::json typo = j;
  typo["kv_bytes_per_elem"] = 4;
  EXPECT_NE(msg(typo).find("unknown field 'kv_bytes_per_elem'"), std::string::npos) << msg(typo);
  nlohmann::json calibrated = j;
  calibrated["git"] = "abc";
  calibrated["fit"] = {{"median_abs_error", 0.01}};
  EXPECT_EQ(msg(calibrated), "no error");
  // Files: deep nesting is refused before parsing, naming the file.
  const std::string deep =
      test::write_tmp("deep_profile.json", "{\"sources\": " + std::string(100000, '[') + "}");
  try {
    load_profile(deep);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find(deep + ": nests JSON"), std::string::npos) << err.what();
  }
}

// docs/sim.md: every field of a built-in profile has its source (gpus and
// kv_bytes_per_element had none).
TEST(Profile, EveryFieldOfABuiltinHasItsSource) {
  for (const std::string& n : builtin_profile_names()) {
    const HardwareProfile p = builtin_profile(n);
    const nlohmann::json j = p.to_json();
    for (const auto& [k, v] : j.items()) {
      if (k == "name" || k == "description" || k == "sources") continue;
      EXPECT_TRUE(p.sources.count(k) == 1 && !p.sources.at(k).empty()) << n << ": " << k;
    }
  }
}

// A FIFO, opened, blocks until a writer comes, and /dev/zero reads until memory runs out: both
// are refused by what they are, naming them. The alarm makes a hang fail (SIGALRM ends the
// test binary) rather than block the suite.
TEST(Profile, AFileThatIsNotRegularIsRefusedWithoutReadingIt) {
  const std::string fifo = test::tmp_dir() + "/profile_fifo.json";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ::alarm(20);
  const std::string e = load_error(fifo);
  const std::string z = load_error("/dev/zero");
  ::alarm(0);
  ::unlink(fifo.c_str());
  EXPECT_NE(e.find(fifo + ": is not a regular file"), std::string::npos) << e;
  EXPECT_NE(z.find("/dev/zero: is not a regular file"), std::string::npos) << z;
}

// A profile is a few KB: a file of megabytes is another file, refused before it is parsed.
TEST(Profile, AFileFarLargerThanAProfileIsRefused) {
  const std::string big =
      test::write_tmp("big_profile.json", "{" + std::string(2 << 20, ' ') + "}");
  const std::string e = load_error(big);
  EXPECT_NE(e.find(big + ": is 2097154 bytes, too large for a hardware profile"), std::string::npos)
      << e;
}

// Malformed JSON is said with nlohmann's position and reason, as the trace loader says it.
TEST(Profile, InvalidJsonSaysWhereAndWhy) {
  const std::string bad = test::write_tmp("bad_profile.json", "{\"gemm_tflops\": 1,,}");
  const std::string e = load_error(bad);
  EXPECT_NE(e.find(bad + ": not valid JSON (parse error at line 1, column "), std::string::npos)
      << e;
  EXPECT_NE(e.find("unexpected ','"), std::string::npos) << e;
}

// nlohmann keeps the last of a key given twice: a profile saying gemm_tflops 218.4 and then
// 0.001 ran with 0.001. Refused naming the file and the key, in sources too.
TEST(Profile, AFieldGivenTwiceIsRefusedNamingIt) {
  const std::string text = builtin_profile("a100-80gb").to_json().dump();
  const std::string twice =
      test::write_tmp("twice_profile.json", "{\"gemm_tflops\": 0.001, " + text.substr(1));
  EXPECT_NE(load_error(twice).find(twice + ": gives the field 'gemm_tflops' twice"),
            std::string::npos)
      << load_error(twice);
  const size_t src = text.find("\"sources\":{") + 11;
  const std::string in_sources = test::write_tmp(
      "twice_source.json", text.substr(0, src) + "\"hbm_gbps\":\"x\"," + text.substr(src));
  EXPECT_NE(load_error(in_sources).find("gives the field 'hbm_gbps' twice in 'sources'"),
            std::string::npos)
      << load_error(in_sources);
  EXPECT_EQ(load_error(test::write_tmp("once_profile.json", text)), "no error");
}

}  // namespace
}  // namespace cb::sim
