#include "timing/hdd_model.hpp"

#include <algorithm>
#include <cmath>

namespace nbdsched::timing {
namespace {

// Mean of sqrt(|u-v|) and of |u-v| for u, v uniform on [0, 1].
constexpr double mean_sqrt = 8.0 / 15.0;
constexpr double mean_lin = 1.0 / 3.0;

struct SeekFit {
    double a, b;
};

// Solves a + b = full - settle, mean_sqrt*a + mean_lin*b = avg - settle.
SeekFit fit_seek(const HddParams& p) {
    double span = double((p.full_stroke_seek - p.settle).count());
    double mean = double((p.avg_seek - p.settle).count());
    double a = (mean - mean_lin * span) / (mean_sqrt - mean_lin);
    return {a, span - a};
}

}   // namespace

std::string read_hdd_params(const Params& params, HddParams& p) {
    ParamReader r("hdd", params);
    p.rpm = r.count("rpm", p.rpm, 1000, 30000);
    p.settle = r.duration("settle", p.settle);
    p.avg_seek = r.duration("avg_seek", p.avg_seek);
    p.full_stroke_seek = r.duration("full_stroke_seek", p.full_stroke_seek);
    // Only one of avg_seek / full_stroke_seek given: keep the default curve's
    // shape (full - settle = 2.125 x (avg - settle)) so "avg_seek: 8.5ms" alone works.
    constexpr double shape = 8.5 / 4.0;
    if (r.has("avg_seek") && !r.has("full_stroke_seek"))
        p.full_stroke_seek = p.settle + Nanos{std::int64_t(double((p.avg_seek - p.settle).count()) * shape)};
    if (!r.has("avg_seek") && r.has("full_stroke_seek"))
        p.avg_seek = p.settle + Nanos{std::int64_t(double((p.full_stroke_seek - p.settle).count()) / shape)};
    p.transfer_rate = r.rate("transfer_rate", p.transfer_rate);
    p.max_io = std::uint32_t(r.size("max_io", p.max_io, max_io_cap));
    if (r.has("optimal_io"))
        p.optimal_io = std::uint32_t(r.size("optimal_io", 0, max_io_cap));
    p.capacity = r.size("capacity", p.capacity);
    p.queue_depth = r.count("queue_depth", p.queue_depth, 1, 4096);
    if (p.max_io % 512 != 0) r.fail("max_io must be a multiple of 512");
    if (!(p.settle <= p.avg_seek && p.avg_seek <= p.full_stroke_seek))
        r.fail("need settle <= avg_seek <= full_stroke_seek");
    else {
        // Monotonic seek curve: derivative a/(2 sqrt x) + b >= 0 on (0, 1] and a >= 0.
        SeekFit f = fit_seek(p);
        if (f.a < 0 || f.a / 2 + f.b < 0)
            r.fail("avg_seek is too far from the middle of settle..full_stroke_seek "
                   "for a monotonic seek curve");
    }
    return r.finish();
}

HddModel::HddModel(const HddParams& params) : p_(params) {
    SeekFit f = fit_seek(p_);
    sqrt_coef_ = f.a;
    lin_coef_ = f.b;
}

Nanos HddModel::seek_time(std::uint64_t distance) const {
    if (distance == 0) return Nanos{0};
    double x = std::min(1.0, double(distance) / double(p_.capacity));
    double ns = double(p_.settle.count()) + sqrt_coef_ * std::sqrt(x) + lin_coef_ * x;
    return Nanos{std::int64_t(std::llround(ns))};
}

Nanos HddModel::rotational_latency() const {
    return Nanos{std::int64_t(std::llround(60e9 / double(p_.rpm) / 2))};
}

Nanos HddModel::transfer_time(std::uint64_t bytes) const {
    return Nanos{std::int64_t(std::llround(double(bytes) * 1e9 / p_.transfer_rate))};
}

Nanos HddModel::service_time(const Io& io, std::uint64_t head) const {
    if (io.op == Op::flush || io.op == Op::trim) return Nanos{0};
    Nanos transfer = transfer_time(io.length);
    if (io.offset == head) return transfer;
    std::uint64_t distance = io.offset > head ? io.offset - head : head - io.offset;
    return seek_time(distance) + rotational_latency() + transfer;
}

Time HddModel::submit(const Io& io, Time now) {
    Time start = std::max(now, busy_until_);
    busy_until_ = start + service_time(io, head_);
    if (io.op != Op::flush && io.op != Op::trim) head_ = io.offset + io.length;
    return busy_until_;
}

}   // namespace nbdsched::timing
