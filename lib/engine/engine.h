#pragma once
/// The serving engine: one loop of steps, schedule -> reserve -> preload -> forward ->
/// save -> metrics, over a real model on the CPU or the CUDA backend. CachedAttention (CA) keeps
/// each conversation's pre-RoPE KV in the AttentionStore between turns, preloads it layer by layer
/// (a read buffer of `read_buffer_layers` layers may fill before the job starts; during the job,
/// layer i+1 loads while layer i computes) and saves it asynchronously through a write buffer.
/// Baselines: RE keeps nothing across turns and recomputes the history; OF (overflow) stores like
/// CA but invalidates the entry when the context overflows and recomputes the truncated history.
///
/// Time is the wall clock, except that idle gaps between arrivals are skipped rather than
/// slept: the engine first waits, for at most the gap, until the background work (saves,
/// write-backs, prefetches) is done, as it would be on a server idle that long, then jumps
/// the clock to the arrival (SimEngine gives its links the gap alike), the store's clock with
/// it (AttentionStore::skip_time), so TTLs and access ages span the gap as in sim mode.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/engine/kv_buffer.h"
#include "lib/kv/kv_cache.h"
#include "lib/metrics/turn_record.h"
#include "lib/model/model.h"
#include "lib/model/sampler.h"
#include "lib/sched/scheduler.h"
#include "lib/store/attention_store.h"

