#include "daemon.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "case_report.hpp"
#include "net.hpp"

extern char** environ;

namespace nbdsched::testlib {

namespace {

using namespace std::chrono_literals;

// Only for hangs: a healthy daemon starts and stops in well under a second,
// but shared CI machines can be very slow (and sanitizer builds slower).
constexpr auto k_start_timeout = 60s;
constexpr auto k_stop_timeout = 60s;

int status_code(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

// Waits for pid up to timeout; returns its status code or -1 on timeout.
int wait_for(pid_t pid, std::chrono::steady_clock::duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status_code(status);
        if (r < 0 && errno != EINTR) return -1;
        if (std::chrono::steady_clock::now() > deadline) return -1;
        std::this_thread::sleep_for(5ms);
    }
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
    return pid;
}

long status_field(pid_t pid, const std::string& key) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string word;
    while (f >> word) {
        if (word == key) {
            long v = -1;
            f >> v;
            return v;
        }
        f.ignore(4096, '\n');
    }
    return -1;
}

}   // namespace

long rss_kib(pid_t pid) { return status_field(pid, "VmRSS:"); }
long peak_rss_kib(pid_t pid) { return status_field(pid, "VmHWM:"); }

ServerChoice server_choice() {
    ServerChoice c;
    if (const char* k = std::getenv("NBDSCHED_ITEST_NBDKIT"); k && *k == '1') {
        c.nbdkit = true;
        c.exe = "/usr/bin/nbdkit";
        if (access(c.exe.c_str(), X_OK) != 0) c.skip_reason = "nbdkit not installed";
        return c;
    }
    const char* exe = std::getenv("NBDSCHED");
    if (!exe || !*exe) {
        c.skip_reason = "the nbdsched executable is not built yet (NBDSCHED unset)";
        return c;
    }
    c.exe = exe;
    if (access(exe, X_OK) != 0) c.skip_reason = std::string("not executable: ") + exe;
    return c;
}

bool nbdkit_mode() { return server_choice().nbdkit; }

Daemon::Daemon(ServerSpec spec, Start when) : choice_(server_choice()), spec_(std::move(spec)) {
    if (!choice_.skip_reason.empty()) throw std::runtime_error(choice_.skip_reason);
    config_path_ = dir_.file("nbdsched.yaml");
    log_path_ = dir_.file("daemon.log");
    socket_ = dir_.file("nbd.sock");
    if (choice_.nbdkit) spec_.tcp = false;   // nbdkit: one unix socket per export
    for (auto& d : spec_.devices)
        if (d.backend == "file" && d.path.empty()) d.path = dir_.file(d.name + ".img");
    // The port picked may be taken by someone else before the daemon binds
    // it: retry with another one.
    for (int attempt = 0;; ++attempt) {
        if (spec_.tcp) port_ = free_tcp_port();
        write_config();
        if (when == Start::later) return;
        try {
            start();
            return;
        } catch (const std::exception&) {
            // The exception carries the log.
            if (attempt >= 2 || !spec_.tcp || log().find("in use") == std::string::npos)
                throw;
        }
    }
}

Daemon::~Daemon() {
    if (!pids_.empty()) {
        int rc = stop();
        if (rc != 0) std::fprintf(stderr, "daemon exited with status %d\n", rc);
    }
    remember_case_log("----- daemon log -----\n" + log() + "----- end of daemon log -----\n");
}

void Daemon::write_config() const {
    std::ofstream(config_path_) << config_text(spec_, socket_, port_);
}

void Daemon::start() {
    if (choice_.nbdkit) {
        start_nbdkit();
    } else {
        unlink(socket_.c_str());   // left behind by a SIGKILL: not a sign of readiness
        pids_.push_back(spawn({choice_.exe, "--config", config_path_}, log_path_));
    }
    wait_ready();
}

