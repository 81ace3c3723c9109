#pragma once

namespace nbdsched::daemon {

// "0.1.0 (git 1a2b3c4)": the release and the commit the binary was built
// from (`-dirty` when the tree had changes, `unknown` outside a git
// checkout), so that a report or a log names the code that ran.
const char* build_version();

}   // namespace nbdsched::daemon
