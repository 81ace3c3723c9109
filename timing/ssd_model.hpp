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

// The ssd defaults: a SATA 6 Gb/s SSD. Data sheets give MB/s in decimal
// units (1 MB/s = 10^6 bytes/s); nbdsched's rates are binary (MiB/s):
// - read_latency 100 us: 4 KiB random read at QD1 10,000 IOPS (Samsung 850 EVO
//   data sheet).
// - channels 8 x 100 us: 80k IOPS at depth; data sheets give 94k-98k at QD32
//   (Kingston DC600M 94k read).
// - bandwidth 530 MiB/s = 555.7 MB/s: inside the 540-560 MB/s that SATA SSD
//   data sheets give for sequential reads (850 EVO 540 MB/s, DC600M 560 MB/s),
//   below the link's 600 MB/s (6 Gb/s with 8b/10b coding). Not 530 MB/s
//   (505 MiB/s): that is a sequential *write* figure (DC600M 530 MB/s).
// - write_latency 60 us: no data sheet (they give write IOPS into the drive's
//   cache, not media time); it only needs to be below read_latency.
// nvme_defaults() (ssd_model.cpp) names its own.
struct SsdParams {
    std::string name = "ssd";
    Nanos read_latency{100'000};   // 100 us: SATA SSD 4k QD1 ~10k IOPS
    Nanos write_latency{60'000};
    unsigned channels = 8;                    // ~80k 4k random read IOPS at depth >= 8
    unsigned queue_depth = 32;                // SATA NCQ
    double bandwidth = 530.0 * 1024 * 1024;   // bytes/s: 530 MiB/s = 555.7 MB/s, a SATA SSD's sequential read
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
