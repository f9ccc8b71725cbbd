#pragma once
/// Registration of the CLI's subcommands; one file per subcommand.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "lib/core/error.h"

namespace cb::app {

/// "cachebench 0.1.0 (git ..., build ..., CUDA ..., BLAS ...)".
std::string version_string();

/// Records `run` as the action of subcommand `sub` (called by the register_* functions); a
/// cb::Error it throws is reported and exits with `error_exit`.
void set_action(CLI::App* sub, std::function<int()> run, int error_exit = 1);
/// Runs the action of the subcommand that was parsed; returns the exit code (the action's, or
/// its error_exit after reporting a cb::Error it threw; 2 for a refused option).
int run_selected(CLI::App& app);
/// Makes every whole-number option of `app` and its subcommands refuse what is not a decimal
/// integer ("12abc", "0x10", "0256": CLI11 would read the last two as hex and octal); called
/// once, after every subcommand is registered.
void require_decimal_integers(CLI::App& app);
/// Prints "cachebench: error: ..." and returns `exit_code`, or 128 + the signal when an
/// interrupt stopped the run.
int report_error(const Error& e, int exit_code);

/// The files an output option's value stands for, where they are not the value itself.
using OutputNames = std::function<std::vector<std::string>(const std::string& value)>;
/// Tells the checks made before every command (an output that is an input, or another output)
/// which files `option` of `cmd` writes for a value: replay's `--csv F` with `--compare` writes
/// F.MODE.csv for each mode, not F. Called once, when the command is registered; `names` runs
/// after parsing, so it may read the command's other options.
void set_output_names(CLI::App* cmd, const std::string& option, OutputNames names);

/// Throws cb::Error when one of `outputs`, files `cmd` will write under names it derives (ablate's
/// DIR/STUDY.json, named by its option `label`), is a file given to one of `cmd`'s options: the
/// run would overwrite its input. (Outputs named by an option are checked before every command.)
void check_derived_outputs(CLI::App& cmd, const std::string& label,
                           const std::vector<std::string>& outputs);

/// Throws cb::Error (exit 2 when `label` is an option) when `path`, a file a command writes under
/// a name it derives from an option's value (`label`: "--csv F writes", "--out"), could not be
/// written: what output_file() checks of an option's own value, before any work.
void check_derived_output(const std::string& label, const std::string& path);

void register_inspect(CLI::App& app);
void register_tokenize(CLI::App& app);
/// For `cachebench tokenize ... -- TEXT...`: keeps the words after the first "--" as TEXT and
/// cuts them and the "--" off argv (CLI11 hands a subcommand's "--" to the parent, which then
/// refuses what follows); call before parsing.
void take_tokenize_text_after_dashes(int* argc, char** argv);
void register_store(CLI::App& app);
void register_forward(CLI::App& app);
void register_generate(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_mmlu(CLI::App& app);
void register_piqa(CLI::App& app);
void register_bench(CLI::App& app);
void register_bench_store(CLI::App* bench);
/// `bench gpu` (CUDA builds only; a build without CUDA has no such subcommand).
void register_bench_gpu(CLI::App* bench);
void register_replay(CLI::App& app);
void register_chat(CLI::App& app);
void register_trace(CLI::App& app);
void register_gate(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_ablate(CLI::App& app);

}  // namespace cb::app
