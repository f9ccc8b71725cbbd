#include "datasets/sharegpt.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "datasets/length_trace.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {
namespace {

using nlohmann::json;

const char* const kShape =
    "a ShareGPT file is a JSON array of {\"id\": ..., \"conversations\": [{\"from\": "
    "\"human\"|\"gpt\", \"value\": TEXT}, ...]}";
constexpr size_t kMaxNotes = 10;

enum class Role { kUser, kAssistant, kOther };

Role role_of(std::string from) {
  for (char& c : from) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (from == "human" || from == "user") return Role::kUser;
  if (from == "gpt" || from == "chatgpt" || from == "assistant" || from == "bard" ||
      from == "bing") {
    return Role::kAssistant;
  }
  return Role::kOther;
}

// The conversation's own id: "id" (string or number), else "conversation_id", else "".
std::string name_of(const json& conv) {
  for (const char* key : {"id", "conversation_id"}) {
    const auto it = conv.find(key);
    if (it == conv.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number()) return it->dump();
  }
  return "";
}

void add_note(Trace& t, std::string note) {
  if (t.notes.size() < kMaxNotes) t.notes.push_back(std::move(note));
}

// A message kept for pairing: its role and text.
struct Message {
  Role role;
  const std::string* text;
};

}  // namespace

Trace load_sharegpt(const std::string& path, const TokenizeFn& tokenize,
                    const TraceLoadOptions& opts) {
  return parse_sharegpt(maybe_gunzip(read_file_bytes(path), path), path, tokenize, opts);
}

Trace parse_sharegpt(std::string_view bytes, const std::string& path, const TokenizeFn& tokenize,
                     const TraceLoadOptions& opts) {
  if (!tokenize) {
    throw make_error("", path +
                             " is a ShareGPT trace: it needs a tokenizer (--tokenizer FILE or a "
                             "model with a vocabulary)");
  }
  const json j = parse_trace_json(bytes, path);
  if (!j.is_array()) {
    throw make_error(
        path,
        std::string("top level is a JSON ") + j.type_name() + ", not an array of conversations",
        kShape);
  }
  Trace t;
  t.path = path;
  t.kind = "sharegpt";
  for (size_t i = 0; i < j.size(); ++i) {
    if (opts.limit > 0 && static_cast<int64_t>(t.sessions.size()) >= opts.limit) break;
    const json& conv = j[i];
    std::string where = path + ": conversation " + std::to_string(i);
    if (!conv.is_object()) {
      throw make_error(where, std::string("is a JSON ") + conv.type_name() + ", not an object",
                       kShape);
    }
    const std::string name = name_of(conv);
    if (!name.empty()) where += " (id " + name + ")";
    auto msgs = conv.find("conversations");
    if (msgs == conv.end()) msgs = conv.find("items");  // the raw ShareGPT dump's field
    if (msgs == conv.end()) {
      throw make_error(where, "has no \"conversations\" field", kShape);
    }
    if (!msgs->is_array()) {
      throw make_error(
          where, std::string("\"conversations\" is a JSON ") + msgs->type_name() + ", not an array",
          kShape);
    }

    // Pass 1: check every message's types and length; nothing is tokenized yet.
    std::vector<Message> kept;
    int64_t skipped = 0;
    bool too_long = false;
    for (size_t k = 0; k < msgs->size() && !too_long; ++k) {
      const json& m = (*msgs)[k];
      const std::string mw = where + ", message " + std::to_string(k);
      if (!m.is_object()) {
        throw make_error(mw, std::string("is a JSON ") + m.type_name() + ", not an object", kShape);
      }
      const auto from = m.find("from");
      const auto value = m.find("value");
      if (from != m.end() && !from->is_string() && !from->is_null()) {
        throw make_error(
            mw, std::string("\"from\" is a JSON ") + from->type_name() + ", not a string", kShape);
      }
      if (value != m.end() && !value->is_string() && !value->is_null()) {
        throw make_error(
            mw, std::string("\"value\" is a JSON ") + value->type_name() + ", not a string",
            kShape);
      }
      const Role role =
          (from == m.end() || from->is_null()) ? Role::kOther : role_of(from->get<std::string>());
      if (role == Role::kOther || value == m.end() || value->is_null() ||
          value->get_ref<const std::string&>().empty()) {
        ++skipped;
        continue;
      }
      const std::string& text = value->get_ref<const std::string&>();
      if (static_cast<int64_t>(text.size()) > opts.max_message_chars) {
        too_long = true;
        add_note(t, where + ": message " + std::to_string(k) + " has " +
                        std::to_string(text.size()) + " characters, over the limit of " +
                        std::to_string(opts.max_message_chars) + "; conversation skipped");
        break;
      }
      kept.push_back({role, &text});
    }
    if (too_long) {
      ++t.skipped_conversations;
      continue;
    }

    // Pass 2: pair each question with the answer that follows it.
    std::vector<std::pair<const std::string*, const std::string*>> pairs;
    const std::string* question = nullptr;
    for (const Message& m : kept) {
      if (m.role == Role::kUser) {
        if (question != nullptr) ++skipped;  // an earlier question never answered
        question = m.text;
      } else if (question != nullptr) {
        pairs.emplace_back(question, m.text);
        question = nullptr;
      } else {
        ++skipped;  // an answer with no question before it
      }
    }
    if (question != nullptr) ++skipped;

    TraceSession s;
    s.id = t.sessions.size();
    s.name = name;
    for (const auto& [q, a] : pairs) {
      TraceTurn turn;
      turn.input_ids = tokenize(*q);
      if (turn.input_ids.empty()) {
        skipped += 2;
        continue;
      }
      turn.input_tokens = static_cast<int64_t>(turn.input_ids.size());
      turn.output_tokens = std::max<int64_t>(1, static_cast<int64_t>(tokenize(*a).size()));
      s.turns.push_back(std::move(turn));
    }
    if (s.turns.empty()) {
      ++t.skipped_conversations;
      add_note(t, where + ": no complete user/assistant turn; conversation skipped");
      continue;
    }
    t.skipped_messages += skipped;
    t.sessions.push_back(std::move(s));
  }
  if (t.sessions.empty()) {
    std::string what = "no complete user/assistant turn in " + path + " (" +
                       std::to_string(j.size()) + " conversations read";
    if (!t.notes.empty()) {
      const std::string& note = t.notes.front();
      const bool named = note.compare(0, path.size() + 2, path + ": ") == 0;
      what += "; first skip: " + (named ? note.substr(path.size() + 2) : note);
    }
    throw make_error(
        "", what + ")",
        "a turn is a \"human\" message followed by a \"gpt\" answer; " + std::string(kShape));
  }
  return t;
}

}  // namespace cb::datasets
