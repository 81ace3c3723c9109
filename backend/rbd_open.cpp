// Opening an RBD image: the cluster connection, the image and its exclusive
// lock (rbd_backend.hpp has the rules).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <rbd/librbd.h>
#include <utility>
#include <vector>

#include "backend/rbd_backend.hpp"
#include "backend/rbd_handles.hpp"
#include "backend/rbd_image_config.hpp"
#include "common/units.hpp"

namespace nbdsched::backend {

namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

// "client.4235 at 127.0.0.1:0/3123" for each owner of the image's lock (the
// owner, which librbd names by address, with the client id of its watch) in
// `out`; how many owners (0: the lock is free), or -errno.
int holders_of(rbd_image_t image, std::string& out) {
    rbd_lock_mode_t mode;
    std::vector<char*> owners(8);
    std::size_t count = owners.size();
    int r = librbd().rbd_lock_get_owners(image, &mode, owners.data(), &count);
    if (r == -ENOENT) return 0;
    if (r < 0) return r;
    std::vector<rbd_image_watcher_t> watchers(64);
    std::size_t watcher_count = watchers.size();
    if (librbd().rbd_watchers_list(image, watchers.data(), &watcher_count) < 0) watcher_count = 0;
    out.clear();
    for (std::size_t i = 0; i < count; ++i) {
        std::string owner = owners[i];
        for (std::size_t w = 0; w < watcher_count; ++w)
            if (owner == watchers[w].addr) owner = "client." + std::to_string(watchers[w].id) + " at " + owner;
        out += (out.empty() ? "" : ", ") + owner;
    }
    if (watcher_count) librbd().rbd_watchers_list_cleanup(watchers.data(), watcher_count);
    librbd().rbd_lock_get_owners_cleanup(owners.data(), count);
    return static_cast<int>(count);
}

std::string lock_holders(rbd_image_t image) {
    std::string out;
    return holders_of(image, out) > 0 ? out : "an unknown client";
}

// How long a holder that answers takes to refuse the lock: a few round
// trips to the cluster (milliseconds; seconds on a loaded host). An acquire
// still running after this waits for a holder that does not answer.
constexpr std::chrono::seconds k_refusal_time{2};

std::string seconds_text(std::chrono::milliseconds t) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(t.count()) / 1000.0);
    return text;
}

// Locks on the image's header that librbd did not take (`rbd lock add`,
// fencing scripts, Kubernetes' in-tree rbd plugin): rbd_lock_get_owners
// answers -EBUSY for them, and rbd_lock_acquire waits for an owner that
// never answers, for ever. "mylock by client.4311 at 127.0.0.1:0/4000182386"
// for each in `out`, with the commands that show and remove them; how many
// (0: none), or -errno.
int advisory_locks(rbd_image_t image, const std::string& name, std::string& out) {
    int exclusive = 0;
    std::vector<char> tag(64), clients(256), cookies(256), addrs(256);
    ssize_t count = 0;
    for (int tries = 0; tries < 3; ++tries) {
        std::size_t tag_len = tag.size(), clients_len = clients.size(), cookies_len = cookies.size(),
                    addrs_len = addrs.size();
        count = librbd().rbd_list_lockers(image, &exclusive, tag.data(), &tag_len, clients.data(), &clients_len,
                                          cookies.data(), &cookies_len, addrs.data(), &addrs_len);
        if (count != -ERANGE) break;   // the lengths now say what is needed
        tag.resize(tag_len + 1);
        clients.resize(clients_len + 1);
        cookies.resize(cookies_len + 1);
        addrs.resize(addrs_len + 1);
    }
    if (count <= 0) return static_cast<int>(count);
    // Each list is NUL-separated strings, one per locker.
    const char* client = clients.data();
    const char* cookie = cookies.data();
    const char* addr = addrs.data();
    std::string removes;
    out.clear();
    for (ssize_t i = 0; i < count; ++i) {
        out += std::string(out.empty() ? "" : ", ") + "'" + cookie + "' by " + client + " at " + addr;
        removes += std::string(removes.empty() ? "" : "; ") + "rbd lock rm " + name + " '" + cookie + "' " + client;
        client += std::strlen(client) + 1;
        cookie += std::strlen(cookie) + 1;
        addr += std::strlen(addr) + 1;
    }
    out = "the image has an advisory lock (rbd lock ls " + name + "): " + out +
          "; its exclusive lock cannot be taken while that is there (librbd would wait for ever, and "
          "--break-lock breaks librbd's locks only). If whoever took it no longer uses the image, remove it: " +
          removes;
    return static_cast<int>(count);
}

