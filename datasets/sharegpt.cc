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
#include "lib/core/format.h"

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

// FastChat's split_long_conversation (which wrote ShareGPT_V3_unfiltered_cleaned_split.json)
// stores a long conversation as consecutive pieces "ID_K", K the index of the piece's first
// message in the original conversation.
struct SplitId {
  std::string base;
  int64_t start = -1;  ///< K; -1 when the id is not of that form
};

SplitId split_id(const std::string& name) {
  const size_t us = name.rfind('_');
  if (us == std::string::npos || us == 0 || us + 1 == name.size() || name.size() - us - 1 > 9) {
    return {};
  }
  int64_t k = 0;
  for (size_t c = us + 1; c < name.size(); ++c) {
    if (name[c] < '0' || name[c] > '9') return {};
    k = k * 10 + (name[c] - '0');
  }
  return {name.substr(0, us), k};
}

// A conversation being read: its first piece's position and id, and the messages kept so far
// from all its pieces.
struct Pending {
  bool active = false;
  std::string where;  ///< "PATH: conversation I (id X)" of the first piece
  std::string name;   ///< the first piece's id
  SplitId split;      ///< the last piece's split id
  int64_t pieces = 1;
  std::vector<Message> kept;
  int64_t other_roles = 0;          ///< messages skipped for a "from" that is neither side's
  std::string other_role;           ///< the first such "from" ("system", "" when absent)
  bool other_roles_differ = false;  ///< another such message had another "from"
  int64_t no_text = 0;              ///< messages skipped for an empty or absent "value"
  bool too_long = false;
};

// Why a conversation has no complete turn, from what its messages held: '1 question
// ("human"), 0 answers ("gpt"); 1 message from "system" skipped; 1 message without text
// skipped'.
std::string no_turn_reason(const Pending& cur) {
  int64_t questions = 0, answers = 0;
  for (const Message& m : cur.kept) ++(m.role == Role::kUser ? questions : answers);
  std::string r = count_of(questions, "question") + " (\"human\"), " + count_of(answers, "answer") +
                  " (\"gpt\")";
  // Both kinds, and still no turn: no answer follows a question (or its question tokenized to
  // nothing).
  if (questions > 0 && answers > 0) r += ", but no question with an answer after it";
  if (cur.other_roles > 0) {
    const std::string who =
        cur.other_role.size() > 40 ? cur.other_role.substr(0, 40) + "..." : cur.other_role;
    r += "; " + count_of(cur.other_roles, "message") + " from " +
         (who.empty() ? std::string("no one (no \"from\")") : "\"" + who + "\"") +
         (cur.other_roles_differ ? " and other roles" : "") + " skipped";
  }
  if (cur.no_text > 0) r += "; " + count_of(cur.no_text, "message") + " without text skipped";
  return r;
}

// Pass 1 over one piece's messages: checks every message's types and length and keeps the
// user and assistant messages with text; nothing is tokenized yet.
void collect(Trace& t, Pending& cur, const json& msgs, const std::string& where,
             const TraceLoadOptions& opts) {
  for (size_t k = 0; k < msgs.size(); ++k) {
    const json& m = msgs[k];
    const std::string mw = where + ", message " + std::to_string(k);
    if (!m.is_object()) {
      throw make_error(mw, std::string("is a JSON ") + m.type_name() + ", not an object", kShape);
    }
    const auto from = m.find("from");
    const auto value = m.find("value");
    if (from == m.end() && value == m.end() && (m.contains("role") || m.contains("content"))) {
      throw make_error(mw,
                       "has \"role\"/\"content\" (the OpenAI chat format), not ShareGPT's "
                       "\"from\"/\"value\"",
                       "rename the keys \"role\" -> \"from\" and \"content\" -> \"value\" "
                       "(\"user\" and \"assistant\" are read as they are)");
    }
    if (from != m.end() && !from->is_string() && !from->is_null()) {
      throw make_error(
          mw, std::string("\"from\" is a JSON ") + from->type_name() + ", not a string", kShape);
    }
    if (value != m.end() && !value->is_string() && !value->is_null()) {
      throw make_error(
          mw, std::string("\"value\" is a JSON ") + value->type_name() + ", not a string", kShape);
    }
    const Role role =
        (from == m.end() || from->is_null()) ? Role::kOther : role_of(from->get<std::string>());
    if (role == Role::kOther) {
      const std::string who = from != m.end() && from->is_string() ? from->get<std::string>() : "";
      if (cur.other_roles++ == 0) {
        cur.other_role = who;
      } else if (who != cur.other_role) {
        cur.other_roles_differ = true;
      }
      continue;
    }
    if (value == m.end() || value->is_null() || value->get_ref<const std::string&>().empty()) {
      ++cur.no_text;
      continue;
    }
    const std::string& text = value->get_ref<const std::string&>();
    if (static_cast<int64_t>(text.size()) > opts.max_message_chars) {
      cur.too_long = true;
      add_note(t, where + ": message " + std::to_string(k) + " has " + std::to_string(text.size()) +
                      " characters, over the limit of " + std::to_string(opts.max_message_chars) +
                      "; conversation skipped");
      return;
    }
    cur.kept.push_back({role, &text});
  }
}

