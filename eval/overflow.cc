#include "eval/overflow.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "eval/perplexity.h"
#include "lib/core/error.h"
#include "lib/core/format.h"

namespace cb::eval {

const char* overflow_method_name(OverflowMethod m) {
  switch (m) {
    case OverflowMethod::TT: return "TT";
    case OverflowMethod::CA: return "CA";
    case OverflowMethod::NKVT: return "NKVT";
  }
  return "?";
}

int64_t overflow_dropped_tokens(const OverflowOptions& opt) {
  return static_cast<int64_t>(std::floor(opt.truncate_ratio * static_cast<double>(opt.n_ctx)));
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

kv::KvConfig group_kv_config(const model::ForwardModel& m, const OverflowOptions& opt,
                             size_t members) {
  const int64_t N = opt.n_ctx;
  if (N < 4 || N > m.config().max_context) {
    throw make_error("--ctx", std::to_string(N) + " must be in 4.." +
                                  std::to_string(m.config().max_context) +
                                  " (the model's context window)");
  }
  if (opt.block_size < 1) throw make_error("block_size", "must be positive");
  if (members == 0) throw make_error("overflow study", "no method to run");
  // One full window per member, plus the kept part of the one member being truncated (members
  // truncate one at a time, each freeing its old sequence before the next starts).
  const int64_t per_window = (N + opt.block_size - 1) / opt.block_size;
  return m.kv_config(per_window * static_cast<int64_t>(members + 1) + 2, opt.block_size);
}

}  // namespace

OverflowGroup::OverflowGroup(const model::ForwardModel& m,
                             const std::vector<OverflowMethod>& methods, const OverflowOptions& opt)
    : m_(&m),
      opt_(opt),
      drop_(overflow_dropped_tokens(opt)),
      cache_(group_kv_config(m, opt, methods.size())) {
  if (!(opt.truncate_ratio > 0.0 && opt.truncate_ratio < 1.0) || drop_ < 1) {
    throw make_error("--truncate-ratio", "must be in (0, 1) and drop at least one token of the " +
                                             std::to_string(opt.n_ctx) +
                                             "-token window (at least 1/" +
                                             std::to_string(opt.n_ctx) + ")");
  }
  if (opt.sink < 0 || opt.sink + drop_ > opt.n_ctx) {
    throw make_error("--sink",
                     std::to_string(opt.sink) + " sink tokens plus the " + std::to_string(drop_) +
                         " tokens each overflow drops (--truncate-ratio) exceed the " +
                         std::to_string(opt.n_ctx) + "-token window",
                     "use at most --sink " + std::to_string(opt.n_ctx - drop_));
  }
  const auto layers = static_cast<size_t>(m.config().n_layers);
  for (OverflowMethod method : methods) {
    Member mb;
    mb.method = method;
    mb.seq = next_seq_++;
    if (method == OverflowMethod::CA) {
      mb.pre_k.resize(layers);
      mb.pre_v.resize(layers);
    }
    cache_.add_sequence(mb.seq);
    members_.push_back(std::move(mb));
  }
}

model::LayerHooks OverflowGroup::hooks() {
  model::LayerHooks h;
  bool any_ca = false;
  for (const Member& mb : members_) any_ca = any_ca || mb.method == OverflowMethod::CA;
  if (!any_ca) return h;
  const int64_t kvd = m_->config().kv_dim();
  // CA keeps every new token's pre-RoPE K and V, in slot order, to re-embed after truncation.
  h.on_new_kv = [this, kvd](int l, kv::SeqId seq, int64_t, int64_t n, const float* k,
                            const float* v) {
    for (Member& mb : members_) {
      if (mb.seq != seq || mb.method != OverflowMethod::CA) continue;
      auto& pk = mb.pre_k[static_cast<size_t>(l)];
      auto& pv = mb.pre_v[static_cast<size_t>(l)];
      pk.insert(pk.end(), k, k + n * kvd);
      pv.insert(pv.end(), v, v + n * kvd);
    }
  };
  return h;
}

std::vector<std::vector<float>> OverflowGroup::feed(const std::vector<int32_t>& tokens) {
  const int64_t V = m_->config().vocab_size, N = opt_.n_ctx;
  const model::LayerHooks h = hooks();
  std::vector<std::vector<float>> out(members_.size());
  for (auto& o : out) o.reserve(tokens.size() * static_cast<size_t>(V));
  size_t pos = 0;
  while (pos < tokens.size()) {
    if (window_length() == N) truncate();
    const size_t n =
        std::min<size_t>(static_cast<size_t>(N - window_length()), tokens.size() - pos);
    const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(pos);
    const std::vector<int32_t> chunk(first, first + static_cast<std::ptrdiff_t>(n));
    // One sequence per member; a pending TT sequence is empty and prefills the window first.
    std::vector<model::SeqInput> batch;
    std::vector<int64_t> skip;  // leading rows of each input that are not chunk tokens
    for (const Member& mb : members_) {
      model::SeqInput in{mb.seq, {}, true};
      if (mb.pending) in.tokens = window_;
      skip.push_back(static_cast<int64_t>(in.tokens.size()));
      in.tokens.insert(in.tokens.end(), chunk.begin(), chunk.end());
      if (!cache_.reserve(mb.seq, cache_.length(mb.seq) + static_cast<int64_t>(in.tokens.size()))) {
        throw Error("internal: overflow group KV pool too small");
      }
      batch.push_back(std::move(in));
    }
    const auto take = [&](size_t i, const std::vector<float>& logits, int64_t row0) {
      const auto b = logits.begin() + (row0 + skip[i]) * V;
      out[i].insert(out[i].end(), b, b + static_cast<int64_t>(n) * V);
      members_[i].pending = false;
      members_[i].processed += static_cast<int64_t>(n);
      ++members_[i].calls;
    };
    if (opt_.batched) {
      const auto t0 = Clock::now();
      const std::vector<float> logits = m_->forward(batch, cache_, h);
      ++forward_calls_;
      const double dt = seconds_since(t0);
      int64_t rows = 0;
      for (const auto& in : batch) rows += static_cast<int64_t>(in.tokens.size());
      int64_t row0 = 0;
      for (size_t i = 0; i < members_.size(); ++i) {
        const auto r = static_cast<int64_t>(batch[i].tokens.size());
        members_[i].seconds += dt * static_cast<double>(r) / static_cast<double>(rows);
        take(i, logits, row0);
        row0 += r;
      }
    } else {
      for (size_t i = 0; i < members_.size(); ++i) {
        const auto t0 = Clock::now();
        const std::vector<float> logits = m_->forward({batch[i]}, cache_, h);
        ++forward_calls_;
        members_[i].seconds += seconds_since(t0);
        take(i, logits, 0);
      }
    }
    window_.insert(window_.end(), chunk.begin(), chunk.end());
    pos += n;
  }
  return out;
}

void OverflowGroup::truncate() {
  ++overflows_;
  // Keep [0, sink) and [sink + drop, N), in slot order.
  std::vector<int32_t> kept(window_.begin(), window_.begin() + opt_.sink);
  kept.insert(kept.end(), window_.begin() + opt_.sink + drop_, window_.end());
  for (Member& mb : members_) {
    const auto t0 = Clock::now();
    truncate(mb, kept);
    mb.seconds += seconds_since(t0);
  }
  window_ = std::move(kept);
}

void OverflowGroup::truncate(Member& mb, const std::vector<int32_t>& kept) {
  const model::ModelConfig& cfg = m_->config();
  const int64_t kvd = cfg.kv_dim(), N = opt_.n_ctx;
  const int L = cfg.n_layers;
  auto kept_rows = [&](const std::vector<float>& rows) {
    std::vector<float> out(rows.begin(), rows.begin() + opt_.sink * kvd);
    out.insert(out.end(), rows.begin() + (opt_.sink + drop_) * kvd, rows.end());
    return out;
  };
  const int64_t nk = static_cast<int64_t>(kept.size());
  const kv::SeqId next = next_seq_++;
  cache_.add_sequence(next);
  if (mb.method == OverflowMethod::TT) {
    // Recompute the kept tokens at positions 0..nk-1: batched, as the head of the next
    // prefill of this sequence (see feed); unbatched, right here.
    mb.recomputed += nk;
    mb.processed += nk;
    if (opt_.batched) {
      mb.pending = true;
    } else {
      if (!cache_.reserve(next, nk)) throw Error("internal: overflow group KV pool too small");
      m_->forward({{next, kept, false}}, cache_);
      ++forward_calls_;
      ++mb.calls;
    }
  } else {
    if (!cache_.reserve(next, nk)) throw Error("internal: overflow group KV pool too small");
    if (mb.method == OverflowMethod::CA) {
      for (int l = 0; l < L; ++l) {
        auto& pk = mb.pre_k[static_cast<size_t>(l)];
        auto& pv = mb.pre_v[static_cast<size_t>(l)];
        pk = kept_rows(pk);
        pv = kept_rows(pv);
        m_->restore_kv(cache_, next, l, 0, nk, pk.data(), pv.data());
      }
    } else {
      // NKVT: the cached (post-RoPE) keys and values of the kept tokens, as they are: the
      // sink slots [0, sink) and the tail [sink + drop, N).
      std::vector<float> kbuf(static_cast<size_t>(nk * kvd)), vbuf(kbuf.size());
      const int64_t tail = N - opt_.sink - drop_;
      for (int l = 0; l < L; ++l) {
        m_->read_kv(cache_, mb.seq, l, 0, opt_.sink, kbuf.data(), vbuf.data());
        m_->read_kv(cache_, mb.seq, l, opt_.sink + drop_, tail, kbuf.data() + opt_.sink * kvd,
                    vbuf.data() + opt_.sink * kvd);
        m_->restore_kv_raw(cache_, next, l, 0, nk, kbuf.data(), vbuf.data());
      }
    }
    cache_.set_length(next, nk);
  }
  cache_.free_sequence(mb.seq);
  mb.seq = next;
}

OverflowStream::OverflowStream(const model::ForwardModel& m, OverflowMethod method,
                               const OverflowOptions& opt)
    : g_(m, {method}, opt) {}

std::vector<float> OverflowStream::feed(const std::vector<int32_t>& tokens) {
  return std::move(g_.feed(tokens)[0]);
}

std::vector<OverflowResult> run_overflow_group(const model::ForwardModel& m,
                                               const std::vector<int32_t>& all_tokens,
                                               const std::vector<OverflowMethod>& methods,
                                               const OverflowOptions& opt,
                                               const OverflowProgress& progress) {
  OverflowGroup group(m, methods, opt);  // validates the options
  std::vector<int32_t> tokens = all_tokens;
  const bool cut = opt.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > opt.max_tokens;
  if (cut) tokens.resize(static_cast<size_t>(opt.max_tokens));
  const int64_t T = static_cast<int64_t>(tokens.size()), N = opt.n_ctx, V = m.config().vocab_size;
  const int64_t drop = overflow_dropped_tokens(opt);
  if (T <= N + 1) {
    // The option's value does not fit the text: a usage error (exit 2), as the conventions'
    // "--ctx: needs at least 2 x N tokens".
    throw make_usage_error(
        "overflow study",
        std::string(cut ? "--max-tokens keeps " : "the text has ") + count_of(T, "token") +
            (cut ? " of the text's " + std::to_string(all_tokens.size()) : "") +
            "; it needs at least " + std::to_string(N + 2) + " (--ctx " + std::to_string(N) +
            " + 2) to overflow the window",
        cut ? "raise --max-tokens or lower --ctx" : "use a longer text or a smaller --ctx");
  }
  std::vector<OverflowResult> rs(methods.size());
  std::vector<double> nll(methods.size(), 0.0);
  int64_t pos = 0;
  // Feed one window-refill at a time: predictions are scored once the first overflow happened.
  while (pos < T) {
    // A full window is truncated inside feed(), freeing `drop` slots.
    const int64_t room = N - group.window_length();
    const int64_t n = std::min<int64_t>(room == 0 ? drop : room, T - pos);
    const bool scored = group.overflows() > 0 || room == 0;
    const std::vector<std::vector<float>> logits =
        group.feed(std::vector<int32_t>(tokens.begin() + pos, tokens.begin() + pos + n));
    if (scored) {
      for (size_t i = 0; i < methods.size(); ++i) {
        for (int64_t j = 0; j < n && pos + j + 1 < T; ++j) {
          const double v =
              token_nll(logits[i].data() + j * V, V, tokens[static_cast<size_t>(pos + j + 1)]);
          nll[i] += v;
          ++rs[i].scored_tokens;
          if (opt.keep_nll) rs[i].token_nll.push_back(v);
        }
      }
    }
    pos += n;
    if (progress) progress(pos, T);
  }
  for (size_t i = 0; i < methods.size(); ++i) {
    OverflowResult& r = rs[i];
    if (r.scored_tokens == 0)
      throw make_error("overflow study", "no token was scored after the first overflow");
    r.method = methods[i];
    r.overflows = group.overflows();
    r.tokens_recomputed = group.tokens_recomputed(i);
    r.tokens_processed = group.tokens_processed(i);
    r.forward_calls = group.forward_calls(i);
    r.mean_nll = nll[i] / static_cast<double>(r.scored_tokens);
    r.ppl = std::exp(r.mean_nll);
    r.seconds = group.seconds(i);
  }
  return rs;
}

OverflowResult run_overflow(const model::ForwardModel& m, const std::vector<int32_t>& tokens,
                            OverflowMethod method, const OverflowOptions& opt,
                            const OverflowProgress& progress) {
  return std::move(run_overflow_group(m, tokens, {method}, opt, progress)[0]);
}

}  // namespace cb::eval
