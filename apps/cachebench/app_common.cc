#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "cachebench_build_info.h"
#include "cachebench_version.h"
#include "lib/core/error.h"
#include "lib/device/gpu_info.h"

namespace cb::app {
namespace {

std::vector<std::pair<CLI::App*, std::function<int()>>>& actions() {
  static std::vector<std::pair<CLI::App*, std::function<int()>>> a;
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

// The option's name as a user types it ("--out"), or the positional's name ("trace").
std::string option_label(const CLI::Option* opt) {
  const std::string& n = opt->get_single_name();
  return opt->get_lnames().empty() ? n : "--" + n;
}

// An absolute, normalized form of a path that may not exist yet (its parent resolved).
std::string normalized(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec).lexically_normal();
  const std::filesystem::path p = std::filesystem::weakly_canonical(abs, ec);
  return ec ? abs.string() : p.string();
}

// The options given to `cmd`, its option groups' (nameless sub-apps) included.
std::vector<CLI::Option*> given_options(CLI::App& cmd) {
  std::vector<CLI::Option*> given;
  std::vector<CLI::App*> apps{&cmd};
  for (size_t a = 0; a < apps.size(); ++a) {
    for (CLI::App* group :
         apps[a]->get_subcommands([](CLI::App* g) { return g->get_name().empty(); }))
      apps.push_back(group);
    for (CLI::Option* opt : apps[a]->get_options()) {
      if (opt->count() > 0) given.push_back(opt);
    }
  }
  return given;
}

}  // namespace

void check_unsigned_options(CLI::App& cmd) {
  // CLI11 2.1 reads "-1" into an unsigned option as 2^64 - 1 (strtoull).
  for (CLI::Option* opt : given_options(cmd)) {
    if (opt->get_type_name().rfind("UINT", 0) != 0) continue;
    for (const std::string& v : opt->results()) {
      const size_t at = v.find_first_not_of(" \t");
      if (at != std::string::npos && v[at] == '-') {
        throw make_error(option_label(opt), "must be a non-negative integer, got " + v);
      }
    }
  }
}

void check_output_paths(CLI::App& cmd) {
  struct Named {
    std::string label, path;
  };
  std::vector<Named> outputs, others;
  for (CLI::Option* opt : given_options(cmd)) {
    for (const std::string& v : opt->results()) {
      (is_output(opt) ? outputs : others).push_back({option_label(opt), v});
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

void set_action(CLI::App* sub, std::function<int()> run) {
  actions().emplace_back(sub, std::move(run));
}

int run_selected(CLI::App& app) {
  // The deepest parsed subcommand with an action (e.g. "bench cpu").
  for (auto it = actions().rbegin(); it != actions().rend(); ++it) {
    if (it->first->parsed()) {
      check_unsigned_options(*it->first);
      check_output_paths(*it->first);
      return it->second();
    }
  }
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace cb::app
