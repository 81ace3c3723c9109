#include "daemon/metrics/endpoint.hpp"

#include <CivetServer.h>
#include <chrono>
#include <civetweb.h>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <spdlog/spdlog.h>

#include "daemon/metrics/families.hpp"

namespace nbdsched::daemon::metrics {

namespace {

// When this process started, in seconds since the epoch: /proc/self/stat's
// starttime (clock ticks after boot) plus /proc/stat's btime. 0 if unknown.
double process_start_time() {
    std::ifstream self("/proc/self/stat");
    std::string text;
    std::getline(self, text);
    auto name_end = text.rfind(')');   // the command name may hold spaces
    if (name_end == std::string::npos) return 0;
    std::istringstream fields(text.substr(name_end + 1));
    std::string field;
    unsigned long long ticks = 0;
    for (int i = 3; i <= 22 && fields >> field; ++i)   // field 3 is the state, 22 starttime
        if (i == 22) ticks = std::strtoull(field.c_str(), nullptr, 10);
    std::ifstream stat("/proc/stat");
    unsigned long long boot = 0;
    for (std::string line; std::getline(stat, line);)
        if (line.rfind("btime ", 0) == 0) boot = std::strtoull(line.c_str() + 6, nullptr, 10);
    const long hz = ::sysconf(_SC_CLK_TCK);
    if (!boot || !ticks || hz <= 0) return 0;
    return static_cast<double>(boot) + static_cast<double>(ticks) / static_cast<double>(hz);
}

}   // namespace

// The latest copy of the numbers. The families are built from it on the
// exposer's thread when a scrape asks, not on the event loop.
class Snapshot : public prometheus::Collectable {
public:
    std::vector<prometheus::MetricFamily> Collect() const override {
        std::shared_ptr<const control::StatsSnapshot> numbers;
        {
            std::lock_guard lock(mutex_);
            numbers = numbers_;
        }
        auto families = numbers ? collect(*numbers) : std::vector<prometheus::MetricFamily>{};
        // The standard name, so a restart shows as a new start time, not only as counters going back to 0.
        prometheus::MetricFamily start{"process_start_time_seconds",
                                       "Start time of the process since unix epoch in seconds.",
                                       prometheus::MetricType::Gauge,
                                       {}};
        start.metric.emplace_back().gauge.value = start_time_;
        families.push_back(std::move(start));
        return families;
    }
    void set(control::StatsSnapshot numbers) {
        auto fresh = std::make_shared<const control::StatsSnapshot>(std::move(numbers));
        std::lock_guard lock(mutex_);
        numbers_.swap(fresh);   // the old one is freed outside the lock, below
    }

private:
    const double start_time_ = process_start_time();
    mutable std::mutex mutex_;
    std::shared_ptr<const control::StatsSnapshot> numbers_;
};

Endpoint::Endpoint(boost::asio::io_context& io, std::string address, const control::DaemonState& state)
    : timer_(io), address_(std::move(address)), state_(state), snapshot_(std::make_shared<Snapshot>()) {}

Endpoint::~Endpoint() {
    close();
}

namespace {

// civetweb gives each connection one worker thread until it has read the
// request, for up to request_timeout_ms (30 s by default). With one worker,
// one client that connects and sends nothing held every scrape back that
// long, three times Prometheus' default scrape_timeout (10 s). A few workers
// keep a scrape answered while some clients are silent, and a short timeout
// frees a silent client's worker soon: a scraper sends its request as soon
// as it has connected, and the reply is a few KiB to a few hundred.
constexpr int k_workers = 8;
constexpr int k_request_timeout_ms = 3000;

// prometheus-cpp's handler answers GET only, and civetweb answered a HEAD
// of /metrics (curl -I, an HTTP health check) 404 Not Found. civetweb asks
// this first about every request: a HEAD of /metrics gets GET's status and
// type, without a length (the GET's body is made, and maybe compressed, by
// the exposer per request); anything else goes on as before.
int answer_head(mg_connection* conn) {
    const mg_request_info* request = mg_get_request_info(conn);
    if (!request || !request->request_method || !request->local_uri) return 0;
    if (std::strcmp(request->request_method, "HEAD") != 0 || std::strcmp(request->local_uri, "/metrics") != 0)
        return 0;
    mg_response_header_start(conn, 200);
    mg_response_header_add(conn, "Content-Type", "text/plain; charset=utf-8", -1);   // what the GET says
    mg_response_header_send(conn);
    return 200;
}

const CivetCallbacks& callbacks() {
    static const CivetCallbacks c = [] {
        CivetCallbacks c;
        c.begin_request = answer_head;
        return c;
    }();
    return c;
}

}   // namespace

std::unique_ptr<Endpoint> Endpoint::open(boost::asio::io_context& io, const std::string& address,
                                         const control::DaemonState& state, std::string& error) {
    std::unique_ptr<Endpoint> e(new Endpoint(io, address, state));
    try {
        std::vector<std::string> options{"listening_ports", address,
                                         "num_threads", std::to_string(k_workers),
                                         "request_timeout_ms", std::to_string(k_request_timeout_ms)};
        e->exposer_ = std::make_unique<prometheus::Exposer>(std::move(options), &callbacks());
    } catch (const std::exception& ex) {
        error = "metrics " + address + ": " + ex.what();
        return nullptr;
    }
    e->exposer_->RegisterCollectable(e->snapshot_);
    return e;
}

void Endpoint::start() {
    spdlog::info("metrics on http://{}/metrics", address_);
    publish();
}

void Endpoint::publish() {
    if (closed_) return;
    snapshot_->set(control::take_snapshot(state_));   // pauses the other loops for the copy only
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) publish();
    });
}

void Endpoint::close() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    exposer_.reset();   // joins the exposer's threads; they never wait for us
}

}   // namespace nbdsched::daemon::metrics
