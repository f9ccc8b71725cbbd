#pragma once
/// The git revision this binary was built from ("abc123def456", "-dirty" when the tree had
/// changes, "unknown" outside git). Compiled in revision.cc alone, so that a new commit
/// recompiles that one file rather than every subcommand that records the revision.

namespace cb::app {

const char* git_revision();

}  // namespace cb::app
