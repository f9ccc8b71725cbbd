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

OverflowResult run_overflow(const model::Model& m, const std::vector<int32_t>& all_tokens,
                            OverflowMethod method, const OverflowOptions& opt,
                            const std::function<void(int64_t, int64_t)>& progress) {
  const model::ModelConfig& cfg = m.config();
  const int64_t N = opt.n_ctx;
  const int64_t drop =
      static_cast<int64_t>(std::floor(opt.truncate_ratio * static_cast<double>(N)));
  if (N < 4 || N > cfg.max_context) {
    throw make_error("--ctx", std::to_string(N) + " must be in 4.." +
                                  std::to_string(cfg.max_context) +
                                  " (the model's context window)");
  }
  if (!(opt.truncate_ratio > 0.0 && opt.truncate_ratio < 1.0) || drop < 1) {
    throw make_error("--truncate-ratio",
                     "must be in (0, 1) and drop at least one token of the window");
  }
  if (opt.sink < 0 || opt.sink + drop > N) {
    throw make_error("--sink", "sink tokens plus dropped tokens exceed the window");
  }
  std::vector<int32_t> tokens = all_tokens;
  if (opt.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > opt.max_tokens)
    tokens.resize(static_cast<size_t>(opt.max_tokens));
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T <= N + 1) {
    throw make_error("overflow study",
                     "the text has " + std::to_string(T) +
                         " tokens; it must be longer than --ctx " + std::to_string(N) +
                         " to overflow the window",
                     "use a longer text or a smaller --ctx");
  }

  const auto t0 = std::chrono::steady_clock::now();
  const int64_t kvd = cfg.kv_dim(), V = cfg.vocab_size;
  const int L = cfg.n_layers;
  kv::KvCache cache(m.kv_config(
      static_cast<int>(2 * ((N + opt.block_size - 1) / opt.block_size) + 2), opt.block_size));
  kv::SeqId seq = 0;
  cache.add_sequence(seq);
  // CA: pre-RoPE K and V of the tokens in the window, per layer, in window order.
  std::vector<std::vector<float>> pre_k(static_cast<size_t>(L)), pre_v(static_cast<size_t>(L));
  model::LayerHooks hooks;
  if (method == OverflowMethod::CA) {
    hooks.on_new_kv = [&](int l, kv::SeqId, int64_t, int64_t n, const float* k, const float* v) {
      pre_k[static_cast<size_t>(l)].insert(pre_k[static_cast<size_t>(l)].end(), k, k + n * kvd);
      pre_v[static_cast<size_t>(l)].insert(pre_v[static_cast<size_t>(l)].end(), v, v + n * kvd);
    };
  }
  std::vector<int32_t> window;  // token ids in the window, in slot order
  OverflowResult r;
  r.method = method;
  double nll = 0.0;
  int64_t pos = 0;
  bool overflowed = false;
  while (pos < T) {
    const int64_t n = std::min<int64_t>(N - static_cast<int64_t>(window.size()), T - pos);
    model::SeqInput in{seq, std::vector<int32_t>(tokens.begin() + pos, tokens.begin() + pos + n),
                       true};
    if (!cache.reserve(seq, static_cast<int64_t>(window.size()) + n))
      throw Error("internal: overflow KV pool too small");
    const std::vector<float> logits = m.forward({in}, cache, hooks);
    r.tokens_processed += n;
    if (overflowed) {
      for (int64_t j = 0; j < n && pos + j + 1 < T; ++j) {
        nll += token_nll(logits.data() + j * V, V, tokens[static_cast<size_t>(pos + j + 1)]);
        ++r.scored_tokens;
      }
    }
    window.insert(window.end(), in.tokens.begin(), in.tokens.end());
    pos += n;
    if (progress) progress(pos, T);
    if (static_cast<int64_t>(window.size()) < N || pos >= T) continue;

    // Overflow: keep [0, sink) and [sink + drop, N); slot order is preserved.
    overflowed = true;
    ++r.overflows;
    auto kept_rows = [&](const std::vector<float>& rows) {
      std::vector<float> out(rows.begin(), rows.begin() + opt.sink * kvd);
      out.insert(out.end(), rows.begin() + (opt.sink + drop) * kvd, rows.end());
      return out;
    };
    std::vector<int32_t> kept(window.begin(), window.begin() + opt.sink);
    kept.insert(kept.end(), window.begin() + opt.sink + drop, window.end());
    const int64_t nk = static_cast<int64_t>(kept.size());
    const kv::SeqId next = seq + 1;
    cache.add_sequence(next);
    if (!cache.reserve(next, nk)) throw Error("internal: overflow KV pool too small");
    if (method == OverflowMethod::TT) {
      // Recompute the kept tokens from scratch at positions 0..nk-1.
      m.forward({{next, kept, false}}, cache);
      r.tokens_recomputed += nk;
      r.tokens_processed += nk;
    } else if (method == OverflowMethod::CA) {
      for (int l = 0; l < L; ++l) {
        pre_k[static_cast<size_t>(l)] = kept_rows(pre_k[static_cast<size_t>(l)]);
        pre_v[static_cast<size_t>(l)] = kept_rows(pre_v[static_cast<size_t>(l)]);
        m.restore_kv(cache, next, l, 0, nk, pre_k[static_cast<size_t>(l)].data(),
                     pre_v[static_cast<size_t>(l)].data());
      }
      cache.set_length(next, nk);
    } else {
      // NKVT: copy the cached (post-RoPE) keys and values of the kept tokens as they are.
      std::vector<float> kbuf(static_cast<size_t>(nk * kvd)), vbuf(kbuf.size());
      for (int l = 0; l < L; ++l) {
        int64_t dst = 0;
        for (int64_t s = 0; s < N; ++s) {
          if (s >= opt.sink && s < opt.sink + drop) continue;
          std::memcpy(kbuf.data() + dst * kvd, cache.k_slot(l, seq, s),
                      static_cast<size_t>(kvd) * sizeof(float));
          std::memcpy(vbuf.data() + dst * kvd, cache.v_slot(l, seq, s),
                      static_cast<size_t>(kvd) * sizeof(float));
          ++dst;
        }
        m.restore_kv_raw(cache, next, l, 0, nk, kbuf.data(), vbuf.data());
      }
      cache.set_length(next, nk);
    }
    cache.free_sequence(seq);
    seq = next;
    window = std::move(kept);
  }
  if (r.scored_tokens == 0)
    throw make_error("overflow study", "no token was scored after the first overflow");
  r.mean_nll = nll / static_cast<double>(r.scored_tokens);
  r.ppl = std::exp(r.mean_nll);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace cb::eval
