// Which optional backends this binary was built with (meson -Drbd, -Dio_uring). Its own
// small file so that config/ (and the config fuzzer, which links no backend)
// can ask without the backends' dependencies.
#pragma once

namespace nbdsched::backend {

// Whether this binary has the RBD backend.
bool rbd_available();
// Whether this binary has the file backend's io_uring engine (it may still
// be refused by the kernel when a device opens: then it uses threads).
bool io_uring_available();

}   // namespace nbdsched::backend