namespace cb::engine {

/// How KV is kept across turns.
enum class Mode { CA, RE, OF };
/// "ca", "re", "of".
const char* mode_name(Mode m);
/// Parses "ca" / "re" / "of"; throws cb::Error naming `--mode` otherwise.
Mode parse_mode(const std::string& s);
/// Parses --kv-entries: "native" (true) or "f32" (false); throws cb::Error naming the option.
bool parse_kv_entries(const std::string& s);

/// Tokens the oldest part of a `hist`-token history loses when a turn needs `over` tokens more
/// than the window: at least `over` and a `ratio` share of the history, rounded up to a multiple
/// of `align` (> 1) when that leaves some history, never more than `hist`.
int64_t overflow_drop(int64_t hist, int64_t over, double ratio, int64_t align);

/// A turn fitted to a `ctx`-token window: when its message and answer do not fit, the answer is
/// capped at half the window and the message keeps its last tokens that fit beside it.
struct TurnFit {
  int64_t new_tokens = 0;
  int64_t output_target = 1;
  bool clipped = false;
};
TurnFit fit_turn(int64_t new_tokens, int64_t output_tokens, int64_t ctx);

/// Whether a turn's overflow (`drop` of `hist` history tokens) is applied when the turn
/// arrives, once its session's last save has committed, instead of when the turn is prepared:
/// when the store's part is an edit in place (OF's erase, a CA drop of the whole history, or of
/// whole chunks: a multiple of `align` > 1), so that prefetches read only what is kept. Every
/// mode cuts the session's context at the same point.
bool cuts_on_arrival(Mode mode, int64_t drop, int64_t hist, int64_t align);

/// The waiting requests that arrived since the one `*seen` names (-1: none yet), oldest first,
/// and `*seen` moved to the newest: request ids grow in arrival order, so they are the queue's
/// back (the engines' cut_on_arrival).
std::vector<sched::Request> arrivals_since(const sched::Scheduler& sched, int64_t* seen);

/// Engine knobs (CLI defaults live here).
struct EngineConfig {
  Mode mode = Mode::CA;
  int64_t ctx = 0;              ///< context window in tokens (0: the model's)
  double truncate_ratio = 0.5;  ///< share of the history dropped on overflow
  /// The drop on overflow is rounded up to a multiple of this many tokens when the history is
  /// longer than the rounded drop (overflow_drop): the replay drivers set the store's tokens per
  /// chunk, so that truncating a stored entry is a metadata edit that keeps its SSD copy. The
  /// same in every mode, so RE and CA see the same contexts. <= 1: exact; < 0 (auto) is
  /// resolved by the replay drivers (eval::truncate_align) and exact elsewhere.
  int64_t truncate_align = -1;
  int read_buffer_layers = 0;  ///< layers preloaded before a job starts; -1: auto (paper's rule)
  bool preload = true;         ///< false: load the whole entry before computing (no overlap)
  bool async_save = true;      ///< false: a turn ends only when its entry is committed
  bool append_saves = true;    ///< false: every turn re-saves its whole history (no appends)
  /// Store entries in the model's native_kv_type() (fp16/bf16 on the GPU: half the bytes, no
  /// conversion) instead of fp32. The same on the CPU backend, whose KV is fp32.
  bool native_kv_entries = false;
  int preload_jobs = 4;  ///< waiting requests prepared (and preloading) ahead of admission
  /// Write buffers made before run()'s clock starts, for this many jobs at once (a K and a V
  /// buffer each, write_buffer_bytes() apiece), and kept for reuse, instead of being made as
  /// turns need them (0). A page-locked allocation of a 7B model's buffers costs its pinning and
  /// zeroing, about 1.5 GB/s: on an H100 the ablation studies' second turns, which need larger
  /// buffers than their first, waited 5-15 s for them (docs/perf.md). CA and OF only.
  int write_buffer_jobs = 0;
  int block_size = 16;  ///< paged KV block size
  int num_blocks = 0;   ///< KV pool (0: enough for max_batch full windows)
  sched::SchedConfig sched;
  /// The first N turns in trace order (Scheduler::mark_warmup: the same turns in every mode)
  /// warm the store, unmeasured.
  int64_t warmup_turns = 0;
};

/// Bytes of one token's K (or V) of one layer in the entries an Engine over `model` with `cfg`
/// stores (fp32, or the model's native_kv_type with cfg.native_kv_entries).
size_t entry_row_bytes(const model::ForwardModel& model, const EngineConfig& cfg);

/// Tokens a turn of `new_tokens` (the pending output token included) and `output_tokens` drops
/// from a `hist`-token history under `cfg` (fit_turn, then overflow_drop): 0 when it fits.
int64_t turn_drop(int64_t hist, int64_t new_tokens, int64_t output_tokens, int64_t ctx,
                  const EngineConfig& cfg);

/// The options both engines (Engine, sim::SimEngine) check the same way; each throws cb::Error
/// naming the option.
/// The window `cfg` runs with for a model of `max_context` tokens (cfg.ctx, 0: the model's),
/// checking --ctx (2 up to the model's window) and --truncate-ratio.
int64_t checked_window(const EngineConfig& cfg, int64_t max_context);
/// Blocks of the paged KV pool for a `ctx`-token window: --kv-blocks, or --max-batch whole
/// windows by default; checks --block-size and that one window fits.
int64_t pool_blocks(const EngineConfig& cfg, int64_t ctx);
/// Refuses --warmup-turns that cover every one of `turns` (turns per session).
void check_warmup(const EngineConfig& cfg, const std::vector<int>& turns);

/// One turn to serve: the user's message as token ids and how many tokens to decode.
struct TurnInput {
  std::vector<int32_t> ids;  ///< the message (>= 1 token)
  int64_t output_tokens = 1;
};

/// One conversation; `id` is the store's session id.
struct SessionInput {
  uint64_t id = 0;
  std::vector<TurnInput> turns;
};

/// The write buffer (KvBuffer::size_class) that holds the K (or V) of any turn of `sessions`:
/// `layers` x the longest conversation's tokens (every message and output, at most `ctx`) x
/// `row_bytes` (entry_row_bytes).
size_t write_buffer_bytes(const std::vector<SessionInput>& sessions, int layers, size_t row_bytes,
                          int64_t ctx);

/// What a run produced.
struct RunResult {
  std::vector<metrics::TurnRecord> records;  ///< one per turn, in completion order
  metrics::RunTotals totals;
  int64_t clipped_turns = 0;       ///< messages longer than the window, cut to fit
  int64_t load_failures = 0;       ///< loads that failed verification (recomputed instead)
  int64_t save_failures = 0;       ///< saves the store refused or failed
  int64_t steps = 0;               ///< forward calls
  int64_t buffer_allocations = 0;  ///< K and V write buffers allocated (not spares reused)
};

/// Called after every step: turns done, turns in all.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;
/// Called for every output token of a turn (chat): session, token id.
using TokenFn = std::function<void(uint64_t session, int32_t token)>;

class Engine {
 public:
  /// `store` may be null in RE mode (it is unused then) and must outlive the engine.
  /// `model` runs on either backend (CPU Model or lib/cuda_model CudaModel).
  Engine(const model::ForwardModel& model, store::AttentionStore* store, EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return cfg_; }
  /// Serves every turn of `sessions`; sessions keep their context across calls (chat).
  RunResult run(const std::vector<SessionInput>& sessions, const ProgressFn& progress = {},
                const TokenFn& on_token = {});
  /// Stops a turn early when it produces `token` (chat); -1 (default): decode the full length.
  void set_stop_token(int32_t token) { stop_token_ = token; }
  /// Picks output tokens among the first `n` ids only (chat: the tokenizer's vocabulary, when
  /// the model's embedding is padded past it); 0 (default): all of the model's.
  void set_vocab_limit(int n) { vocab_limit_ = n; }
  /// Picks output tokens with `c` (chat's --temperature, --top-k, ...; the repetition penalty
  /// sees the turn's whole context) instead of the argmax, the default.
  void set_sampling(const model::SamplerConfig& c) {
    sampler_ = std::make_unique<model::Sampler>(c);
  }
  /// Forgets a session's context (and, in CA/OF mode, its stored entry).
  void reset_session(uint64_t session);
  /// Tokens of context a session currently has (0 when unknown).
  int64_t context_tokens(uint64_t session) const;
  /// Blocks until every asynchronous save has committed.
  void drain_saves();

 private:
  struct Job;
  struct Saving;
  struct Session {
    std::vector<int32_t> context;  ///< tokens whose KV the store entry covers (positions 0..)
    int32_t pending = -1;          ///< the last output token, not yet fed
    int64_t cut_tokens = 0;        ///< tokens its waiting turn's overflow dropped when it arrived
    double cut_stall = 0;          ///< and the store call's wait then
  };

