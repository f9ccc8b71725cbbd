// cachebench: KV-cache reuse (CachedAttention) measured against the baselines it replaces.
#include <sys/auxv.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "apps/cachebench/progress.h"
#include "apps/cachebench/subcommands.h"
#include "kernels/cpu/blas_core.h"
#include "lib/core/error.h"

namespace {

// OpenBLAS chose its kernels when it loaded. Where it mistook this CPU (kernels/cpu/blas_core.h),
// start this program again with OPENBLAS_CORETYPE set, which the library reads only when it
// loads; the process keeps its id, arguments and open files. Not when the program was started
// through the dynamic loader (`ld.so ./cachebench`: /proc/self/exe is then the loader, and
// AT_BASE 0). Should the restart fail, go on with the library's own choice.
void restart_for_blas_core(char** argv) {
  namespace kc = cb::kernels::cpu;
  const std::string core = kc::blas_core_to_request();
  if (core.empty() || getauxval(AT_BASE) == 0) return;
  if (setenv(kc::kBlasCoreFromEnv, kc::blas_info().core.c_str(), 1) != 0 ||
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1) != 0) {
    return;
  }
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kc::kBlasCoreFromEnv);
}

// Where CLI11's message misleads, a clearer one (empty: CLI11's own). An option given twice
// reads "--ctx: At Most 1 required but received 2"; a misspelt option (--modle) reads as a
// missing required one ("--model is required"), since CLI11 checks requirements first.
std::string clearer_parse_error(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    const std::string said = ": At Most 1 required but received ";
    const size_t at = what.find(said);
    if (at == std::string::npos) return "";
    return what.substr(0, at) + ": given " + what.substr(at + said.size()) +
           " times; it takes one value, so give it once";
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    // "Could not convert: --kv-blocks = 99999999999": a whole number its type cannot hold
    // (check_integer_options words the 64-bit ones; CLI11 refuses narrower ones first).
    const std::string said = "Could not convert: ";
    const size_t eq = what.find(" = ");
    if (what.compare(0, said.size(), said) != 0 || eq == std::string::npos) return "";
    const std::string opt = what.substr(said.size(), eq - said.size());
    const std::string value = what.substr(eq + 3);
    const bool digits =
        !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) return "";
    // Options of 64-bit types convert (check_integer_options words their overflow); a whole
    // number CLI11 cannot convert is past a 32-bit option's range.
    return opt + ": " + value + " is out of range; give at most 2147483647";
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    const std::vector<std::string> extra = app.remaining(true);
    if (extra.empty()) return "";
    std::string list;
    for (const std::string& arg : extra) list += (list.empty() ? "" : " ") + arg;
    std::string required = what;  // "--model is required", "A subcommand is required"
    if (required.compare(0, 2, "A ") == 0) required[0] = 'a';
    return "not expected: " + list + " (a misspelt option? see --help); and " + required;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  restart_for_blas_core(argv);
  cb::kernels::cpu::adopt_blas_restart_marker();
  // A file-size limit (ulimit -f) makes a write fail with EFBIG, reported with the file's name
  // and its temporary removed, instead of killing the process mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"cachebench: KV-cache reuse for LLM serving (CachedAttention), measured",
               "cachebench"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", cb::app::version_string());
  cb::app::register_inspect(app);
  cb::app::register_tokenize(app);
  cb::app::register_store(app);
  cb::app::register_forward(app);
  cb::app::register_generate(app);
  cb::app::register_perplexity(app);
  cb::app::register_mmlu(app);
  cb::app::register_piqa(app);
  cb::app::register_bench(app);
  cb::app::register_replay(app);
  cb::app::register_chat(app);
  cb::app::register_trace(app);
  cb::app::register_gate(app);
  cb::app::register_calibrate(app);
  cb::app::register_ablate(app);
  cb::app::require_decimal_integers(app);
  cb::app::take_tokenize_text_after_dashes(&argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::string clearer = clearer_parse_error(app, e);
    if (!clearer.empty()) {
      std::fprintf(stderr, "%s\n", clearer.c_str());
      return 2;
    }
    // --help and --version exit 0; a usage error exits 2 (CLI11's own codes, 105 and up,
    // would read as crashes), as gate's "cannot compare" does.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    return cb::app::run_selected(app);
  } catch (const cb::Error& e) {  // not from an action (run_selected reports those)
    return cb::app::report_error(e, 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cachebench: internal error: %s\n", e.what());
    return 2;
  }
}
