// Which optional backends this binary was built with (meson -Drbd). Its own
// small file so that config/ (and the config fuzzer, which links no backend)
// can ask without the backends' dependencies.
#pragma once

namespace nbdsched::backend {

// Whether this binary has the RBD backend.
bool rbd_available();

}   // namespace nbdsched::backend