  double now() const;
  /// Waits until time `t` (an arrival, nothing to run meanwhile): the background work runs
  /// for at most that long, then the rest of the gap is skipped.
  void idle_until(double t);
  std::unique_ptr<Job> prepare(const sched::Request& r, const TurnInput& in, RunResult* res);
  /// Reserves the job's KV blocks and starts (or, without preloading, performs) its load;
  /// false when the pool is full. `stall` receives the time spent loading synchronously.
  bool admit(Job& job, double* stall);
  void restore_layer(Job& job, int layer);
  /// Writes layer `layer` of the job's loaded prefix into its KV blocks (from the entry type).
  void restore(Job& job, int layer);
  /// Starts the loads of the jobs just admitted, layer-major across them.
  void start_batch_loads(const std::vector<Job*>& jobs);
  /// Starts the read buffers of the prepared jobs still waiting (after the step's admissions,
  /// so behind the admitted jobs' loads), layer-major across them.
  void start_read_buffers();
  void run_step(const std::vector<sched::StepItem>& items, RunResult* res, const TokenFn& on_token);
  void finish(Job& job, RunResult* res);
  /// The token job `j` emits from its logits `row`: the argmax, or the sampler's pick.
  int32_t next_token(const Job& j, const float* row, int vocab);
  void recompute_instead(Job& job, RunResult* res);
  void wait_save(uint64_t session, double* stall);
  void poll_saves();
  /// Drops the oldest `drop` tokens of a session's context and handles its stored entry as
  /// the mode does (CA truncates, OF invalidates), adding the waits to `stall`.
  void cut(uint64_t session, int64_t drop, double* stall);
  /// The overflows of the turns that arrived since the last call (the waiting queue's new
  /// requests), made now where cuts_on_arrival says so, or once the session's save has
  /// committed; prepare() makes the others, and one still due.
  void cut_on_arrival(const std::vector<SessionInput>& sessions);
  int read_buffer_for(const Job& job) const;
  /// A write buffer of n bytes: the smallest spare one large enough (its pages already
  /// mapped; contents left over), else a new one of KvBuffer::size_class(n) bytes. A 7B
  /// model's buffers are hundreds of MB per turn, and fresh ones cost their page faults: on an
  /// H100 host, 57 s of system time in a 74-turn replay before buffers were reused.
  KvBuffer take_buffer(size_t n);
  /// Keeps `b` for take_buffer (at most spare_limit_, the largest).
  void recycle(KvBuffer&& b);
  /// cfg_.write_buffer_jobs' buffers for `sessions`, made before the clock starts.
  void make_spares(const std::vector<SessionInput>& sessions);
  /// Layer `layer`'s rows in a job's write buffer of `cap` tokens per layer.
  uint8_t* layer_rows(KvBuffer& b, int layer, int64_t cap) const {
    return b.data() + static_cast<size_t>(layer * cap) * row_bytes_;
  }
  /// Recycles the buffers of a save that has committed or failed.
  void retire(Saving& s);

  const model::ForwardModel& model_;
  store::AttentionStore* store_;
  EngineConfig cfg_;
  int64_t ctx_ = 0;
  int kv_dim_ = 0;
  DType entry_type_ = DType::F32;  ///< of the stored entries' elements
  size_t row_bytes_ = 0;           ///< one token's K (or V) of one layer in an entry
  bool pinned_buffers_ = false;    ///< page-locked write buffers (a device backend)
  store::ModelFingerprint fp_;
  std::unique_ptr<kv::KvCache> cache_;
  std::map<uint64_t, Session> sessions_;
  std::map<int64_t, std::unique_ptr<Job>> jobs_;  // by request id: prepared and running
  std::vector<std::unique_ptr<Saving>> saving_;
  int64_t seen_ = -1;  ///< the last waiting request cut_on_arrival looked at (this run)
  std::map<uint64_t, int64_t> cuts_due_;  ///< session -> tokens, cut once its save commits
  static constexpr size_t kSpareBuffers = 8;
  size_t spare_limit_ = kSpareBuffers;  // spares kept: more when made ahead (make_spares)
  std::vector<KvBuffer> spare_;         // write buffers of finished saves, for reuse
  sched::Scheduler* sched_ = nullptr;   // during run()
  double t0_ = 0, skipped_ = 0;
  /// Asynchronous saves whose commit failed (an I/O or checksum error), since run() began.
  int64_t async_save_failures_ = 0;
  int64_t buffer_allocations_ = 0;  ///< write buffers allocated since run() began
  int32_t stop_token_ = -1;
  std::unique_ptr<model::Sampler> sampler_;  ///< null: the argmax
  int vocab_limit_ = 0;                      ///< set_vocab_limit
  // measured rates for the automatic read buffer
  double load_s_per_token_layer_ = 0, prefill_s_per_token_layer_ = 0;
  /// Seconds per token fed by steps with prefill (0: none yet), read by the store's recompute
  /// estimate (StoreConfig::drop_slow_demotions); shared, as the store may outlive the engine.
  std::shared_ptr<std::atomic<double>> prefill_s_per_token_ =
      std::make_shared<std::atomic<double>>(0);
};

}  // namespace cb::engine
