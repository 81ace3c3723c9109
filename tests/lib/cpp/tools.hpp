// Real client tools run as commands: fio (nbd engine) and nbdinfo --json,
// their JSON output parsed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace nbdsched::testlib {

struct Command {
    int status = -1;      // exit status, -1 when it did not exit normally
    std::string output;   // stdout and stderr
};
Command run(const std::string& command);

// Empty when fio (with its nbd engine) and nbdinfo are here, else why not.
std::string missing_tools();
// Empty when tests of nbdsched itself (not the nbdkit stand-in) through
// fio and nbdinfo can run here, else why not.
std::string fio_skip_reason();

// Runs fio against `uri` with the nbd engine and `args` (name, rw, bs, ...),
// requires success and returns its JSON report.
nlohmann::json fio(const std::string& uri, const std::string& args);
// Totals over all jobs of a fio report: bytes/s and IOPS of reads.
double read_bw(const nlohmann::json& report);
double read_iops(const nlohmann::json& report);

// nbdinfo --json of the export, parsed (requires success).
nlohmann::json nbdinfo(const std::string& uri);

// `nbdsched ctl --socket SOCKET stats --json` of the daemon under test ($NBDSCHED).
nlohmann::json ctl_stats(const std::string& control_socket);
// The entry of one device in ctl_stats().
nlohmann::json device_stats(const std::string& control_socket, const std::string& device);

}   // namespace nbdsched::testlib
