// What BFQ learns about the device from the request stream: whether it
// queues commands internally (hw_tag, bfq_update_hw_tag) and its peak rate
// (bfq_update_peak_rate / bfq_update_rate_reset), from which the automatic
// max_budget = peak_rate * timeout_sync follows.
#pragma once

#include <cstdint>

#include "sched/request.hpp"

namespace nbdsched::sched::bfq {

class HwTagDetector {
public:
    // On every completion, before the in-driver count drops. `in_service_small`
    // is the kernel's exception: the in-service queue has a short think time
    // but fewer than 3 requests, so BFQ itself keeps the device shallow.
    void sample(unsigned rq_in_driver, std::size_t queued, bool in_service_small);
    // -1 until decided (treated as queueing, like the kernel's int), 0 or 1.
    int value() const { return hw_tag_; }
    bool queueing() const { return hw_tag_ != 0; }

private:
    int hw_tag_ = -1;
    unsigned max_rq_in_driver_ = 0;
    unsigned samples_ = 0;
};

class PeakRateEstimator {
public:
    explicit PeakRateEstimator(bool rotational);

    // `seeky` is BFQ_RQ_SEEKY of this request against the device head.
    // Returns true when the peak rate was updated.
    bool on_dispatch(std::uint64_t sectors, bool seeky, Time now, unsigned rq_in_driver);
    bool on_completion(Time now);

    // Sectors per microsecond << kRateShift.
    std::uint64_t peak_rate() const { return peak_rate_; }
    // bfq_calc_max_budget: sectors the device serves in `timeout` at peak rate.
    std::uint64_t max_budget(Nanos timeout) const;

    static constexpr int kRateShift = 16;

private:
    bool update_and_reset(bool have_rq, std::uint64_t sectors, Time now);
    void reset(bool have_rq, std::uint64_t sectors, Time now);

    std::uint64_t peak_rate_;
    std::uint64_t samples_ = 0;
    std::uint64_t sequential_samples_ = 0;
    std::uint64_t tot_sectors_ = 0;
    std::uint64_t last_rq_max_size_ = 0;
    Time first_dispatch_{};
    Time last_dispatch_{};
    Time last_completion_{};
    Nanos delta_from_first_{};
};

}   // namespace nbdsched::sched::bfq