// rbd_lock_acquire, telling h.on_lock_wait when it waits for a holder.
// librbd's wait cannot be given up (the image stays busy inside it), so it
// is not bounded here: a dead holder's lock comes once the cluster drops
// its watch; a holder whose watch lives but that does not answer keeps
// librbd asking (docs/rbd.md: a bound at start is systemd's start timeout).
// `held`, `holder`: holders_of's answer before (0: nobody held it, < 0: not
// known, and told as "an unknown client" if the acquire waits). `holder`
// keeps who held it when a holder refused at once, so that a refusal's
// message costs no second round trip to the cluster; it is cleared when
// nobody held it or the refusal came after a wait (the holder may have
// changed meanwhile).
int acquire_told(RbdBackend::Handles& h, const std::string& name, int held, std::string& holder) {
    if (held < 0) holder = "an unknown client";
    if (!h.on_lock_wait || held == 0) {   // free: nobody to wait for
        holder.clear();
        return librbd().rbd_lock_acquire(h.image, RBD_LOCK_MODE_EXCLUSIVE);
    }
    const auto began = std::chrono::steady_clock::now();
    auto acquiring = std::async(std::launch::async, [image = h.image] {
        return librbd().rbd_lock_acquire(image, RBD_LOCK_MODE_EXCLUSIVE);
    });
    if (acquiring.wait_for(k_refusal_time) == std::future_status::ready) {
        const int r = acquiring.get();
        if (held < 0) holder.clear();
        return r;
    }
    LockWait wait;
    wait.holder = holder;
    wait.message = "rbd " + name + ": its lock is held by " + holder +
                   ", which does not answer: waiting for it (a dead holder's lock is taken once the cluster drops "
                   "its watch, about 30 s: osd_client_watch_timeout); if that host is dead, --break-lock takes it "
                   "at once";
    h.on_lock_wait(wait);
    const int r = acquiring.get();
    if (r != 0) {
        holder.clear();
        return r;
    }
    wait.event = LockWait::Event::taken;
    wait.waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began);
    wait.message = "rbd " + name + ": got its lock after " + seconds_text(wait.waited) + " (held by " + holder + ")";
    h.on_lock_wait(wait);
    return 0;
}

// Breaks every holder of the image's lock, each fenced first: this process
// blocklists it (rados_blocklist_add) and waits for the OSD map that says
// so, as librbd's own break does, but only while rbd_blocklist_on_break_lock
// is true, which ceph.conf or a pool's or image's `rbd config ... set` can
// turn off; a holder whose lock was broken without that writes on beside
// the new one. How many, or -errno with `what` saying which step failed
// (nothing is broken when a blocklist fails).
int break_holders(RbdBackend::Handles& h, std::string& what) {
    rbd_lock_mode_t mode;
    std::vector<char*> owners(8);
    std::size_t count = owners.size();
    int r = librbd().rbd_lock_get_owners(h.image, &mode, owners.data(), &count);
    if (r == -ENOENT) return 0;   // nobody holds it
    if (r < 0) return r;
    what = "cannot blocklist it";
    for (std::size_t i = 0; i < count && r == 0; ++i)
        r = librbd().rados_blocklist_add(h.cluster, owners[i], 0);   // 0: the cluster's expiry (an hour)
    if (r == 0) {
        what = "cannot read the OSD map after blocklisting it";
        r = librbd().rados_wait_for_latest_osdmap(h.cluster);
    }
    if (r == 0) what = "";
    for (std::size_t i = 0; i < count && r == 0; ++i) r = librbd().rbd_lock_break(h.image, RBD_LOCK_MODE_EXCLUSIVE, owners[i]);
    librbd().rbd_lock_get_owners_cleanup(owners.data(), count);
    return r < 0 ? r : static_cast<int>(count);
}

