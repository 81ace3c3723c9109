// The Prometheus endpoint (config `metrics: HOST:PORT`, off by default),
// served by prometheus-cpp's exposer on its own threads. The counters live
// on the event loop threads, so loop 0 copies their numbers every second
// (control/snapshot.hpp; the other loops pause for the copy only) and a
// scrape builds its answer from the latest copy on the exposer's thread: a
// scrape never waits for a loop, and shutting the exposer down can never
// deadlock against it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <string>

#include "daemon/control/state.hpp"

namespace prometheus {
class Exposer;
}

namespace nbdsched::daemon::metrics {

class Snapshot;

class Endpoint {
public:
    // nullptr and `error` when the address cannot be bound.
    static std::unique_ptr<Endpoint> open(boost::asio::io_context& io, const std::string& address,
                                          const control::DaemonState& state, std::string& error);
    ~Endpoint();

    void start();
    void close();
    const std::string& address() const { return address_; }

private:
    Endpoint(boost::asio::io_context& io, std::string address, const control::DaemonState& state);
    void publish();

    boost::asio::steady_timer timer_;
    std::string address_;
    const control::DaemonState& state_;
    std::shared_ptr<Snapshot> snapshot_;
    std::unique_ptr<prometheus::Exposer> exposer_;
    bool closed_ = false;
};

}   // namespace nbdsched::daemon::metrics
