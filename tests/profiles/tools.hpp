// Helpers for the profile tests: daemon specs with a timing profile, and the
// real client tools (fio --ioengine=nbd, nbdinfo --json) run as commands
// whose JSON output is parsed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness.hpp"

namespace nbdsched::ptest {

// One RAM device "d0" of `size` bytes exported as "default", with `yaml`
// (device keys such as "    profile: hdd\n") added under it.
itest::ServerSpec profile_spec(const std::string& yaml, std::uint64_t size = 1ull << 30);

struct Command {
    int status = -1;      // exit status, -1 when it did not exit normally
    std::string output;   // stdout and stderr
};
Command run(const std::string& command);

// Empty when fio (with its nbd engine) and nbdinfo are here, else why not.
std::string missing_tools();
// Empty when the profile tests can run: nbdsched (not the nbdkit harness
// mode) and the tools above; else the reason to print with SKIP.
std::string skip_reason();

// Runs fio against `uri` with the nbd engine and `args` (name, rw, bs, ...),
// requires success and returns its JSON report.
nlohmann::json fio(const std::string& uri, const std::string& args);
// Totals over all jobs of a fio report: bytes/s and IOPS of reads.
double read_bw(const nlohmann::json& report);
double read_iops(const nlohmann::json& report);

// nbdinfo --json of the export, parsed (requires success).
nlohmann::json nbdinfo(const std::string& uri);

} // namespace nbdsched::ptest
