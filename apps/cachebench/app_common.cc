#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "apps/cachebench/progress.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "cachebench_build_info.h"
#include "cachebench_version.h"
#include "lib/core/error.h"
#include "lib/device/gpu_info.h"

namespace cb::app {
namespace {

struct Action {
  CLI::App* sub;
  std::function<int()> run;
  int error_exit;  // the exit code of a cb::Error the action throws
};

std::vector<Action>& actions() {
  static std::vector<Action> a;
  return a;
}

bool is_output(CLI::Option* opt) {
  try {
    opt->get_validator(kOutputFile);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

// An absolute, normalized form of a path that may not exist yet (its parent resolved).
std::string normalized(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec).lexically_normal();
  const std::filesystem::path p = std::filesystem::weakly_canonical(abs, ec);
  return ec ? abs.string() : p.string();
}

// The options given to `cmd` (the CLI defines no option groups).
std::vector<CLI::Option*> given_options(CLI::App& cmd) {
  return cmd.get_options([](CLI::Option* o) { return o->count() > 0; });
}

// Throws cb::Error naming the option when an unsigned option of `cmd` was given a negative
// number (which CLI11 2.1 would wrap to a huge one).
void check_unsigned_options(CLI::App& cmd) {
  // CLI11 2.1 reads "-1" into an unsigned option as 2^64 - 1 (strtoull).
  for (CLI::Option* opt : given_options(cmd)) {
    if (opt->get_type_name().rfind("UINT", 0) != 0) continue;
    for (const std::string& v : opt->results()) {
      const size_t at = v.find_first_not_of(" \t");
      if (at != std::string::npos && v[at] == '-') {
        throw make_error(opt->get_name(), "must be a non-negative integer, got " + v);
      }
    }
  }
}

// Throws cb::Error when an output option of `cmd` (one checked by output_file()) names the
// same file as another of its options (an input: --model, a trace, a corpus) or as another
// output, which the run would overwrite or lose.
void check_output_paths(CLI::App& cmd) {
  struct Named {
    std::string label, path;
  };
  std::vector<Named> outputs, others;
  for (CLI::Option* opt : given_options(cmd)) {
    for (const std::string& v : opt->results()) {
      (is_output(opt) ? outputs : others).push_back({opt->get_name(), v});
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Named& out = outputs[i];
    struct stat so {};
    const bool exists = ::stat(out.path.c_str(), &so) == 0;
    for (const Named& in : others) {
      struct stat si {};
      if (exists && ::stat(in.path.c_str(), &si) == 0 && S_ISREG(si.st_mode) &&
          si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        throw make_error(out.label + " " + out.path,
                         "is the file given to " + in.label + " (" + in.path +
                             "); the run would overwrite its input",
                         "write the result to another file");
      }
    }
    for (size_t k = 0; k < i; ++k) {
      if (normalized(outputs[k].path) == normalized(out.path)) {
        throw make_error(
            out.label + " " + out.path,
            "is also given to " + outputs[k].label + "; one of the two results would be lost",
            "give each output its own file");
      }
    }
  }
}

}  // namespace

std::string version_string() {
  std::string s = std::string("cachebench ") + CB_VERSION + "\n  git revision: " + CB_GIT_REVISION +
                  "\n  build type:   " + CB_BUILD_TYPE + "\n  compiler:     " + CB_CXX_COMPILER;
  if (std::string(CB_SANITIZE).size() > 0) s += "\n  sanitizers:   " + std::string(CB_SANITIZE);
  s += "\n  BLAS:         " + std::string(CB_BLAS_NAME);
  if (device::cuda_compiled()) {
    std::string why;
    const auto gpus = device::list_gpus(&why);
    s += "\n  CUDA:         on (runtime " + device::cuda_runtime_version() + ")";
    if (gpus.empty()) {
      s += "\n  GPUs:         none (" + why + ")";
    } else {
      for (const auto& g : gpus) {
        s += "\n  GPU " + std::to_string(g.index) + ":        " + g.name + " (sm_" +
             std::to_string(g.cc_major) + std::to_string(g.cc_minor) + ", " +
             std::to_string(g.total_bytes >> 20) + " MiB)";
      }
    }
  } else {
    s += "\n  CUDA:         off";
  }
  return s;
}

void set_action(CLI::App* sub, std::function<int()> run, int error_exit) {
  actions().push_back({sub, std::move(run), error_exit});
}

int report_error(const Error& e, int exit_code) {
  std::fprintf(stderr, "cachebench: error: %s\n", e.what());
  return interrupt_signal() != 0 ? 128 + interrupt_signal() : exit_code;
}

int run_selected(CLI::App& app) {
  // The deepest parsed subcommand with an action (e.g. "bench cpu").
  for (auto it = actions().rbegin(); it != actions().rend(); ++it) {
    if (it->sub->parsed()) {
      try {
        check_unsigned_options(*it->sub);
        check_output_paths(*it->sub);
      } catch (const Error& e) {
        return report_error(e, 1);  // a refused option, whatever the command
      }
      try {
        return it->run();
      } catch (const Error& e) {
        return report_error(e, it->error_exit);
      }
    }
  }
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace cb::app
