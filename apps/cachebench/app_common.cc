#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <utility>
#include <vector>

#include "apps/cachebench/progress.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "cachebench_build_info.h"
#include "kernels/cpu/blas_core.h"
#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/format.h"
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

bool has_validator(CLI::Option* opt, const char* name) {
  try {
    opt->get_validator(name);
    return true;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

bool is_output(CLI::Option* opt) {
  return has_validator(opt, kOutputFile);
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

// "" for a whole number written in decimal, else what is wrong with it. CLI11 2.1 reads whole
// numbers in base 0, so "0256" would be octal 174 and "0x10" hex, while the range checks
// (validators.h) read the text as decimal.
std::string decimal_integer_problem(std::string& s) {
  size_t i = s.find_first_not_of(" \t");
  if (i == std::string::npos) return "'" + s + "' is not a whole number";
  if (s[i] == '+' || s[i] == '-') ++i;
  const size_t digits = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == digits || s.find_first_not_of(" \t", i) != std::string::npos) {
    return "'" + s + "' is not a whole number";
  }
  if (s[digits] == '0' && i - digits > 1) {
    return "'" + s +
           "' starts with 0, which would read as octal; write it without the leading zeros";
  }
  return "";
}

// Throws cb::Error naming the option when an integer option of `cmd` was given a number its
// type cannot hold (which CLI11 2.1 clamps to the type's limit without a word), or an unsigned
// one a negative number (which it wraps to a huge one).
void check_integer_options(CLI::App& cmd) {
  for (CLI::Option* opt : given_options(cmd)) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (!is_unsigned && type.rfind("INT", 0) != 0) continue;
    for (const std::string& v : opt->results()) {
      const size_t at = v.find_first_not_of(" \t");
      if (is_unsigned && at != std::string::npos && v[at] == '-') {
        throw make_error(opt->get_name(), "must be a non-negative integer, got " + v);
      }
      errno = 0;  // the parse CLI11 makes (base 0), to see whether it overflowed
      if (is_unsigned) {
        (void)std::strtoull(v.c_str(), nullptr, 0);
      } else {
        (void)std::strtoll(v.c_str(), nullptr, 0);
      }
      if (errno == ERANGE) {
        const bool negative = at != std::string::npos && v[at] == '-';
        throw make_error(opt->get_name(), v + " is out of range",
                         negative      ? "give at least -9223372036854775808"
                         : is_unsigned ? "give at most 18446744073709551615"
                                       : "give at most 9223372036854775807");
      }
    }
  }
}

// An option's value (path), named in errors as "label path" and, as the other side of a clash,
// as `ref` (the label when empty).
struct Named {
  std::string label, path, ref;
  bool input_dir = false;  ///< a directory the command reads files from (existing_dir())
  const std::string& as_other() const { return ref.empty() ? label : ref; }
};

// set_output_names' maps, by command and option.
struct OutputNaming {
  const CLI::App* cmd;
  std::string option;
  OutputNames names;
};
std::vector<OutputNaming>& output_namings() {
  static std::vector<OutputNaming> v;
  return v;
}

// The files an output option's value `value` stands for (itself, unless set_output_names says).
std::vector<std::string> output_files(const CLI::App& cmd, const CLI::Option* opt,
                                      const std::string& value) {
  for (const OutputNaming& n : output_namings()) {
    if (n.cmd == &cmd && opt->check_name(n.option)) return n.names(value);
  }
  return {value};
}

// The values of `cmd`'s given options: the files those checked by output_file() write, or the
// values of all the others.
std::vector<Named> given_values(CLI::App& cmd, bool outputs) {
  std::vector<Named> v;
  for (CLI::Option* opt : given_options(cmd)) {
    if (is_output(opt) != outputs) continue;
    for (const std::string& r : opt->results()) {
      if (!outputs) {
        // --model's value may be a checkpoint directory, or a weights file of one: the
        // files of that directory are the run's inputs too (config.json, shards, tokenizer).
        v.push_back(
            {opt->get_name(), r, "", has_validator(opt, kInputDir) || opt->check_name("--model")});
        continue;
      }
      for (const std::string& f : output_files(cmd, opt, r)) {
        if (f == r) {
          v.push_back({opt->get_name(), f, ""});
        } else {  // a file the value stands for: "--csv F writes F.ca.csv"
          const std::string given = opt->get_name() + " " + r;
          v.push_back({given + " writes", f, given + " (which writes it)"});
        }
      }
    }
  }
  return v;
}

// Throws cb::Error when the existing file `out` is one of `inputs` (the same inode), or when
// `out`, existing or not, lies in a directory the command reads files from (mmlu's --data DIR
// reads DIR/test/*.csv): results are written outside their data.
void check_not_an_input(const Named& out, const std::vector<Named>& inputs) {
  namespace fs = std::filesystem;
  // The output as named (its directory resolved, its own name kept: a link in a checkpoint, as
  // a Hugging Face cache's snapshot holds to its blobs, is in it) and as the file it resolves to.
  std::vector<fs::path> out_forms;
  std::error_code ec;
  const fs::path named(out.path);
  const fs::path out_dir =
      fs::weakly_canonical(named.parent_path().empty() ? fs::path(".") : named.parent_path(), ec);
  if (!ec && named.has_filename()) out_forms.push_back(out_dir / named.filename());
  const fs::path resolved = fs::weakly_canonical(out.path, ec);
  if (!ec) out_forms.push_back(resolved);
  struct stat so {};
  const bool exists = ::stat(out.path.c_str(), &so) == 0;
  for (const Named& in : inputs) {
    struct stat si {};
    if (::stat(in.path.c_str(), &si) != 0) continue;
    if (exists && S_ISREG(si.st_mode) && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
      throw make_error(out.label + " " + out.path,
                       "is the file given to " + in.label + " (" + in.path +
                           "); the run would overwrite its input",
                       "write the result to another file");
    }
    if (!in.input_dir) continue;
    // A checkpoint's weights file: the loader reads the files beside it (its config.json), in
    // the directory that holds the name given (a link's target may lie elsewhere).
    const fs::path in_path(in.path);
    const bool weights_file = S_ISREG(si.st_mode) && in_path.extension() == ".safetensors";
    if (!S_ISDIR(si.st_mode) && !weights_file) continue;
    std::error_code dec;
    const fs::path read_dir = fs::canonical(!weights_file                   ? in_path
                                            : in_path.parent_path().empty() ? fs::path(".")
                                                                            : in_path.parent_path(),
                                            dec);
    if (dec) continue;
    const auto inside = [&](const fs::path& p) {
      const auto rel = p.lexically_relative(read_dir);
      return !rel.empty() && *rel.begin() != "..";
    };
    if (std::any_of(out_forms.begin(), out_forms.end(), inside)) {
      const std::string where = weights_file ? read_dir.string() : in.path;
      throw make_error(
          out.label + " " + out.path,
          "is in the directory " +
              (weights_file ? "of the checkpoint file given to " + in.label + " (" + where + ")"
                            : "given to " + in.label + " (" + where + ")") +
              ", whose files the run reads",
          "write the result outside " + where);
    }
  }
}

// Throws cb::Error when an output option of `cmd` (one checked by output_file()) names the
// same file as another of its options (an input: --model, a trace, a corpus) or as another
// output, which the run would overwrite or lose.
void check_output_paths(CLI::App& cmd) {
  const std::vector<Named> outputs = given_values(cmd, true), inputs = given_values(cmd, false);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Named& out = outputs[i];
    if (!out.ref.empty()) check_derived_output(out.label, out.path);  // "--csv F writes F.ca.csv"
    check_not_an_input(out, inputs);
    for (size_t k = 0; k < i; ++k) {
      if (normalized(outputs[k].path) == normalized(out.path)) {
        throw make_error(
            out.label + " " + out.path,
            "is also given to " + outputs[k].as_other() + "; one of the two results would be lost",
            "give each output its own file");
      }
    }
  }
}

}  // namespace

