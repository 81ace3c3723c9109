#include "daemon_proc.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <spawn.h>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace nbdsched::reliability {

namespace {

using namespace std::chrono_literals;

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

} // namespace

long rss_kib(pid_t pid) { return status_field(pid, "VmRSS:"); }
long peak_rss_kib(pid_t pid) { return status_field(pid, "VmHWM:"); }

std::string skip_reason() {
    const char* exe = std::getenv("NBDSCHED");
    if (!exe || !*exe) return "the nbdsched executable is not built (NBDSCHED unset)";
    if (access(exe, X_OK) != 0) return std::string("not executable: ") + exe;
    return "";
}

DaemonProc::DaemonProc(const std::string& body)
    : config_(dir_.file("nbdsched.yaml")), log_(dir_.file("daemon.log")), socket_(dir_.file("nbd.sock")) {
    std::ofstream f(config_);
    f << "listen:\n  - unix: \"" << socket_ << "\"\n" << body;
}

DaemonProc::~DaemonProc() {
    if (pid_ > 0) stop(SIGKILL);
}

void DaemonProc::start() {
    if (auto why = skip_reason(); !why.empty()) throw std::runtime_error(why);
    unlink(socket_.c_str());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::string exe = std::getenv("NBDSCHED");
    std::vector<char*> argv = {exe.data(), const_cast<char*>("--config"), config_.data(), nullptr};
    int rc = posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("cannot start " + exe + ": " + std::strerror(rc));
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
        if (int fd = itest::connect_unix(socket_); fd >= 0) {
            close(fd);
            return;
        }
        if (!running()) throw std::runtime_error("the daemon exited at start:\n" + log());
        if (std::chrono::steady_clock::now() > deadline) {
            stop(SIGKILL);
            throw std::runtime_error("the daemon is not ready after 60 s:\n" + log());
        }
        std::this_thread::sleep_for(10ms);
    }
}

int DaemonProc::stop(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) break;
        if (r < 0 && errno != EINTR) {
            pid_ = -1;
            return -1;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid_, SIGKILL);
            waitpid(pid_, &status, 0);
            pid_ = -1;
            return -1;
        }
        std::this_thread::sleep_for(5ms);
    }
    pid_ = -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
}

bool DaemonProc::running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
    }
    return true;
}

std::string DaemonProc::uri(const std::string& export_name) const {
    return "nbd+unix:///" + export_name + "?socket=" + socket_;
}

std::string DaemonProc::log() const {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

} // namespace nbdsched::reliability
