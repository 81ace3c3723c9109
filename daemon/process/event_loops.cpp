#include "daemon/process/event_loops.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <mutex>

namespace nbdsched::daemon {

EventLoops::EventLoops(boost::asio::io_context& main, std::size_t count) : main_(main) {
    for (std::size_t i = 1; i < count; ++i) extra_.push_back(std::make_unique<boost::asio::io_context>(1));
    stats_.resize(extra_.size());
    connections_.resize(count);
}

EventLoops::~EventLoops() {
    stop();
}

void EventLoops::start(const config::Limits& limits) {
    if (running_) return;
    running_ = true;
    for (std::size_t i = 0; i < size(); ++i) {
        idle_memory_.push_back(std::make_unique<IdleMemoryRelease>(at(i), IdleMemoryRelease::default_period));
        idle_memory_.back()->start();
    }
    for (std::size_t i = 0; i < extra_.size(); ++i) {
        // Kept running while idle: stop() ends them.
        guards_.push_back(boost::asio::make_work_guard(*extra_[i]));
        threads_.emplace_back([this, i, limits] { run_event_loop(*extra_[i], limits, stats_[i]); });
    }
}

void EventLoops::stop() {
    if (!running_) return;
    running_ = false;
    guards_.clear();
    for (auto& io : extra_) io->stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    // Loop 0's runs on this thread; the others' threads are gone.
    for (auto& release : idle_memory_) release->stop();
    idle_memory_.clear();
}

void EventLoops::exclusive(const std::function<void()>& f) {
    // Without other threads running (before start, after stop) there is
    // nothing to wait for.
    if (exclusive_ || !running_ || extra_.empty()) return f();
    struct Gate {
        std::mutex mutex;
        std::condition_variable cv;
        std::size_t arrived = 0;
        bool open = false;
    };
    auto gate = std::make_shared<Gate>();
    for (auto& io : extra_) {
        boost::asio::post(*io, [gate] {
            std::unique_lock lock(gate->mutex);
            ++gate->arrived;
            gate->cv.notify_all();
            gate->cv.wait(lock, [&] { return gate->open; });
        });
    }
    {
        std::unique_lock lock(gate->mutex);
        gate->cv.wait(lock, [&] { return gate->arrived == extra_.size(); });
    }
    // Opens the gate however `f` ends.
    struct Release {
        Gate& gate;
        bool& flag;
        ~Release() {
            flag = false;
            {
                std::lock_guard lock(gate.mutex);
                gate.open = true;
            }
            gate.cv.notify_all();
        }
    };
    exclusive_ = true;
    Release release{*gate, exclusive_};
    f();
}

LoopStats EventLoops::stats() const {
    LoopStats sum;
    for (const auto& s : stats_) sum += s;
    return sum;
}

std::size_t EventLoops::place(std::size_t home, bool movable) {
    std::size_t best = home < connections_.size() ? home : 0;
    for (std::size_t i = 0; movable && i < connections_.size(); ++i)
        if (connections_[i] < connections_[best]) best = i;
    ++connections_[best];
    return best;
}

void EventLoops::left(std::size_t loop) {
    if (loop < connections_.size() && connections_[loop] > 0) --connections_[loop];
}

std::size_t EventLoops::index_of(const boost::asio::io_context& io) const {
    for (std::size_t i = 0; i < extra_.size(); ++i)
        if (extra_[i].get() == &io) return i + 1;
    return 0;
}

std::size_t event_loop_count(unsigned threads, std::size_t devices, bool tls, bool spread_connections) {
    std::size_t n = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
    if (tls) n = 1;
    if (!spread_connections) n = std::min(n, devices);
    return std::max<std::size_t>(1, n);
}

}   // namespace nbdsched::daemon
