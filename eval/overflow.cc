#include "eval/overflow.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "eval/perplexity.h"
#include "lib/core/error.h"

namespace cb::eval {

const char* overflow_method_name(OverflowMethod m) {
  switch (m) {
    case OverflowMethod::TT: return "TT";
    case OverflowMethod::CA: return "CA";
    case OverflowMethod::NKVT: return "NKVT";
  }
  return "?";
}

namespace {

int64_t dropped_tokens(const OverflowOptions& opt) {
  return static_cast<int64_t>(std::floor(opt.truncate_ratio * static_cast<double>(opt.n_ctx)));
}

kv::KvConfig stream_kv_config(const model::Model& m, const OverflowOptions& opt) {
  const int64_t N = opt.n_ctx;
  if (N < 4 || N > m.config().max_context) {
    throw make_error("--ctx", std::to_string(N) + " must be in 4.." +
                                  std::to_string(m.config().max_context) +
                                  " (the model's context window)");
  }
  if (opt.block_size < 1) throw make_error("block_size", "must be positive");
  // Two sequences coexist during a truncation: the full window and the kept part.
  return m.kv_config(static_cast<int>(2 * ((N + opt.block_size - 1) / opt.block_size) + 2),
                     opt.block_size);
}

}  // namespace

OverflowStream::OverflowStream(const model::Model& m, OverflowMethod method,
                               const OverflowOptions& opt)
    : m_(&m),
      method_(method),
      opt_(opt),
      drop_(dropped_tokens(opt)),
      cache_(stream_kv_config(m, opt)) {
  if (!(opt.truncate_ratio > 0.0 && opt.truncate_ratio < 1.0) || drop_ < 1) {
    throw make_error("--truncate-ratio",
                     "must be in (0, 1) and drop at least one token of the window");
  }
  if (opt.sink < 0 || opt.sink + drop_ > opt.n_ctx) {
    throw make_error("--sink", "sink tokens plus dropped tokens exceed the window");
  }
  cache_.add_sequence(seq_);
  pre_k_.resize(static_cast<size_t>(m.config().n_layers));
  pre_v_.resize(static_cast<size_t>(m.config().n_layers));
}

std::vector<float> OverflowStream::feed(const std::vector<int32_t>& tokens) {
  const int64_t V = m_->config().vocab_size, kvd = m_->config().kv_dim(), N = opt_.n_ctx;
  model::LayerHooks hooks;
  if (method_ == OverflowMethod::CA) {
    hooks.on_new_kv = [this, kvd](int l, kv::SeqId, int64_t, int64_t n, const float* k,
                                  const float* v) {
      auto& pk = pre_k_[static_cast<size_t>(l)];
      auto& pv = pre_v_[static_cast<size_t>(l)];
      pk.insert(pk.end(), k, k + n * kvd);
      pv.insert(pv.end(), v, v + n * kvd);
    };
  }
  std::vector<float> out;
  out.reserve(tokens.size() * static_cast<size_t>(V));
  size_t pos = 0;
  while (pos < tokens.size()) {
    if (window_length() == N) truncate();
    const size_t n =
        std::min<size_t>(static_cast<size_t>(N - window_length()), tokens.size() - pos);
    model::SeqInput in{seq_,
                       std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(pos),
                                            tokens.begin() + static_cast<std::ptrdiff_t>(pos + n)),
                       true};
    if (!cache_.reserve(seq_, window_length() + static_cast<int64_t>(n))) {
      throw Error("internal: overflow stream KV pool too small");
    }
    const std::vector<float> logits = m_->forward({in}, cache_, hooks);
    out.insert(out.end(), logits.begin(), logits.end());
    window_.insert(window_.end(), in.tokens.begin(), in.tokens.end());
    processed_ += static_cast<int64_t>(n);
    pos += n;
  }
  return out;
}

