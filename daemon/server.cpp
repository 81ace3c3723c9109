#include "daemon/server.hpp"

#include <boost/asio/post.hpp>
#include <csignal>
#include <spdlog/spdlog.h>
#include <system_error>

#include "daemon/setup.hpp"

namespace nbdsched::daemon {

Server::Server(const config::Config& config, ServerOptions options)
    : config_(config),
      options_(std::move(options)),
      io_(1),
      pool_(options_.io_threads ? options_.io_threads : 1),
      signals_(io_),
      drain_timer_(io_) {}

Server::~Server() {
    // Pool tasks refer to devices and requests: let them end first.
    pool_.stop();
    pool_.join();
    connections_.clear();
}

std::unique_ptr<Server> Server::create(const config::Config& config, ServerOptions options, std::string& error) {
    std::unique_ptr<Server> s(new Server(config, std::move(options)));
    for (const auto& dev : s->config_.devices) {
        auto device = build_device(s->io_, s->pool_, dev, s->config_, error);
        if (!device) return nullptr;
        s->devices_.push_back(std::move(device));
    }
    if (!build_exports(s->config_, s->devices_, s->exports_, error)) return nullptr;
    s->context_.exports = &s->exports_;
    s->context_.limits = s->config_.limits;
    s->context_.on_finished = [raw = s.get()](Connection& c) {
        raw->connections_.erase(c.id());
        raw->check_drained();
    };
    if (!s->options_.activated_fds.empty()) {
        for (int fd : s->options_.activated_fds) {
            auto l = Listener::adopt(s->io_, fd, error);
            if (!l) return nullptr;
            s->listeners_.push_back(std::move(l));
        }
    } else {
        for (const auto& where : s->config_.listen) {
            auto l = Listener::open(s->io_, where, error);
            if (!l) return nullptr;
            s->listeners_.push_back(std::move(l));
        }
    }
    if (s->listeners_.empty()) {
        error = "nothing to listen on";
        return nullptr;
    }
    return s;
}

void Server::accept(Socket socket, std::string peer) {
    if (stopping_) return;   // the socket closes as it goes out of scope
    if (connections_.size() >= config_.limits.max_connections) {
        spdlog::warn("refusing connection from {}: max_connections ({}) reached", peer,
                     config_.limits.max_connections);
        return;
    }
    auto id = next_id_++;
    auto c = std::make_shared<Connection>(std::move(socket), id, std::move(peer), context_);
    connections_.emplace(id, c);
    c->start();
}

int Server::run() {
    for (auto& l : listeners_) {
        l->start([this](Socket s, std::string peer) { accept(std::move(s), std::move(peer)); });
        spdlog::info("listening on {}", l->describe());
    }
    if (options_.handle_signals) {
        signals_.add(SIGINT);
        signals_.add(SIGTERM);
        signals_.add(SIGHUP);
        wait_signal();
    }
    spdlog::info("nbdsched: ready");
    if (options_.on_ready) options_.on_ready();
    io_.run();
    // Requests still on the pool (a forced shutdown) finish before we go.
    pool_.join();
    spdlog::info("nbdsched: stopped");
    return exit_code_;
}

void Server::stop() {
    boost::asio::post(io_, [this] { begin_shutdown("stop requested"); });
}

void Server::wait_signal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP) {
            spdlog::info("SIGHUP: reload not implemented yet");
        } else if (stopping_) {
            spdlog::warn("{} again: stopping without waiting for in-flight requests", sig == SIGINT ? "SIGINT" : "SIGTERM");
            finish_shutdown();
            return;
        } else {
            begin_shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");
        }
        wait_signal();
    });
}

void Server::begin_shutdown(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;
    spdlog::info("{}: shutting down ({} connection(s) open)", why, connections_.size());
    if (options_.on_stopping) options_.on_stopping();
    for (auto& l : listeners_) l->close();
    // Copy: a connection may finish (and leave the map) inside shutdown().
    auto open = connections_;
    for (auto& [id, c] : open) c->shutdown();
    drain_timer_.expires_after(options_.drain_timeout);
    drain_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        spdlog::warn("{} connection(s) still busy after {} ms; closing them", connections_.size(),
                     options_.drain_timeout.count());
        finish_shutdown();
    });
    check_drained();
}

void Server::check_drained() {
    if (!stopping_ || stopped_ || !connections_.empty()) return;
    for (auto& d : devices_)
        if (d->outstanding() != 0) return;
    finish_shutdown();
}

void Server::finish_shutdown() {
    if (stopped_) return;
    stopped_ = true;
    drain_timer_.cancel();
    auto open = connections_;
    for (auto& [id, c] : open) c->close("server stopping");
    for (auto& d : devices_) {
        if (int err = d->flush_now(); err != 0) {
            spdlog::error("device {}: flush at shutdown failed: {}", d->name(), std::system_category().message(err));
            exit_code_ = 1;
        }
    }
    boost::system::error_code ignored;
    signals_.cancel(ignored);
    io_.stop();
}

} // namespace nbdsched::daemon
