// See revision.h.
#include "apps/cachebench/revision.h"

#include "cachebench_version.h"

namespace cb::app {

const char* git_revision() {
  return CB_GIT_REVISION;
}

}  // namespace cb::app