void OverflowStream::truncate() {
  const model::ModelConfig& cfg = m_->config();
  const int64_t kvd = cfg.kv_dim(), N = opt_.n_ctx;
  const int L = cfg.n_layers;
  ++overflows_;
  // Keep [0, sink) and [sink + drop, N), in slot order.
  auto kept_rows = [&](const std::vector<float>& rows) {
    std::vector<float> out(rows.begin(), rows.begin() + opt_.sink * kvd);
    out.insert(out.end(), rows.begin() + (opt_.sink + drop_) * kvd, rows.end());
    return out;
  };
  std::vector<int32_t> kept(window_.begin(), window_.begin() + opt_.sink);
  kept.insert(kept.end(), window_.begin() + opt_.sink + drop_, window_.end());
  const int64_t nk = static_cast<int64_t>(kept.size());
  const kv::SeqId next = seq_ + 1;
  cache_.add_sequence(next);
  if (!cache_.reserve(next, nk)) throw Error("internal: overflow stream KV pool too small");
  if (method_ == OverflowMethod::TT) {
    m_->forward({{next, kept, false}}, cache_);  // recompute at positions 0..nk-1
    recomputed_ += nk;
    processed_ += nk;
  } else if (method_ == OverflowMethod::CA) {
    for (int l = 0; l < L; ++l) {
      auto& pk = pre_k_[static_cast<size_t>(l)];
      auto& pv = pre_v_[static_cast<size_t>(l)];
      pk = kept_rows(pk);
      pv = kept_rows(pv);
      m_->restore_kv(cache_, next, l, 0, nk, pk.data(), pv.data());
    }
    cache_.set_length(next, nk);
  } else {
    // NKVT: the cached (post-RoPE) keys and values of the kept tokens, as they are.
    std::vector<float> kbuf(static_cast<size_t>(nk * kvd)), vbuf(kbuf.size());
    for (int l = 0; l < L; ++l) {
      int64_t dst = 0;
      for (int64_t s = 0; s < N; ++s) {
        if (s >= opt_.sink && s < opt_.sink + drop_) continue;
        std::memcpy(kbuf.data() + dst * kvd, cache_.k_slot(l, seq_, s),
                    static_cast<size_t>(kvd) * sizeof(float));
        std::memcpy(vbuf.data() + dst * kvd, cache_.v_slot(l, seq_, s),
                    static_cast<size_t>(kvd) * sizeof(float));
        ++dst;
      }
      m_->restore_kv_raw(cache_, next, l, 0, nk, kbuf.data(), vbuf.data());
    }
    cache_.set_length(next, nk);
  }
  cache_.free_sequence(seq_);
  seq_ = next;
  window_ = std::move(kept);
}

OverflowResult run_overflow(const model::Model& m, const std::vector<int32_t>& all_tokens,
                            OverflowMethod method, const OverflowOptions& opt,
                            const std::function<void(int64_t, int64_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  OverflowStream stream(m, method, opt);  // validates the options
  std::vector<int32_t> tokens = all_tokens;
  if (opt.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > opt.max_tokens) {
    tokens.resize(static_cast<size_t>(opt.max_tokens));
  }
  const int64_t T = static_cast<int64_t>(tokens.size()), N = opt.n_ctx, V = m.config().vocab_size;
  const int64_t drop = dropped_tokens(opt);
  if (T <= N + 1) {
    throw make_error("overflow study",
                     "the text has " + std::to_string(T) +
                         " tokens; it must be longer than --ctx " + std::to_string(N) +
                         " to overflow the window",
                     "use a longer text or a smaller --ctx");
  }
  OverflowResult r;
  r.method = method;
  double nll = 0.0;
  int64_t pos = 0;
  // Feed one window-refill at a time: predictions are scored once the first overflow happened.
  while (pos < T) {
    // A full window is truncated inside feed(), freeing `drop` slots.
    const int64_t room = N - stream.window_length();
    const int64_t n = std::min<int64_t>(room == 0 ? drop : room, T - pos);
    const bool scored = stream.overflows() > 0 || room == 0;
    const std::vector<float> logits =
        stream.feed(std::vector<int32_t>(tokens.begin() + pos, tokens.begin() + pos + n));
    if (scored) {
      for (int64_t j = 0; j < n && pos + j + 1 < T; ++j) {
        nll += token_nll(logits.data() + j * V, V, tokens[static_cast<size_t>(pos + j + 1)]);
        ++r.scored_tokens;
      }
    }
    pos += n;
    if (progress) progress(pos, T);
  }
  if (r.scored_tokens == 0)
    throw make_error("overflow study", "no token was scored after the first overflow");
  r.overflows = stream.overflows();
  r.tokens_recomputed = stream.tokens_recomputed();
  r.tokens_processed = stream.tokens_processed();
  r.mean_nll = nll / static_cast<double>(r.scored_tokens);
  r.ppl = std::exp(r.mean_nll);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace cb::eval
