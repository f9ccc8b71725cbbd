// Must NOT compile: lib/tokenizer may depend on core and formats only (DESIGN.md section 2),
// so a header of lib/model is not on its include path.
#include "lib/model/config.h"

int cb_boundary_probe_forbidden() {
  return 0;
}
