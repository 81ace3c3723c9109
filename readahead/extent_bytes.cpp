#include "readahead/extent_bytes.hpp"

#include <algorithm>

namespace nbdsched::readahead {

ExtentBytes::ExtentBytes(std::vector<std::byte>&& bytes) : size_(bytes.size()), capacity_(bytes.capacity()) {
    auto holder = std::make_shared<std::vector<std::byte>>(std::move(bytes));
    owner_ = std::shared_ptr<std::byte>(holder, holder->data());   // aliasing: the vector lives as long
}

ExtentBytes::ExtentBytes(std::byte* data, std::size_t size, std::size_t capacity, void (*release)(void*))
    : owner_(data, [release](std::byte* p) { release(p); }), size_(size), capacity_(std::max(size, capacity)) {
}

}   // namespace nbdsched::readahead
