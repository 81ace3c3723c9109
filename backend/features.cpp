#include "backend/features.hpp"

namespace nbdsched::backend {

bool rbd_available() {
#ifdef NBDSCHED_HAVE_RBD
    return true;
#else
    return false;
#endif
}

bool io_uring_available() {
#ifdef NBDSCHED_HAVE_IO_URING
    return true;
#else
    return false;
#endif
}

}   // namespace nbdsched::backend