void require_decimal_integers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) {
      opt->check(CLI::Validator(decimal_integer_problem, ""));
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    require_decimal_integers(*sub);
  }
}

std::string version_string() {
  std::string s = std::string("cachebench ") + CB_VERSION + "\n  git revision: " + git_revision() +
                  "\n  build type:   " + CB_BUILD_TYPE + "\n  compiler:     " + CB_CXX_COMPILER;
  if (std::string(CB_SANITIZE).size() > 0) s += "\n  sanitizers:   " + std::string(CB_SANITIZE);
  s += "\n  BLAS:         " + kernels::cpu::blas_summary(kernels::cpu::blas_info());
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

void set_output_names(CLI::App* cmd, const std::string& option, OutputNames names) {
  output_namings().push_back({cmd, option, std::move(names)});
}

void check_derived_output(const std::string& label, const std::string& path) {
  std::string p = path;
  const std::string why = detail::output_file_problem(p);
  if (!why.empty()) throw make_error(label + " " + path, why);
}

void check_derived_outputs(CLI::App& cmd, const std::string& label,
                           const std::vector<std::string>& outputs) {
  const std::vector<Named> inputs = given_values(cmd, false);
  for (const std::string& path : outputs) check_not_an_input({label, path, ""}, inputs);
}

// When an output of `cmd` is the standard output (`--out /dev/stdout`), the command's tables
// and notes go to stderr, so that stdout holds the result alone (a JSON document jq reads).
void results_alone_on_stdout(CLI::App& cmd) {
  for (const Named& out : given_values(cmd, true)) {
    if (!names_stdout(out.path)) continue;
    std::fflush(stdout);
    const int keep = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    if (keep < 0 || ::dup2(2, 1) < 0) return;  // as before: both on stdout
    set_result_stdout(keep);
    return;
  }
}

int report_error(const Error& e, int exit_code) {
  // An interrupt comes in the middle of a progress line ("\r ... running PPL"): end it.
  if (progress_line_open()) std::fputc('\n', stderr);
  // A message may quote a file's bytes (a damaged name): one printable UTF-8 line.
  std::fprintf(stderr, "cachebench: error: %s\n", printable(e.what()).c_str());
  return interrupt_signal() != 0 ? 128 + interrupt_signal() : exit_code;
}

int run_selected(CLI::App& app) {
  // The deepest parsed subcommand with an action (e.g. "bench cpu").
  for (auto it = actions().rbegin(); it != actions().rend(); ++it) {
    if (it->sub->parsed()) {
      try {
        check_integer_options(*it->sub);
        check_output_paths(*it->sub);
      } catch (const Error& e) {
        return report_error(e, 2);  // a refused option: a usage error, whatever the command
      }
      results_alone_on_stdout(*it->sub);
      try {
        return it->run();
      } catch (const UsageError& e) {
        return report_error(e, 2);
      } catch (const Error& e) {
        // An error whose subject is an option ("--ctx: exceeds the model's window") is the
        // command line's, found once it was read: exit 2, as CLI11's own refusals do.
        if (std::strncmp(e.what(), "--", 2) == 0) return report_error(e, 2);
        return report_error(e, it->error_exit);
      } catch (const std::bad_alloc&) {
        return report_error(make_error(it->sub->get_name(), "ran out of memory",
                                       "free memory or raise the process's limit (ulimit -v), or "
                                       "use a smaller model, --cpu-weights bf16, fewer "
                                       "sessions or a smaller --dram"),
                            1);
      }
    }
  }
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace cb::app
