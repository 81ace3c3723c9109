// What a backend is built from: where the data lives and how it is opened.
// The configuration layer fills one of these per device, so backend/ does
// not need to know the YAML schema.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/fault_rule.hpp"

namespace nbdsched::backend {

enum class Kind { ram,
                  file,
                  rbd };

// A wait for an RBD image's exclusive lock, told to the daemon (the backend
// has no log): `waiting` once, when the lock has a holder and the acquire
// did not answer at once (a live holder refuses within a few round trips;
// a dead one keeps it until the cluster drops its watch), then `taken`
// when the lock came after such a wait. Never for a free lock or a refusal.
struct LockWait {
    enum class Event { waiting,
                       taken };
    Event event = Event::waiting;
    std::string message;                  // "rbd pool/image: ...", for the log
    std::string holder;                   // "client.4235 at 127.0.0.1:0/3123"
    std::chrono::milliseconds waited{};   // taken: since the acquire began
};

// librbd's cache on an RBD device (`rbd_cache:`, docs/rbd.md "librbd's
// cache"). off: a write is answered once the OSDs have it.
// writearound: librbd answers a write once it has sent it (up to
// rbd_cache_max_dirty bytes in flight), reads are not cached. writeback:
// librbd answers from this host's memory and writes back later; reads are
// cached. With either, a FLUSH (and a FUA write's flush) waits for every
// write answered before it to be at the OSDs.
enum class RbdCache { off,
                      writearound,
                      writeback };

// The words of `rbd_cache:`; writearound and writeback are also librbd's
// rbd_cache_policy values.
inline constexpr std::pair<RbdCache, std::string_view> rbd_cache_names[] = {
    {RbdCache::off, "off"}, {RbdCache::writearound, "writearound"}, {RbdCache::writeback, "writeback"}};

// An RBD image (backend: rbd); docs/rbd.md.
struct RbdSpec {
    std::string pool = "rbd";
    std::string image;
    std::string rados_namespace;      // "" = the pool's default namespace
    std::string ceph_conf;            // "" = librados' own search ($CEPH_CONF, /etc/ceph/ceph.conf)
    std::string client = "admin";     // cephx id, without "client."
    unsigned osd_op_timeout = 0;      // seconds; 0 = wait for the OSDs forever (Ceph's default)
    unsigned mount_timeout = 0;       // seconds to reach the monitors; 0 = Ceph's default (300)
    RbdCache cache = RbdCache::off;   // rbd_cache: librbd's cache
    bool break_lock = false;          // --break-lock: take the image's lock from a dead holder
    // --takeover: the running daemon holds the lock until it hands over;
    // open without it (acquire_exclusive() takes it then).
    bool lock_later = false;
    // Set by the daemon; called on the thread that waits (the open, a take-back).
    std::function<void(const LockWait&)> on_lock_wait;
};

// How a file device runs its reads, writes and flushes: the daemon's I/O
// thread pool, or an io_uring ring on the device's event loop. automatic:
// io_uring where built and the kernel allows a ring, else threads.
enum class IoEngine { automatic,
                      threads,
                      io_uring };

struct Spec {
    std::string name;   // the device's name, for error messages
    Kind kind = Kind::ram;
    std::uint64_t size = 0;                     // bytes; file: 0 = use the existing file's size
    std::string path;                           // file only
    bool direct = false;                        // O_DIRECT
    std::optional<bool> rotational;             // nullopt = detect (see resolve_rotational)
    std::vector<FaultRule> faults;              // fault injection (testing); empty = none
    RbdSpec rbd;                                // rbd only
    IoEngine io_engine = IoEngine::automatic;   // file only
    bool huge_pages = true;                     // ram only: pages from transparent huge pages (PageArena)
    bool io_cohorts = true;                     // file on io_uring: O_DIRECT requests may go in cohorts
    // File only, set by the daemon (the backend has no log): called once, on
    // the thread that saw it, when the storage first fails to persist
    // written data ("the storage failed to write ..."); FLUSH and FUA fail
    // from then on (file_backend.hpp).
    std::function<void(const std::string&)> on_storage_failure = nullptr;
    // Set by the daemon. File: once per kind, when a FLUSH or a reload finds
    // the file deleted, replaced or truncated behind the daemon's back. RBD:
    // at the open, when the image's own configuration changes the librbd
    // cache the device asked for.
    std::function<void(const std::string&)> on_storage_warning = nullptr;
};

}   // namespace nbdsched::backend
