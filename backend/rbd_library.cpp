#include "backend/rbd_library.hpp"

#include <dlfcn.h>

namespace nbdsched::backend {
namespace {

// The SONAMEs of the C APIs in <rados/librados.h> and <rbd/librbd.h>.
constexpr const char* kLibrados = "librados.so.2";
constexpr const char* kLibrbd = "librbd.so.1";

// One symbol into its typed pointer; the first miss is the error.
template <typename Fn>
void resolve(void* library, const char* library_name, const char* symbol, Fn& into, std::string& why) {
    if (!why.empty()) return;
    into = reinterpret_cast<Fn>(dlsym(library, symbol));
    if (!into) why = std::string(library_name) + " has no " + symbol;
}

void* open_library(const char* name, std::string& why) {
    void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!library) why = std::string("cannot load ") + name + " (Debian: apt install librbd1): " + dlerror();
    return library;
}

struct Loaded {
    RbdLibrary functions;
    std::string why;   // empty: loaded
};

const Loaded& loaded() {
    static const Loaded l = [] {
        Loaded x;
        load_rbd_library_from(kLibrados, kLibrbd, x.functions, x.why);
        return x;
    }();   // thread-safe, once
    return l;
}

}   // namespace

bool load_rbd_library_from(const char* librados_name, const char* librbd_name, RbdLibrary& into, std::string& why) {
    // Never closed: librados' threads and atexit handlers outlive any device.
    std::string error;
    void* rados = open_library(librados_name, error);
    void* rbd = rados ? open_library(librbd_name, error) : nullptr;
    if (rbd) {
#define NBDSCHED_RBD_RESOLVE_RADOS(name) resolve(rados, librados_name, #name, into.name, error);
#define NBDSCHED_RBD_RESOLVE_RBD(name) resolve(rbd, librbd_name, #name, into.name, error);
        NBDSCHED_LIBRADOS_FUNCTIONS(NBDSCHED_RBD_RESOLVE_RADOS)
        NBDSCHED_LIBRBD_FUNCTIONS(NBDSCHED_RBD_RESOLVE_RBD)
#undef NBDSCHED_RBD_RESOLVE_RADOS
#undef NBDSCHED_RBD_RESOLVE_RBD
    }
    if (error.empty()) return true;
    why = error;
    return false;
}

bool load_rbd_library(std::string& why) {
    if (loaded().why.empty()) return true;
    why = loaded().why;
    return false;
}

const RbdLibrary& librbd() { return loaded().functions; }

}   // namespace nbdsched::backend
