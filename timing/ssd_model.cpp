#include "timing/ssd_model.hpp"

#include <algorithm>
#include <cmath>

namespace nbdsched::timing {

SsdParams ssd_defaults() { return SsdParams{}; }

// An NVMe SSD on PCIe 3.0 x4 (3.94 GB/s of link after 128b/130b coding):
// bandwidth 3 GiB/s = 3.22 GB/s, the class of such drives' data sheets
// (3.2-3.5 GB/s sequential read); 32 channels and 80 us reads give 400k IOPS
// at depth, and the 256-deep queue stands for NVMe's many deep queues. The
// latencies and channels are not one data sheet's.
SsdParams nvme_defaults() {
    SsdParams p;
    p.name = "nvme";
    p.read_latency = Nanos{80'000};
    p.write_latency = Nanos{20'000};
    p.channels = 32;
    p.queue_depth = 256;
    p.bandwidth = 3.0 * 1024 * 1024 * 1024;   // 3 GiB/s = 3.22 GB/s
    p.max_io = 512 * 1024;
    return p;
}

std::string read_ssd_params(const Params& params, SsdParams& p) {
    ParamReader r(p.name, params);
    p.read_latency = r.duration("read_latency", p.read_latency);
    p.write_latency = r.duration("write_latency", p.write_latency);
    p.channels = r.count("channels", p.channels, 1, 4096);
    p.queue_depth = r.count("queue_depth", p.queue_depth, 1, 65536);
    p.bandwidth = r.rate("bandwidth", p.bandwidth);
    p.max_io = std::uint32_t(r.size("max_io", p.max_io, max_io_cap));
    if (r.has("optimal_io"))
        p.optimal_io = std::uint32_t(r.size("optimal_io", 0, max_io_cap));
    if (p.max_io % 512 != 0) r.fail("max_io must be a multiple of 512");
    return r.finish();
}

SsdModel::SsdModel(const SsdParams& params) : p_(params), channel_free_(params.channels, Time{}) {}

Time SsdModel::submit(const Io& io, Time now) {
    if (io.op == Op::flush) return now;
    auto channel = std::min_element(channel_free_.begin(), channel_free_.end());
    Time start = std::max(now, *channel);
    Time media_done = start + (io.op == Op::read ? p_.read_latency : p_.write_latency);
    *channel = media_done;
    if (io.op != Op::read && io.op != Op::write) return media_done;
    Nanos transfer{std::int64_t(std::llround(double(io.length) * 1e9 / p_.bandwidth))};
    link_free_ = std::max(media_done, link_free_) + transfer;
    return link_free_;
}

}   // namespace nbdsched::timing
