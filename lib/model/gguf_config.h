#pragma once
/// ModelConfig from GGUF metadata (general.architecture = llama | falcon).

#include "lib/formats/gguf.h"
#include "lib/model/config.h"

namespace cb::model {

/// Reads the architecture's hyper-parameters; missing required keys or an unsupported
/// architecture give a cb::Error naming the file and key. Does not validate tensors.
ModelConfig config_from_gguf(const formats::GgufFile& f);

}  // namespace cb::model
