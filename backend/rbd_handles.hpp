// The librados/librbd handles behind an RbdBackend (only its own .cpp files
// include librbd).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "backend/rbd_backend.hpp"

namespace nbdsched::backend {

struct RbdBackend::Handles {
    rados_t cluster = nullptr;
    rados_ioctx_t io = nullptr;
    rbd_image_t image = nullptr;
    std::atomic<std::uint64_t> size = 0;                 // read on the loop and the pool, changed by a reload
    bool locked = false;                                 // this process holds the exclusive lock
    bool released = false;                               // it let go of it for a hand-over
    std::uint64_t object_size = 0;                       // bytes per RADOS object (4 MiB by default)
    std::function<void(const LockWait&)> on_lock_wait;   // RbdSpec's: a wait for the lock, told
    Handles() = default;
    Handles(const Handles&) = delete;
    Handles& operator=(const Handles&) = delete;
    ~Handles();   // closes the image (flushing it) and the connection
};

}   // namespace nbdsched::backend
