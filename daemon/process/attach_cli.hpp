// `nbdsched attach` and `nbdsched detach`: put an export under /dev/nbdN
// through the kernel's netlink interface and keep it connected across daemon
// restarts (kernel/attach.hpp does the work; this is the command line).
#pragma once

namespace nbdsched::daemon {

// argv[0] is "attach" / "detach"; returns the exit code.
int run_attach(int argc, char** argv);
int run_detach(int argc, char** argv);

}   // namespace nbdsched::daemon
