#include <cstdio>
#include <utility>
#include <vector>

#include "apps/cachebench/subcommands.h"
#include "cachebench_build_info.h"
#include "cachebench_version.h"
#include "lib/device/gpu_info.h"

namespace cb::app {
namespace {

std::vector<std::pair<CLI::App*, std::function<int()>>>& actions() {
  static std::vector<std::pair<CLI::App*, std::function<int()>>> a;
  return a;
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

void set_action(CLI::App* sub, std::function<int()> run) {
  actions().emplace_back(sub, std::move(run));
}

int run_selected(CLI::App& app) {
  // The deepest parsed subcommand with an action (e.g. "bench cpu").
  for (auto it = actions().rbegin(); it != actions().rend(); ++it) {
    if (it->first->parsed()) return it->second();
  }
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace cb::app
