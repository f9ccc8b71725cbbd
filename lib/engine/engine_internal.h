#pragma once
/// Per-request state of the serving engine (shared by engine.cc and engine_run.cc).

#include <chrono>
#include <future>
#include <vector>

#include "lib/engine/engine.h"

namespace cb::engine {

/// Seconds on the steady clock.
inline double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Engine::Job {
  sched::Request req;
  uint64_t session = 0;
  metrics::TurnRecord rec;
  std::vector<int32_t> context;  // history after truncation
  std::vector<int32_t> new_ids;
  std::vector<int32_t> prefill_ids;
  std::vector<int32_t> outputs;
  int64_t output_target = 1;
  int64_t reused = 0;
  int64_t fed = 0;
  int64_t cap = 0;
  // write buffer [layer][cap][kv_dim] in the entry type; loaded prefix in [0, reused)
  KvBuffer k, v;
  store::LoadHandle load;
  int buffer_layers = 0;  // its read buffer: layers loaded while it waits (start_read_buffers)
  bool restore_pending = false;
  bool load_failed = false;
  double load_start = 0;
};

struct Engine::Saving {
  uint64_t session = 0;
  KvBuffer k, v;
  store::SaveHandle handle;
  std::shared_future<bool> commit;
};

}  // namespace cb::engine
