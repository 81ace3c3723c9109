// The librados/librbd handles behind an RbdBackend (only its own .cpp files
// include librbd; its functions come from rbd_library.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "backend/rbd_backend.hpp"
#include "backend/rbd_library.hpp"

namespace nbdsched::backend {

struct RbdBackend::Handles {
    rados_t cluster = nullptr;
    rados_ioctx_t io = nullptr;
    rbd_image_t image = nullptr;
    std::atomic<std::uint64_t> size = 0;   // read on the loop and the pool, changed by a reload
    // The image's size as librbd had it when last read, so that a write
    // past the end of an image shrunk before the reload fails instead of
    // being clipped by librbd (rbd_io.cpp). An update watch counts the
    // changes of the image's header (a resize, here or by another client);
    // the size is read again, off the event loop, by the first write after
    // one (a read may refresh the image from the cluster: not eagerly).
    std::atomic<std::uint64_t> image_size = 0;
    std::atomic<std::uint64_t> header_changes = 0;   // bumped by the watch
    std::atomic<std::uint64_t> size_read_at = 0;     // header_changes when image_size was read
    std::uint64_t update_watch = 0;                  // rbd_update_watch's handle
    bool watching = false;
    bool locked = false;                                 // this process holds the exclusive lock
    bool released = false;                               // it let go of it for a hand-over
    std::uint64_t object_size = 0;                       // bytes per RADOS object (4 MiB by default)
    std::string cache_mode;                              // librbd's cache in force ("writeback"); "" = off
    std::function<void(const LockWait&)> on_lock_wait;   // RbdSpec's: a wait for the lock, told
    Handles() = default;
    Handles(const Handles&) = delete;
    Handles& operator=(const Handles&) = delete;
    ~Handles();   // ends the watch, closes the image (flushing it) and the connection
};

}   // namespace nbdsched::backend
