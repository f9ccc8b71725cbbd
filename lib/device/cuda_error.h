#pragma once
/// The message of a failed CUDA call, built without CUDA headers so that hosts without the
/// toolkit and tests without a GPU can check it.

#include <string>

namespace cb::device {

/// "FILE:LINE: CALL failed: NAME (TEXT)", e.g. "kv.cc:42: cudaMalloc(&p, n) failed:
/// cudaErrorMemoryAllocation (out of memory)"; `fix`, when given, follows after "; ".
std::string cuda_error_message(const std::string& call, const char* file, int line,
                               const std::string& error_name, const std::string& error_text,
                               const std::string& fix = "");

}  // namespace cb::device
