// The device's metadata requests, beside the scheduler: NBD_CMD_BLOCK_STATUS
// asks the backend for its allocation map, NBD_CMD_CACHE fills the
// read-ahead cache (its prefetches do go through the scheduler, charged to
// the asking queue) or passes the hint to the backend. Neither moves data
// for the client, so neither waits its turn behind data requests; a
// blocking backend still answers on the thread pool (lseek and fadvise may
// wait for the disk's metadata).
#include <boost/asio/post.hpp>
#include <cerrno>
#include <vector>

#include "daemon/device/device.hpp"
#include "nbd/block_status.hpp"

namespace nbdsched::daemon {

int Device::run_metadata(backend::Backend& b, IoRequest& r) {
    if (r.header.type == static_cast<std::uint16_t>(nbd::Command::cache)) return b.cache(r.offset, r.length);
    const bool req_one = (r.header.flags & nbd::cmd_flag_req_one) != 0;
    const std::size_t max = req_one ? 1 : max_block_status_extents;
    backend::ExtentList list(max);
    if (int err = b.extents(r.offset, r.length, list)) return err;
    std::vector<nbd::BlockExtent> extents;
    extents.reserve(list.items().size());
    for (const auto& e : list.items())
        extents.push_back({e.length, e.hole ? nbd::state_hole | nbd::state_zero : 0u});
    const std::span<std::uint8_t> out(reinterpret_cast<std::uint8_t*>(r.buffer.data()),
                                      max * nbd::block_descriptor_size);
    const auto n = nbd::encode_block_descriptors(out, extents, static_cast<std::uint32_t>(r.length), req_one);
    if (n == 0) return EIO;   // the backend described nothing: no valid reply
    r.data_bytes = static_cast<std::uint32_t>(n);
    return 0;
}

void Device::submit_metadata(IoRequest& r) {
    auto held = lock_.hold();
    r.backend_errno = 0;
    r.data_bytes = 0;
    const bool cache = r.header.type == static_cast<std::uint16_t>(nbd::Command::cache);
    // With read-ahead the cache to fill is ours; a timed device without it
    // has no cache to fill (its backend's page cache is not what it models).
    if (cache && (read_ahead_ || model_)) {
        if (read_ahead_) read_ahead_->cache(r);
        return tell(r);
    }
    if (!blocking_) {
        r.backend_errno = run_metadata(*backend_, r);
        return tell(r);
    }
    boost::asio::post(*pool_, [this, &r] {
        r.backend_errno = run_metadata(*backend_, r);
        boost::asio::post(r.home ? *r.home : io_, [&r] { r.sink->request_done(r); });
    });
}

}   // namespace nbdsched::daemon