// Development stand-in: one nbdkit per export (devices are not shared).
void Daemon::start_nbdkit() {
    export_sockets_.clear();
    for (std::size_t i = 0; i < spec_.exports.size(); ++i) {
        const auto& e = spec_.exports[i];
        const DeviceSpec* dev = nullptr;
        for (const auto& d : spec_.devices)
            if (d.name == e.device) dev = &d;
        if (!dev) throw std::runtime_error("export " + e.name + ": no device " + e.device);
        std::string sock = dir_.file("nbdkit" + std::to_string(i) + ".sock");
        export_sockets_.push_back(sock);
        std::filesystem::remove(sock);   // nbdkit leaves it behind
        std::vector<std::string> argv = {choice_.exe, "-f", "-U", sock,
                                         "--filter=blocksize-policy"};
        if (e.readonly) argv.push_back("-r");
        if (dev->backend == "file") {
            if (!std::filesystem::exists(dev->path)) {
                std::ofstream(dev->path).close();
                std::filesystem::resize_file(dev->path, dev->size);
            }
            argv.insert(argv.end(), {"file", dev->path});
        } else {
            argv.insert(argv.end(), {"memory", std::to_string(dev->size)});
        }
        argv.insert(argv.end(), {"blocksize-minimum=1", "blocksize-preferred=4096",
                                 "blocksize-maximum=33554432", "blocksize-error-policy=error"});
        pids_.push_back(spawn(argv, log_path_));
    }
}

void Daemon::wait_ready() {
    std::vector<std::string> sockets = choice_.nbdkit ? export_sockets_
                                                      : std::vector<std::string>{socket_};
    const auto deadline = std::chrono::steady_clock::now() + k_start_timeout;
    for (;;) {
        bool ready = true;
        for (const auto& s : sockets) {
            int fd = connect_unix(s);
            ready = ready && fd >= 0;
            if (fd >= 0) close(fd);
        }
        if (ready && spec_.tcp) {
            int fd = connect_tcp(port_);
            ready = fd >= 0;
            if (fd >= 0) close(fd);
        }
        if (ready) return;
        for (pid_t pid : pids_) {
            int status = 0;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                std::erase(pids_, pid);
                stop();
                throw std::runtime_error("daemon exited with status " +
                                         std::to_string(status_code(status)) + " before it was ready:\n" + log());
            }
        }
        if (std::chrono::steady_clock::now() > deadline) {
            stop(SIGKILL);
            throw std::runtime_error("daemon not ready after 60 s:\n" + log());
        }
        std::this_thread::sleep_for(10ms);
    }
}

int Daemon::stop(int signal) {
    int result = 0;
    for (pid_t pid : pids_) kill(pid, signal);
    for (pid_t pid : pids_) {
        // nbdkit (development only) waits for connected clients on SIGTERM.
        int rc = wait_for(pid, choice_.nbdkit ? std::chrono::seconds(2) : k_stop_timeout);
        if (rc == -1) {
            kill(pid, SIGKILL);
            wait_for(pid, k_stop_timeout);
            if (choice_.nbdkit) rc = 0;
        }
        if (rc != 0 && result == 0) result = rc;
    }
    pids_.clear();
    return result;
}

void Daemon::restart() {
    if (!pids_.empty()) stop();
    start();
}

bool Daemon::running() {
    for (pid_t pid : pids_) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            std::erase(pids_, pid);
            return false;
        }
    }
    return !pids_.empty();
}

const std::string& Daemon::socket_path(const std::string& export_name) const {
    if (!choice_.nbdkit) return socket_;
    for (std::size_t i = 0; i < spec_.exports.size(); ++i)
        if (spec_.exports[i].name == export_name) return export_sockets_[i];
    return export_sockets_.at(0);
}

std::string Daemon::uri(const std::string& export_name) const {
    return "nbd+unix:///" + export_name + "?socket=" + socket_path(export_name);
}

std::string Daemon::tcp_uri(const std::string& export_name) const {
    return "nbd://127.0.0.1:" + std::to_string(port_) + "/" + export_name;
}

std::string Daemon::log() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string Daemon::device_path(const std::string& device) const {
    for (const auto& d : spec_.devices)
        if (d.name == device) return d.path;
    throw std::runtime_error("no device " + device);
}

}   // namespace nbdsched::testlib