// Takes the exclusive lock, or says who has it. A live holder refuses at
// once; a dead one's lock is taken over by librbd once the cluster has
// dropped its watch (~30 s; acquire_told says so meanwhile), unless
// break_lock breaks it first (`broke`: whose lock that was, if anybody's).
bool take_lock(RbdBackend::Handles& h, const std::string& name, bool break_lock, std::string& error,
               std::string* broke = nullptr) {
    rbd_image_t image = h.image;
    std::string holders;
    int held = holders_of(image, holders);
    if (held == -EBUSY && advisory_locks(image, name, error) > 0) return false;   // neither breakable nor waited for
    if (break_lock && held != 0) {
        if (held < 0) holders = "an unknown client";
        std::string what;
        int r = break_holders(h, what);
        if (r < 0) {
            // `broke` asked for: a take-back after our own release, not --break-lock.
            error = std::string(broke ? "" : "--break-lock: ") + "cannot break the lock of " + holders + ": " +
                    (what.empty() ? "" : what + ": ") + errno_text(r);
            return false;
        }
        if (r > 0 && broke) *broke = holders;
        held = 0;   // broken: the acquire finds it free
        holders.clear();
    }
    int r = acquire_told(h, name, held, holders);
    if (r == 0) return true;
    if (r != -EROFS && r != -EBUSY) {
        error = "cannot take the image's exclusive lock: " + errno_text(r);
        return false;
    }
    error = "image is locked by " + (holders.empty() ? lock_holders(image) : holders) +
            " (another nbdsched serving it?); if that host is dead, start with --break-lock";
    return false;
}

// rbd_update_watch's callback, on a librbd thread, after the image's
// header changed (a resize here or by another client): librbd clips a
// request to its new size at once, a reload may come much later. Only
// counted here: reading the size would refresh the image from the cluster
// now, for every change, whether a write needs it or not.
void on_image_update(void* arg) { ++static_cast<RbdBackend::Handles*>(arg)->header_changes; }

bool set_option(rados_t cluster, const char* key, unsigned seconds, std::string& error) {
    if (seconds == 0) return true;
    int r = librbd().rados_conf_set(cluster, key, std::to_string(seconds).c_str());
    if (r < 0) error = std::string("cannot set ") + key + ": " + errno_text(r);
    return r == 0;
}

// librados runs librbd's dispatch and every completion on a pool of
// threads (io_context_pool, `librados_thread_count`, default 2). With two,
// each post while one thread is busy wakes the other, and the two take
// turns on the same queue: at 64 4 KiB reads in flight the daemon switched
// context about twice as often per request as with one, and spent more CPU
// per request (docs/rbd.md, "How it works"). One thread is the daemon's
// default, unless ceph.conf or $CEPH_ARGS set another value (one that
// differs from librados' default: `= 2` written there cannot be told from
// it). Read before the file and after it.
std::string conf_value(rados_t cluster, const char* key) {
    char value[64] = {};
    return librbd().rados_conf_get(cluster, key, value, sizeof value) == 0 ? value : "";
}

