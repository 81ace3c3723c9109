// with_daemon SCRIPT [ARGS...]: starts the daemon with three exports, runs the
// shell script against it, then stops the daemon (exit 0 required). The script
// finds the daemon through the environment:
//   NBD_URI, NBD_URI_RO, NBD_URI_FILE   nbd+unix URIs of the exports
//                                       default (RAM 128 MiB), ro, file (64 MiB)
//   NBD_SOCKET                          the unix socket (of "default")
//   NBD_TCP_PORT                        the loopback port (0 if none)
//   NBD_TMPDIR                          scratch space, removed afterwards
//   ITEST_SERVER                        nbdsched | nbdkit
// Exit status: the script's, with 77 (skip) passed through.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <sys/wait.h>

#include "daemon.hpp"

using namespace nbdsched::testlib;

namespace {

ServerSpec script_spec() {
    ServerSpec s;
    s.devices.push_back(device("d0", "ram", 128ull << 20));
    s.devices.push_back(device("f0", "file", 64ull << 20));
    s.exports.push_back(export_of("default", "d0", false, "RAM export"));
    s.exports.push_back(export_of("ro", "d0", true, "read-only view"));
    s.exports.push_back(export_of("file", "f0", false, "file export"));
    return s;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

}   // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: with_daemon SCRIPT [ARGS...]\n");
        return 2;
    }
    auto choice = server_choice();
    if (!choice.skip_reason.empty()) {
        std::printf("SKIP: %s\n", choice.skip_reason.c_str());
        return 77;
    }
    try {
        Daemon d(script_spec());
        setenv("NBD_URI", d.uri("default").c_str(), 1);
        setenv("NBD_URI_RO", d.uri("ro").c_str(), 1);
        setenv("NBD_URI_FILE", d.uri("file").c_str(), 1);
        setenv("NBD_SOCKET", d.socket_path("default").c_str(), 1);
        setenv("NBD_TCP_PORT", std::to_string(d.tcp_port()).c_str(), 1);
        setenv("NBD_TMPDIR", d.dir().path().c_str(), 1);
        setenv("ITEST_SERVER", choice.nbdkit ? "nbdkit" : "nbdsched", 1);
        std::string cmd = "/bin/bash";
        for (int i = 1; i < argc; ++i) cmd += " " + shell_quote(argv[i]);
        std::fflush(stdout);
        int status = std::system(cmd.c_str());
        int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        bool alive = d.running();
        int stopped = d.stop();
        if (rc == 0 && !alive) {
            std::printf("FAIL: the daemon died while the script ran\n");
            rc = 1;
        } else if (rc == 0 && stopped != 0) {
            std::printf("FAIL: the daemon exited with status %d on SIGTERM\n", stopped);
            rc = 1;
        }
        if (rc != 0 && rc != 77)
            std::printf("----- daemon log -----\n%s----- end of daemon log -----\n",
                        d.log().c_str());
        return rc;
    } catch (const std::exception& e) {
        std::printf("FAIL: %s\n", e.what());
        return 1;
    }
}
