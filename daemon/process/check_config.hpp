// `nbdsched --check-config FILE`: what would stop the daemon starting with
// FILE, found without starting it: the configuration's errors, then the
// files behind its tls: section (a PSK file or certificate that does not
// load fails the start, and a reload). Each error with file:line:col.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace nbdsched::daemon {

// Each tls: file that does not load, at its key (tls.psk_file,
// tls.certificates); none without a tls: section.
std::vector<config::Error> tls_file_errors(const config::Tls& tls);

// Prints every error on stderr, or "FILE: OK" on stdout; the exit status (0 or 1).
int check_config(const std::string& path);

}   // namespace nbdsched::daemon
