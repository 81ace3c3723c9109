#include "readahead/extent_bytes.hpp"

#include <algorithm>
#include <utility>

namespace nbdsched::readahead {

ExtentBytes::ExtentBytes(std::vector<std::byte>&& bytes)
    : vector_(std::move(bytes)), data_(vector_.data()), size_(vector_.size()), capacity_(vector_.capacity()) {}

ExtentBytes::ExtentBytes(std::byte* data, std::size_t size, std::size_t capacity, Release release)
    : data_(data), size_(size), capacity_(std::max(size, capacity)), release_(release) {}

// A moved vector keeps its buffer, so data_ still points into it.
ExtentBytes::ExtentBytes(ExtentBytes&& other) noexcept
    : vector_(std::move(other.vector_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      release_(std::exchange(other.release_, nullptr)) {}

ExtentBytes& ExtentBytes::operator=(ExtentBytes&& other) noexcept {
    if (this != &other) {
        reset();
        vector_ = std::move(other.vector_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        capacity_ = std::exchange(other.capacity_, 0);
        release_ = std::exchange(other.release_, nullptr);
    }
    return *this;
}

ExtentBytes::~ExtentBytes() { reset(); }

void ExtentBytes::reset() {
    if (release_ != nullptr && data_ != nullptr)
        release_(data_, capacity_);
    vector_ = {};
    data_ = nullptr;
    size_ = 0;
    capacity_ = 0;
    release_ = nullptr;
}

}   // namespace nbdsched::readahead
