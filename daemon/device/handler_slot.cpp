#include "daemon/device/handler_slot.hpp"

#include <new>

namespace nbdsched::daemon {

void* HandlerSlot::allocate(std::size_t n) {
    if (in_use_ || n > sizeof(storage_)) return ::operator new(n);
    in_use_ = true;
    return storage_;
}

void HandlerSlot::deallocate(void* p) {
    if (p != storage_) return ::operator delete(p);
    in_use_ = false;
    if (abandoned_) delete this;
}

void HandlerSlot::abandon() {
    if (in_use_)
        abandoned_ = true;
    else
        delete this;
}

DetachedSlot::DetachedSlot() : slot_(new HandlerSlot) {}

DetachedSlot::~DetachedSlot() {
    slot_->abandon();
}

}   // namespace nbdsched::daemon
