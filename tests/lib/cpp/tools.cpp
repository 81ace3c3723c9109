#include "tools.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <sys/wait.h>

#include "daemon.hpp"

namespace nbdsched::testlib {

Command run(const std::string& command) {
    Command c;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) return c;
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) c.output.append(buf.data(), n);
    int status = ::pclose(p);
    c.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return c;
}

std::string missing_tools() {
    if (run("fio --enghelp").output.find("nbd") == std::string::npos) return "fio with the nbd engine not installed";
    if (run("nbdinfo --version").status != 0) return "nbdinfo not installed";
    return {};
}

std::string fio_skip_reason() {
    if (nbdkit_mode()) return "these tests need nbdsched, not the nbdkit stand-in";
    return missing_tools();
}

namespace {
// fio prints notes before the JSON (and libnbd may log); the report is the
// outermost object.
nlohmann::json parse_json(const std::string& what, const Command& c) {
    auto begin = c.output.find('{');
    auto end = c.output.rfind('}');
    if (c.status != 0 || begin == std::string::npos || end == std::string::npos)
        throw std::runtime_error(what + " failed (" + std::to_string(c.status) + "):\n" + c.output);
    return nlohmann::json::parse(c.output.substr(begin, end - begin + 1));
}

double sum_read(const nlohmann::json& report, const char* field) {
    double total = 0;
    for (const auto& job : report.at("jobs")) total += job.at("read").at(field).get<double>();
    return total;
}
}   // namespace

nlohmann::json fio(const std::string& uri, const std::string& args) {
    std::string cmd = "fio --output-format=json --ioengine=nbd --uri='" + uri + "' " + args;
    auto report = parse_json("fio", run(cmd));
    for (const auto& job : report.at("jobs"))
        if (job.at("error").get<int>() != 0) throw std::runtime_error("fio job error: " + job.dump());
    return report;
}

double read_bw(const nlohmann::json& report) { return sum_read(report, "bw_bytes"); }
double read_iops(const nlohmann::json& report) { return sum_read(report, "iops"); }

nlohmann::json nbdinfo(const std::string& uri) { return parse_json("nbdinfo", run("nbdinfo --json '" + uri + "'")); }

nlohmann::json ctl_stats(const std::string& control_socket) {
    const char* exe = std::getenv("NBDSCHED");
    if (!exe) throw std::runtime_error("NBDSCHED is not set");
    // Paths here come from mkdtemp: no quotes in them to escape.
    const auto c = run(std::string("'") + exe + "' ctl --socket '" + control_socket + "' stats --json");
    if (c.status != 0)
        throw std::runtime_error("ctl stats failed (status " + std::to_string(c.status) + "):\n" + c.output);
    return nlohmann::json::parse(c.output);
}

nlohmann::json device_stats(const std::string& control_socket, const std::string& device) {
    const auto all = ctl_stats(control_socket);   // kept: the loop refers into it
    for (const auto& d : all.at("devices"))
        if (d.at("name") == device) return d;
    throw std::runtime_error("ctl stats: no device " + device);
}

}   // namespace nbdsched::testlib
