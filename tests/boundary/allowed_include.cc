// Must compile: lib/tokenizer is allowed to use lib/formats and lib/core.
#include "lib/core/error.h"
#include "lib/formats/gguf.h"

int cb_boundary_probe_allowed() {
  return 0;
}
