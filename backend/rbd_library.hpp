// librados and librbd, loaded with dlopen when the first rbd device opens
// instead of linked: a daemon without rbd devices never maps them or
// libceph-common (whose 130 MiB of zeroed static data LeakSanitizer read
// through at every exit of an ASan build: 0.35 s of CPU per process), and
// runs where librbd1 is not installed. A missing library is the device's
// error, as for any other failure to open the image.
#pragma once

#include <string>
#include <rados/librados.h>
#include <rbd/librbd.h>

namespace nbdsched::backend {

// Every librados/librbd function the backend calls, declared once here.
// clang-format off
#define NBDSCHED_LIBRADOS_FUNCTIONS(X) \
    X(rados_blocklist_add)             \
    X(rados_conf_get)                  \
    X(rados_conf_parse_env)            \
    X(rados_conf_read_file)            \
    X(rados_conf_set)                  \
    X(rados_connect)                   \
    X(rados_create2)                   \
    X(rados_ioctx_create)              \
    X(rados_ioctx_destroy)             \
    X(rados_ioctx_set_namespace)       \
    X(rados_shutdown)                  \
    X(rados_wait_for_latest_osdmap)
#define NBDSCHED_LIBRBD_FUNCTIONS(X) \
    X(rbd_aio_create_completion)     \
    X(rbd_aio_discard)               \
    X(rbd_aio_flush)                 \
    X(rbd_aio_get_return_value)      \
    X(rbd_aio_readv)                 \
    X(rbd_aio_release)               \
    X(rbd_aio_write_zeroes)          \
    X(rbd_aio_writev)                \
    X(rbd_close)                     \
    X(rbd_config_image_list)         \
    X(rbd_config_image_list_cleanup) \
    X(rbd_diff_iterate2)             \
    X(rbd_discard)                   \
    X(rbd_flush)                     \
    X(rbd_get_size)                  \
    X(rbd_list_lockers)              \
    X(rbd_lock_acquire)              \
    X(rbd_lock_break)                \
    X(rbd_lock_get_owners)           \
    X(rbd_lock_get_owners_cleanup)   \
    X(rbd_lock_release)              \
    X(rbd_open)                      \
    X(rbd_read)                      \
    X(rbd_stat)                      \
    X(rbd_update_unwatch)            \
    X(rbd_update_watch)              \
    X(rbd_watchers_list)             \
    X(rbd_watchers_list_cleanup)     \
    X(rbd_write)                     \
    X(rbd_write_zeroes)
// clang-format on

// The functions, by their C names.
struct RbdLibrary {
#define NBDSCHED_RBD_POINTER(name) decltype(&::name) name = nullptr;
    NBDSCHED_LIBRADOS_FUNCTIONS(NBDSCHED_RBD_POINTER)
    NBDSCHED_LIBRBD_FUNCTIONS(NBDSCHED_RBD_POINTER)
#undef NBDSCHED_RBD_POINTER
};

// Loads both libraries the first time (any thread; later calls return the
// same answer). false and `why` when one of them or a function is missing.
bool load_rbd_library(std::string& why);

// What load_rbd_library does with librados.so.2 and librbd.so.1, from the
// libraries named (tests name others): every function into `into`, or
// false and `why`.
bool load_rbd_library_from(const char* librados_name, const char* librbd_name, RbdLibrary& into, std::string& why);

// The loaded functions; only after load_rbd_library returned true.
const RbdLibrary& librbd();

}   // namespace nbdsched::backend
