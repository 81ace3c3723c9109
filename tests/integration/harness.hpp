// Starts the real daemon for an integration test: writes a temporary config,
// runs the executable in the foreground with stderr captured to a file, waits
// until its sockets accept connections, and stops it with SIGTERM (exit 0
// required). The executable comes from the environment (set by meson):
//   NBDSCHED=<path>        the nbdsched executable (the normal case)
//   NBDSCHED_ITEST_NBDKIT=1  develop the tests against nbdkit instead
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

namespace nbdsched::itest {

struct DeviceSpec {
    std::string name;
    std::string backend = "ram";   // ram | file
    std::uint64_t size = 64ull << 20;
    std::string path;              // file: empty = <tempdir>/<name>.img
    std::string rotational;        // "" (default) | auto | true | false
    std::string yaml;              // more keys of the device, each line "    key: value\n"
};

struct ExportSpec {
    std::string name;
    std::string device;
    bool readonly = false;
    std::string description;
    std::uint64_t offset = 0;      // window into the device (nbdsched only)
    std::uint64_t size = 0;        // 0 = the rest of the device
};

DeviceSpec device(std::string name, std::string backend, std::uint64_t size);
ExportSpec export_of(std::string name, std::string device, bool readonly = false,
                     std::string description = "");

struct ServerSpec {
    std::vector<DeviceSpec> devices;
    std::vector<ExportSpec> exports;
    bool tcp = true;               // also listen on a free 127.0.0.1 port
};

// One RAM device "d0" (64 MiB) exported read-write as "default" and read-only
// as "ro"; the shape most tests need.
ServerSpec standard_spec();

// Which server runs the tests; empty reason = available.
struct ServerChoice {
    bool nbdkit = false;
    std::string exe;
    std::string skip_reason;
};
ServerChoice server_choice();
// True when the tests run on the nbdkit stand-in (development only).
bool nbdkit_mode();

// A private temporary directory, removed (recursively) when destroyed.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
private:
    std::string path_;
};

class Daemon {
public:
    // Starts the server and waits until it accepts connections; throws
    // std::runtime_error (with the daemon's log) when it does not.
    explicit Daemon(ServerSpec spec);
    ~Daemon();   // stops it if still running (without throwing)
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // SIGTERM (or SIGINT), wait (generous timeout for hangs), return the exit status
    // (0..255 for exit codes, 128+sig when killed, -1 on timeout).
    int stop(int signal = SIGTERM);
    // Starts it again with the same config, sockets and files.
    void restart();
    bool running();
    // The daemon's process id (the first one in nbdkit mode); -1 if stopped.
    pid_t pid() const { return pids_.empty() ? -1 : pids_.front(); }

    const std::string& socket_path(const std::string& export_name = "default") const;
    std::uint16_t tcp_port() const { return port_; }
    std::string uri(const std::string& export_name = "default") const;
    std::string tcp_uri(const std::string& export_name = "default") const;
    std::string log() const;
    const std::string& config_path() const { return config_path_; }
    const TempDir& dir() const { return dir_; }
    // Path of a device's backing file (file backend).
    std::string device_path(const std::string& device) const;

private:
    void start();
    void write_config() const;
    void start_nbdkit();
    void wait_ready();

    ServerChoice choice_;
    ServerSpec spec_;
    TempDir dir_;
    std::string config_path_;
    std::string log_path_;
    std::string socket_;
    std::uint16_t port_ = 0;
    std::vector<pid_t> pids_;                  // nbdkit: one per export
    std::vector<std::string> export_sockets_;  // nbdkit: parallel to spec_.exports
};

// Records a daemon's log so the test listener can print it if the test failed.
void remember_log(const std::string& text);
// Returns and forgets the logs remembered so far.
std::vector<std::string> take_logs();

// Connects to a unix socket or 127.0.0.1:port; -1 when refused.
int connect_unix(const std::string& path);
int connect_tcp(std::uint16_t port);
std::uint16_t free_tcp_port();

} // namespace nbdsched::itest
