// A pool's or an image's own librbd configuration (`rbd config pool set`,
// `rbd config image set`), which librbd applies at rbd_open over what the
// daemon set on its cluster connection, checked against what the daemon
// needs (only the RBD backend's own .cpp files include this: librbd).
#pragma once

#include <rbd/librbd.h>
#include <string>

#include "backend/spec.hpp"

namespace nbdsched::backend {

// "off", "writearound", "writeback": librbd's rbd_cache_policy words.
const char* cache_name(RbdCache cache);

// Reads the image's effective configuration once it is open. Refused:
// librbd's copy of each write turned off (rbd_disable_zero_copy_writes
// false: a fenced daemon's writes would hang, not fail), and, with the
// device's cache off, librbd's cache turned on. With the cache on, one that
// turns it off or changes its policy is told in `warning`. `mode`: the
// cache in force ("" = off). `name`: pool/[namespace/]image. The refusal's
// text, or "".
std::string check_image_config(rbd_image_t image, const std::string& name, RbdCache asked, std::string& mode,
                               std::string& warning);

}   // namespace nbdsched::backend
