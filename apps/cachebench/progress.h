#pragma once
/// Progress on stderr for long subcommands: "\r" updates on a terminal, otherwise a line
/// every ~10%; each shows done/total, the rate and the ETA.

#include <chrono>
#include <cstdint>
#include <string>

namespace cb::app {

class Progress {
 public:
  /// `label` starts the line ("mmlu", "replay ca"); `unit` names what is counted ("turns").
  Progress(std::string label, std::string unit);
  /// Reports `done` of `total`.
  void operator()(int64_t done, int64_t total);

 private:
  std::string label_, unit_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_;
  int64_t last_decile_ = -1, last_done_ = -1;
};

}  // namespace cb::app
