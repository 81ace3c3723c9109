#include "sched/bfq/device_model.hpp"
#include "sched/bfq/constants.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {
namespace {

using namespace std::chrono_literals;

constexpr unsigned kHwQueueThreshold = 3;   // BFQ_HW_QUEUE_THRESHOLD
constexpr unsigned kHwQueueSamples = 32;    // BFQ_HW_QUEUE_SAMPLES
constexpr std::uint64_t kRateMinSamples = 32;
constexpr Nanos kRateMinInterval = 300ms;
constexpr Nanos kRateRefInterval = 1s;
// ref_rate[] in sectors/usec << 16: {rotational, non-rotational}; the
// initial estimate is 2/3 of it, as bfq_init_queue does.
constexpr std::uint64_t kRefRate[2] = {14000, 33000};

}   // namespace

[[gnu::hot]] void HwTagDetector::sample(unsigned rq_in_driver, std::size_t queued, bool in_service_small) {
    max_rq_in_driver_ = std::max(max_rq_in_driver_, rq_in_driver);
    if (hw_tag_ == 1) return;
    if (rq_in_driver + queued <= kHwQueueThreshold) return;
    if (in_service_small && rq_in_driver < kHwQueueThreshold) return;
    if (samples_++ < kHwQueueSamples) return;
    hw_tag_ = max_rq_in_driver_ > kHwQueueThreshold ? 1 : 0;
    max_rq_in_driver_ = 0;
    samples_ = 0;
}

PeakRateEstimator::PeakRateEstimator(bool rotational)
    : peak_rate_(kRefRate[rotational ? 0 : 1] * 2 / 3) {}

std::uint64_t PeakRateEstimator::max_budget(Nanos timeout) const {
    std::uint64_t us = std::uint64_t(timeout.count()) / 1000;
    return std::max<std::uint64_t>(1, (peak_rate_ * us) >> kRateShift);
}

void PeakRateEstimator::reset(bool have_rq, std::uint64_t sectors, Time now) {
    if (have_rq) {
        last_dispatch_ = first_dispatch_ = now;
        samples_ = 1;
        sequential_samples_ = 0;
        tot_sectors_ = last_rq_max_size_ = sectors;
    } else {
        samples_ = 0;
    }
    delta_from_first_ = 0ns;
}

bool PeakRateEstimator::update_and_reset(bool have_rq, std::uint64_t sectors, Time now) {
    bool updated = false;
    if (samples_ >= kRateMinSamples && delta_from_first_ >= kRateMinInterval) {
        // Extend the interval to the last completion if that came later.
        delta_from_first_ = std::max(delta_from_first_, last_completion_ - first_dispatch_);
        std::uint64_t us = std::max<std::uint64_t>(1, delta_from_first_.count() / 1000);
        std::uint64_t rate = (tot_sectors_ << kRateShift) / us;
        // Only mostly-sequential intervals may lower the estimate; absurd
        // rates (> 20M sectors/s) are ignored.
        bool mostly_seq = sequential_samples_ >= (3 * samples_) / 4;
        if ((mostly_seq || rate > peak_rate_) && rate <= (20ull << kRateShift)) {
            // Low-pass filter whose gain grows with the sequential share.
            std::uint64_t weight = (9 * sequential_samples_) / samples_;
            std::uint64_t divisor = 10 - weight;
            peak_rate_ = peak_rate_ * (divisor - 1) / divisor + rate / divisor;
            peak_rate_ = std::max<std::uint64_t>(1, peak_rate_);
            updated = true;
        }
    }
    reset(have_rq, sectors, now);
    return updated;
}

[[gnu::hot]] bool PeakRateEstimator::on_dispatch(std::uint64_t sectors, bool seeky, Time now,
                                                 unsigned rq_in_driver) {
    bool updated = false;
    if (samples_ == 0) {
        reset(true, sectors, now);
    } else if (now - last_dispatch_ > 100ms && rq_in_driver == 0) {
        // The device sat idle: this interval says nothing about its peak.
        updated = update_and_reset(true, sectors, now);
    } else {
        ++samples_;
        if ((rq_in_driver > 0 || now - last_completion_ < kMinTt) && !seeky) ++sequential_samples_;
        tot_sectors_ += sectors;
        last_rq_max_size_ = samples_ % 32 ? std::max(last_rq_max_size_, sectors) : sectors;
        delta_from_first_ = now - first_dispatch_;
        if (delta_from_first_ >= kRateRefInterval) updated = update_and_reset(true, sectors, now);
    }
    last_dispatch_ = now;
    return updated;
}

[[gnu::hot]] bool PeakRateEstimator::on_completion(Time now) {
    bool updated = false;
    std::uint64_t delta_us = std::uint64_t((now - last_completion_).count()) / 1000;
    // A completion so late that the request was served at < 1M sectors/s
    // closes the observation interval.
    if (delta_us > std::uint64_t(kMinTt.count()) / 1000 &&
        (last_rq_max_size_ << kRateShift) / delta_us < (1ull << (kRateShift - 10)))
        updated = update_and_reset(false, 0, now);
    last_completion_ = now;
    return updated;
}

}   // namespace nbdsched::sched::bfq