// librbd's cache as the device asks, over ceph.conf. By default none (as
// qemu's cache=none): the NBD client has its own, and without a second
// cache in the daemon an acknowledged write is at the OSDs, not only in
// this host's memory. With the cache on, librbd's
// rbd_cache_writethrough_until_flush (true by default, for a guest that
// may never flush) is false: every NBD client was told of a volatile cache
// (NBD_FLAG_SEND_FLUSH) and flushes what has to last.
bool set_cache(rados_t cluster, RbdCache cache, std::string& error) {
    const std::pair<const char*, const char*> settings[] = {
        {"rbd_cache", cache == RbdCache::off ? "false" : "true"},
        {"rbd_cache_policy", cache_name(cache)},
        {"rbd_cache_writethrough_until_flush", "false"}};
    for (const auto& [key, value] : settings) {
        if (int r = librbd().rados_conf_set(cluster, key, value); r < 0) {
            error = std::string("cannot set ") + key + " to " + value + ": " + errno_text(r);
            return false;
        }
        if (cache == RbdCache::off) break;   // the rest is the cache's
    }
    return true;
}

bool connect(RbdBackend::Handles& h, const RbdSpec& spec, std::string& error) {
    const std::string who = "client." + spec.client;
    int r = librbd().rados_create2(&h.cluster, "ceph", who.c_str(), 0);
    if (r < 0) {
        h.cluster = nullptr;
        error = "cannot create a cluster handle for " + who + ": " + errno_text(r);
        return false;
    }
    const std::string default_threads = conf_value(h.cluster, "librados_thread_count");
    r = librbd().rados_conf_read_file(h.cluster, spec.ceph_conf.empty() ? nullptr : spec.ceph_conf.c_str());
    if (r < 0) {
        error = "cannot read " + (spec.ceph_conf.empty() ? std::string("the Ceph configuration") : spec.ceph_conf) +
                ": " + errno_text(r);
        return false;
    }
    if (spec.ceph_conf.empty()) librbd().rados_conf_parse_env(h.cluster, nullptr);   // $CEPH_ARGS
    if (conf_value(h.cluster, "librados_thread_count") == default_threads &&
        (r = librbd().rados_conf_set(h.cluster, "librados_thread_count", "1")) < 0) {
        error = "cannot set librados_thread_count: " + errno_text(r);
        return false;
    }
    if (!set_cache(h.cluster, spec.cache, error)) return false;
    // librbd copies a write's data before rbd_aio_writev returns
    // (rbd_disable_zero_copy_writes, true by default); without the copy it
    // holds the write's completion back until nothing refers to the buffer,
    // and once this client is blocklisted (another host's --break-lock)
    // that never comes: the write waited forever instead of failing with
    // ESHUTDOWN, and its client with it. The copy stays whatever ceph.conf
    // says (it costs the event loop about 120 µs per 1 MiB: docs/rbd.md).
    if ((r = librbd().rados_conf_set(h.cluster, "rbd_disable_zero_copy_writes", "true")) < 0) {
        error = "cannot set rbd_disable_zero_copy_writes: " + errno_text(r);
        return false;
    }
    // A cluster that is gone must end in errors, not requests that wait forever.
    if (!set_option(h.cluster, "rados_osd_op_timeout", spec.osd_op_timeout, error) ||
        !set_option(h.cluster, "rados_mon_op_timeout", spec.osd_op_timeout, error) ||
        !set_option(h.cluster, "client_mount_timeout", spec.mount_timeout, error))
        return false;
    if ((r = librbd().rados_connect(h.cluster)) < 0) {
        error = "cannot connect to the cluster as " + who + ": " + errno_text(r);
        return false;
    }
    if ((r = librbd().rados_ioctx_create(h.cluster, spec.pool.c_str(), &h.io)) < 0) {
        h.io = nullptr;
        error = "pool " + spec.pool + ": " + errno_text(r);
        return false;
    }
    librbd().rados_ioctx_set_namespace(h.io, spec.rados_namespace.empty() ? nullptr : spec.rados_namespace.c_str());
    return true;
}

}   // namespace

RbdBackend::Handles::~Handles() {
    if (watching) librbd().rbd_update_unwatch(image, update_watch);
    if (image) librbd().rbd_close(image);
    if (io) librbd().rados_ioctx_destroy(io);
    if (cluster) librbd().rados_shutdown(cluster);
}

