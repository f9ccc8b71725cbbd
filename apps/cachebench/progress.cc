// One progress reporter for every subcommand.
#include "apps/cachebench/progress.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "lib/core/error.h"

namespace cb::app {

namespace {
volatile std::sig_atomic_t g_signal = 0;
const char* g_note = "";
bool g_line_open = false;  // progress_line_open()

extern "C" void on_interrupt(int sig) {
  if (g_signal != 0) {  // the second one: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}
}  // namespace

void install_interrupt_handlers(const char* note) {
  g_note = note;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // the store's I/O goes on; the run stops at its next report
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    // A signal the process was started ignoring (nohup, a background job's SIGINT) stays ignored.
    struct sigaction old;
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

int interrupt_signal() {
  return g_signal;
}

void progress_line_printed(bool last) {
  if (last) std::fputc('\n', stderr);
  g_line_open = !last;
}

bool progress_line_open() {
  return g_line_open;
}

void check_interrupted() {
  if (g_signal == 0) return;
  throw make_error(
      g_signal == SIGINT    ? "SIGINT"
      : g_signal == SIGTERM ? "SIGTERM"
                            : "SIGHUP",
      "interrupted",
      std::string("the run stopped before its end") + (*g_note != '\0' ? "; " : "") + g_note);
}

Progress::Progress(std::string label, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      tty_(::isatty(STDERR_FILENO) != 0),
      t0_(std::chrono::steady_clock::now()) {}

void Progress::operator()(int64_t done, int64_t total) {
  check_interrupted();
  if (done == last_done_ && done != total) return;
  last_done_ = done;
  const int64_t decile = total > 0 ? done * 10 / total : 10;
  if (!tty_ && decile == last_decile_) return;
  last_decile_ = decile;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double rate = el > 0 ? done / el : 0;
  const double eta = rate > 0 ? (total - done) / rate : 0;
  std::fprintf(stderr, "%s  %s: %lld/%lld %s, %.1f %s/s, ETA %.0f s%s", tty_ ? "\r" : "",
               label_.c_str(), static_cast<long long>(done), static_cast<long long>(total),
               unit_.c_str(), rate, unit_.c_str(), eta, tty_ && done < total ? "" : "\n");
  g_line_open = tty_ && done < total;
}

}  // namespace cb::app
