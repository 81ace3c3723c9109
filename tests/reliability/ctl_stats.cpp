#include "ctl_stats.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <sys/wait.h>

namespace nbdsched::reliability {

namespace {

// Paths here come from mkdtemp: no quotes in them to escape.
std::string run(const std::string& command) {
    FILE* p = popen(command.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run: " + command);
    std::string out;
    std::array<char, 4096> buf;
    while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
    int status = pclose(p);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error(command + ": failed (status " + std::to_string(status) + "):\n" + out);
    return out;
}

} // namespace

nlohmann::json ctl_stats(const std::string& control_socket) {
    const char* exe = std::getenv("NBDSCHED");
    if (!exe) throw std::runtime_error("NBDSCHED is not set");
    return nlohmann::json::parse(run(std::string("'") + exe + "' ctl --socket '" + control_socket +
                                     "' stats --json 2>&1"));
}

nlohmann::json device_stats(const std::string& control_socket, const std::string& device) {
    const auto all = ctl_stats(control_socket);   // kept: the loop refers into it
    for (const auto& d : all.at("devices"))
        if (d.at("name") == device) return d;
    throw std::runtime_error("ctl stats: no device " + device);
}

} // namespace nbdsched::reliability
