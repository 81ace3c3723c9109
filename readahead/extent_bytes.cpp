#include "readahead/extent_bytes.hpp"

namespace nbdsched::readahead {

ExtentBytes::ExtentBytes(std::vector<std::byte>&& bytes) : size_(bytes.size()) {
    auto holder = std::make_shared<std::vector<std::byte>>(std::move(bytes));
    owner_ = std::shared_ptr<std::byte>(holder, holder->data());   // aliasing: the vector lives as long
}

ExtentBytes::ExtentBytes(std::byte* data, std::size_t size, void (*release)(void*))
    : owner_(data, [release](std::byte* p) { release(p); }), size_(size) {
}

}   // namespace nbdsched::readahead