// Pass 2: pairs each question with the answer that follows it, tokenizes, and adds the
// session to `t` (or counts the conversation as skipped); `cur` is then inactive.
void finish(Trace& t, Pending& cur, const TokenizeFn& tokenize, int32_t bos) {
  if (!cur.active) return;
  cur.active = false;
  if (cur.too_long) {
    ++t.skipped_conversations;
    return;
  }
  int64_t skipped = cur.other_roles + cur.no_text;  // skipped while collecting
  std::vector<std::pair<const std::string*, const std::string*>> pairs;
  const std::string* question = nullptr;
  for (const Message& m : cur.kept) {
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
  s.name = cur.name;
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
    add_note(t, cur.where + ": no complete user/assistant turn (" + no_turn_reason(cur) +
                    "); conversation skipped");
    return;
  }
  if (bos >= 0) {
    std::vector<int32_t>& first = s.turns.front().input_ids;
    first.insert(first.begin(), bos);
    ++s.turns.front().input_tokens;
  }
  t.skipped_messages += skipped;
  t.joined_pieces += cur.pieces - 1;
  t.sessions.push_back(std::move(s));
}

}  // namespace

Trace load_sharegpt(const std::string& path, const TokenizeFn& tokenize,
                    const TraceLoadOptions& opts) {
  return parse_sharegpt(maybe_gunzip(read_file_bytes(path), path), path, tokenize, opts);
}

Trace parse_sharegpt(std::string_view bytes, const std::string& path, const TokenizeFn& tokenize,
                     const TraceLoadOptions& opts) {
  const json j = parse_trace_json(bytes, path);  // a malformed file is said to be one first
  if (!tokenize) {
    // An option missing beside the trace: a usage error (exit 2).
    throw make_usage_error("", path +
                                   " is a ShareGPT trace: it needs a tokenizer (--tokenizer FILE, "
                                   "or --model M with a vocabulary)");
  }
  if (!j.is_array()) {
    throw make_error(
        path,
        std::string("top level is a JSON ") + j.type_name() + ", not an array of conversations",
        kShape);
  }
  Trace t;
  t.path = path;
  t.kind = "sharegpt";
  Pending cur;
  for (size_t i = 0; i < j.size(); ++i) {
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
    const SplitId sid = split_id(name);
    const bool continues = opts.join_split && cur.active && cur.split.start >= 0 &&
                           sid.start > cur.split.start && sid.base == cur.split.base;
    if (continues) {
      ++cur.pieces;
    } else {
      finish(t, cur, tokenize, opts.bos);
      if (opts.limit > 0 && static_cast<int64_t>(t.sessions.size()) >= opts.limit) break;
      cur = Pending{};
      cur.active = true;
      cur.where = where;
      cur.name = name;
    }
    cur.split = sid;
    if (!cur.too_long) collect(t, cur, *msgs, where, opts);
  }
  finish(t, cur, tokenize, opts.bos);
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
