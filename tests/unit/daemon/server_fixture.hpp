// Runs a real daemon::Server on its own thread, listening on a unix socket
// in a private temporary directory, for tests that talk to it over the wire.
#pragma once

#include <boost/asio/post.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "config/config.hpp"
#include "daemon/process/server.hpp"
#include "temp_dir.hpp"

namespace nbdsched::testing {

inline config::Device ram_device(const std::string& name, std::uint64_t size) {
    config::Device d;
    d.name = name;
    d.backend = config::BackendKind::ram;
    d.size = size;
    return d;
}

inline config::Export make_export(const std::string& name, const std::string& device, bool readonly = false) {
    config::Export e;
    e.name = name;
    e.device = device;
    e.readonly = readonly;
    return e;
}

// One 16 MiB RAM device exported read-write as "default" and read-only as "ro".
inline config::Config standard_config() {
    config::Config c;
    c.source = "<test>";
    c.devices.push_back(ram_device("d0", 16u << 20));
    c.exports.push_back(make_export("default", "d0"));
    c.exports.push_back(make_export("ro", "d0", true));
    config::Group g;
    g.name = "default";
    c.groups.push_back(g);
    return c;
}

class TestServer {
public:
    explicit TestServer(config::Config config, daemon::ServerOptions options = {}) {
        socket_ = dir_.file("s.sock");
        config::Listen l;
        l.kind = config::Listen::Kind::unix_socket;
        l.path = socket_;
        config.listen = {l};
        options.handle_signals = false;
        // Returns once the server is ready (every loop running, listening).
        auto ready = std::make_shared<std::promise<void>>();
        auto ready_future = ready->get_future();
        options.on_ready = [ready, then = options.on_ready] {
            if (then) then();
            ready->set_value();
        };
        std::string error;
        server_ = daemon::Server::create(config, options, error);
        if (!server_) throw std::runtime_error("server: " + error);
        thread_ = std::thread([this] { exit_code_ = server_->run(); });
        if (ready_future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
            stop();
            throw std::runtime_error("server: not ready after 30 s");
        }
    }
    ~TestServer() { stop(); }

    // Graceful stop; returns run()'s exit code.
    int stop() {
        if (thread_.joinable()) {
            server_->stop();
            thread_.join();
        }
        return exit_code_;
    }
    const std::string& socket() const { return socket_; }
    const std::string& dir() const { return dir_.path(); }

    // Runs `f` on the server's loop 0 with every other loop paused (where it
    // may read any device, as the control socket does) and waits for it.
    void on_loop(const std::function<void(daemon::control::DaemonState&)>& f) {
        std::promise<void> done;
        boost::asio::post(server_->io(), [&] {
            server_->exclusive([&] { f(server_->state()); });
            done.set_value();
        });
        done.get_future().wait();
    }

private:
    testlib::TempDir dir_;
    std::string socket_;
    std::unique_ptr<daemon::Server> server_;
    std::thread thread_;
    int exit_code_ = -1;
};

}   // namespace nbdsched::testing
