#include "tools.hpp"

#include <array>
#include <cstdio>
#include <stdexcept>
#include <sys/wait.h>

namespace nbdsched::ptest {

itest::ServerSpec profile_spec(const std::string& yaml, std::uint64_t size) {
    itest::ServerSpec s;
    s.tcp = false;
    auto d = itest::device("d0", "ram", size);
    d.yaml = yaml;
    s.devices.push_back(d);
    s.exports.push_back(itest::export_of("default", "d0"));
    return s;
}

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

std::string skip_reason() {
    if (itest::nbdkit_mode()) return "profiles need nbdsched";
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
} // namespace

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

} // namespace nbdsched::ptest
