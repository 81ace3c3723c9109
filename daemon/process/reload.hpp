// SIGHUP reload, the acting half: re-read the config file the daemon was
// started with, plan (reload_plan.hpp) and apply what can change live, with
// sd_notify RELOADING=1 ... READY=1 around it. A file that does not load, or
// a change that cannot apply live, leaves everything as it was and says why
// in the log.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <set>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "daemon/control/state.hpp"
#include "daemon/process/reload_plan.hpp"
#include "daemon/session/tls_context.hpp"

namespace nbdsched::daemon {

// Adjusts a freshly loaded config the way main adjusted the first one
// (command line listen overrides); false and `error` to refuse it.
using ConfigAdjust = std::function<bool(config::Config&, std::string&)>;

// applied: the new config is in force; messages: what changed, or each
// reason it did not load or cannot apply (also logged). `tls`: the
// listeners' credentials, read again (null: no tls: section); a TLS file
// that does not load refuses the whole reload.
control::ReloadResult reload_config(control::DaemonState& state, const ConfigAdjust& adjust, TlsContext* tls);

// Applies a plan whose ok() is true and makes `next` the config in force.
// Device sizes are SizeRefresh's. A group's weight and its QoS settings
// changed with ctl are each kept unless `next` changes that setting; returns
// a line for each such change, kept or not (also logged).
std::vector<std::string> apply_plan(control::DaemonState& state, const ReloadPlan& plan, config::Config next);

// After a reload, devices whose size comes from their storage (an RBD image
// after `rbd resize`, a file or block device without size:) are measured
// again, and exports follow: new connections see the new size in the
// handshake, open ones keep the size they negotiated (NBD has no resize
// notice); a window that no longer fits is cut to the device's end.
//
// A blocking backend's size is read on the I/O thread pool, never on an
// event loop: librbd's rbd_get_size first refreshes the image from the
// cluster when its header changed (a resize, a snapshot, a watch lost and
// re-established: ImageState::refresh_if_required), and with the OSDs gone
// that waits for osd_op_timeout, forever without one. On a loop (a reload
// runs with every loop paused) that stalled every device. Each result is
// applied on loop 0 when it comes; a device still being read from an
// earlier reload is not asked again. The pool is joined before devices go,
// within drain_timeout (Server::wait_for_storage names what did not end).
class SizeRefresh {
public:
    SizeRefresh(boost::asio::io_context& loop0, boost::asio::thread_pool& pool, control::DaemonState& state)
        : loop0_(loop0), pool_(pool), state_(state) {}
    // Loop 0's thread, outside exclusive().
    void start();
    // Devices whose size a pool thread is reading now (any thread).
    std::vector<std::string> reading() const;

private:
    void finish(Device* device, std::uint64_t before, int err);

    boost::asio::io_context& loop0_;
    boost::asio::thread_pool& pool_;
    control::DaemonState& state_;
    std::set<Device*> reading_;   // devices whose size a pool thread is reading, until loop 0 hears
    mutable std::mutex in_pool_mutex_;
    std::set<std::string> in_pool_;   // until the pool thread is back: what a stuck exit names
};

}   // namespace nbdsched::daemon
