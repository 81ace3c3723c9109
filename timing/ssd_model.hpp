// A flash device: K internal channels working in parallel, an NCQ-like
// device queue, and one host link that caps bandwidth.
//
//   media:  the request takes the channel that frees first and holds it for
//           read_latency / write_latency (fixed per op, independent of offset:
//           no seeks, so the order requests arrive in does not matter)
//   link:   then its bytes cross the host link at `bandwidth`, one transfer
//           at a time in submission order (the ceiling for large I/O)
//
// Small random I/O is bounded by channels / latency, large I/O by bandwidth,
// and a single outstanding request sees latency + transfer. Flush costs
// nothing; trim and write-zeroes take a write's media time and no transfer.
// Simplification: the link is reserved in submission order, so a request that
// finishes its media time early may queue behind an earlier, slower one.
#pragma once

#include <vector>

#include "timing/device_model.hpp"
#include "timing/params.hpp"

namespace nbdsched::timing {

struct SsdParams {
    std::string name = "ssd";
    Nanos read_latency{100'000};   // 100 us: SATA SSD 4k QD1 ~10k IOPS
    Nanos write_latency{60'000};
    unsigned channels = 8;                    // ~80k 4k random read IOPS at depth >= 8
    unsigned queue_depth = 32;                // SATA NCQ
    double bandwidth = 530.0 * 1024 * 1024;   // bytes/s, SATA 6 Gb/s link
    std::uint32_t max_io = 512 * 1024;
    std::uint32_t optimal_io = 0;
};

SsdParams ssd_defaults();
SsdParams nvme_defaults();
// Reads overrides into `out` over its current values; returns an error or empty.
std::string read_ssd_params(const Params& params, SsdParams& out);

class SsdModel final : public DeviceModel {
public:
    explicit SsdModel(const SsdParams& params);

    std::string_view name() const override { return p_.name; }
    bool rotational() const override { return false; }
    unsigned queue_depth() const override { return p_.queue_depth; }
    std::uint32_t max_io_bytes() const override { return p_.max_io; }
    std::uint32_t optimal_io_bytes() const override { return p_.optimal_io; }
    Time submit(const Io& io, Time now) override;

private:
    SsdParams p_;
    std::vector<Time> channel_free_;   // when each channel is next idle
    Time link_free_{};
};

}   // namespace nbdsched::timing
