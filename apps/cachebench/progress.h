#pragma once
/// Progress on stderr for long subcommands: "\r" updates on a terminal, otherwise a line
/// every ~10%; each shows done/total, the rate and the ETA.

#include <chrono>
#include <cstdint>
#include <string>

namespace cb::app {

/// SIGINT, SIGTERM and SIGHUP (a closed terminal) stop a long subcommand cleanly, unless the
/// process was started ignoring them (nohup): the first is noted, and the next
/// progress report (or check_interrupted) throws cb::Error, so the run's scratch store
/// directories are removed as the stack unwinds (a replay's --keep-store store is kept, and
/// its path printed); a second signal ends the process at once.
/// Long subcommands install this (those making scratch files, and the evaluations, whose
/// progress line then ends before the message); others keep the default handlers. `note`
/// completes the message: what happened to the run's scratch files, if it has any.
void install_interrupt_handlers(const char* note = "");
/// Throws cb::Error naming the signal if one arrived since install_interrupt_handlers.
void check_interrupted();
/// The signal that interrupted the process (0: none).
int interrupt_signal();
/// After a command printed its own "\r ..." progress line: ends it with a newline when `last`,
/// and otherwise notes it open, so that an error message does not continue it.
void progress_line_printed(bool last);
/// Whether stderr's last line is an unfinished progress line (Progress's or a command's).
bool progress_line_open();

class Progress {
 public:
  /// `label` starts the line ("mmlu", "replay ca"); `unit` names what is counted ("turns").
  Progress(std::string label, std::string unit);
  /// Reports `done` of `total` (first checking for an interrupt).
  void operator()(int64_t done, int64_t total);

 private:
  std::string label_, unit_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  int64_t last_decile_ = -1, last_done_ = -1;
};

}  // namespace cb::app