std::unique_ptr<RbdBackend> RbdBackend::open(const RbdSpec& spec, std::string& error,
                                             const std::function<void(const std::string&)>& warn) {
    std::string name = spec.pool + "/" + (spec.rados_namespace.empty() ? "" : spec.rados_namespace + "/") + spec.image;
    auto h = std::make_unique<Handles>();
    auto fail = [&](const std::string& why) {
        error = "rbd " + name + ": " + why;
        return nullptr;
    };
    if (spec.image.empty()) return fail("no image given");
    if (std::string why; !load_rbd_library(why)) return fail(why);
    if (!connect(*h, spec, error)) return fail(error);
    int r = librbd().rbd_open(h->io, spec.image.c_str(), &h->image, nullptr);
    if (r < 0) {
        h->image = nullptr;
        return fail("cannot open the image: " + errno_text(r));
    }
    std::string warning;
    if (std::string refused = check_image_config(h->image, name, spec.cache, h->cache_mode, warning);
        !refused.empty())
        return fail(refused);
    if (!warning.empty() && warn) warn("rbd " + name + ": " + warning);
    h->on_lock_wait = spec.on_lock_wait;
    if (!spec.lock_later && !take_lock(*h, name, spec.break_lock, error)) return fail(error);
    h->locked = !spec.lock_later;
    std::uint64_t size = 0;
    if ((r = librbd().rbd_get_size(h->image, &size)) < 0) return fail("cannot read the image's size: " + errno_text(r));
    if (size == 0) return fail("the image is empty (size 0)");
    h->size = size;
    h->image_size = size;
    if ((r = librbd().rbd_update_watch(h->image, &h->update_watch, &on_image_update, h.get())) < 0)
        return fail("cannot watch the image for a resize: " + errno_text(r));
    h->watching = true;
    rbd_image_info_t info{};
    if ((r = librbd().rbd_stat(h->image, &info, sizeof info)) < 0) return fail("cannot read the image's layout: " + errno_text(r));
    h->object_size = info.obj_size;
    return std::unique_ptr<RbdBackend>(new RbdBackend(std::move(h), std::move(name)));
}

int RbdBackend::refresh_size() {
    const std::uint64_t changes = h_->header_changes;
    std::uint64_t size = 0;
    if (int r = librbd().rbd_get_size(h_->image, &size); r < 0) return -r;   // librbd sees a resize through its watch
    if (size == 0) return EINVAL;
    h_->size = size;
    h_->image_size = size;
    h_->size_read_at = changes;
    return 0;
}

void RbdBackend::read_image_size() {
    const std::uint64_t changes = h_->header_changes;
    std::uint64_t size = 0;
    if (librbd().rbd_get_size(h_->image, &size) < 0) return;   // the write goes on against the size known before
    h_->image_size = size;
    h_->size_read_at = changes;
}

std::string RbdBackend::release_exclusive() {
    if (!h_->locked) return "";
    if (int r = librbd().rbd_lock_release(h_->image); r < 0) return "rbd " + name_ + ": cannot release the lock: " + errno_text(r);
    h_->locked = false;
    h_->released = true;
    return "";
}

std::string RbdBackend::acquire_exclusive(std::string& broke) {
    if (h_->locked) return "";
    std::string error;
    if (!take_lock(*h_, name_, h_->released, error, &broke)) return "rbd " + name_ + ": " + error;
    h_->locked = true;
    h_->released = false;
    return "";
}

RbdBackend::RbdBackend(std::unique_ptr<Handles> handles, std::string name)
    : h_(std::move(handles)), name_(std::move(name)) {}

RbdBackend::~RbdBackend() {
    {
        std::lock_guard lock(later_mutex_);
        closing_ = true;   // a write completing while the image closes is checked against the size known
    }
    for (auto& job : later_) job.wait();
}

std::uint64_t RbdBackend::size() const { return h_->size; }

std::string RbdBackend::describe() const {
    return "rbd " + name_ + " " + format_size(size()) + (h_->cache_mode.empty() ? "" : ", librbd cache " + h_->cache_mode);
}

}   // namespace nbdsched::backend
