// Memory for one pending Asio operation at a time, kept by its owner. Asio
// recycles one block per thread for every operation; a connection's read
// and the post that ends its reply's write took it from each other, so
// each request cost a new and a delete. An owner with one such operation
// pending at a time (in_slot) always finds its block free; a second one at
// once is allocated. An owner that may go before its operation (handlers
// destroyed unrun with their io_context, or holding the owner themselves)
// keeps a DetachedSlot instead.
#pragma once

#include <cstddef>
#include <utility>

namespace nbdsched::daemon {

class HandlerSlot {
public:
    void* allocate(std::size_t n);
    void deallocate(void* p);

private:
    friend class DetachedSlot;
    // Its owner is gone: freed now, or when its operation gives the block back.
    void abandon();

    alignas(std::max_align_t) unsigned char storage_[256];
    bool in_use_ = false;
    bool abandoned_ = false;   // only a DetachedSlot's (made with new)
};

// A HandlerSlot for an owner that may go before its pending operation: a
// device removed, or the daemon stopping, while a loop still holds a
// handler posted for it (or destroys it unrun with its io_context). The
// slot lives on until that operation has given its memory back.
class DetachedSlot {
public:
    DetachedSlot();
    ~DetachedSlot();
    DetachedSlot(const DetachedSlot&) = delete;
    DetachedSlot& operator=(const DetachedSlot&) = delete;
    HandlerSlot& operator*() const { return *slot_; }

private:
    HandlerSlot* slot_;
};

template <class T>
struct SlotAllocator {
    using value_type = T;
    explicit SlotAllocator(HandlerSlot& s) noexcept : slot(&s) {}
    template <class U>
    SlotAllocator(const SlotAllocator<U>& other) noexcept : slot(other.slot) {}
    T* allocate(std::size_t n) { return static_cast<T*>(slot->allocate(sizeof(T) * n)); }
    void deallocate(T* p, std::size_t) { slot->deallocate(p); }
    template <class U>
    bool operator==(const SlotAllocator<U>& other) const noexcept {
        return slot == other.slot;
    }
    HandlerSlot* slot;
};

// A handler whose operation lives in `slot` (Asio asks its associated allocator).
template <class Handler>
struct SlotHandler {
    HandlerSlot* slot;
    Handler handler;
    using allocator_type = SlotAllocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(*slot); }
    template <class... Args>
    void operator()(Args&&... args) {
        handler(std::forward<Args>(args)...);
    }
};

template <class Handler>
SlotHandler<std::decay_t<Handler>> in_slot(HandlerSlot& slot, Handler&& handler) {
    return {&slot, std::forward<Handler>(handler)};
}

}   // namespace nbdsched::daemon
