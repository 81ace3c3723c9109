#include "nbd/block_status.hpp"

#include <algorithm>

#include "nbd/transmission.hpp"
#include "nbd/wire.hpp"

namespace nbdsched::nbd {

std::size_t encode_block_descriptors(std::span<std::uint8_t> out, std::span<const BlockExtent> extents,
                                     std::uint32_t request_length, bool req_one) {
    const std::size_t max = req_one ? std::min<std::size_t>(1, out.size() / block_descriptor_size)
                                    : out.size() / block_descriptor_size;
    std::size_t count = 0;
    std::uint64_t left = request_length;
    for (const auto& e : extents) {
        if (left == 0) break;
        const auto length = static_cast<std::uint32_t>(std::min<std::uint64_t>(e.length, left));
        if (length == 0) continue;
        std::uint8_t* last = count > 0 ? out.data() + (count - 1) * block_descriptor_size : nullptr;
        if (last && load_u32(last + 4) == e.flags) {
            store_u32(last, load_u32(last) + length);   // cannot overflow: the sum stays <= request_length
        } else {
            if (count == max) break;
            std::uint8_t* p = out.data() + count * block_descriptor_size;
            store_u32(p, length);
            store_u32(p + 4, e.flags);
            ++count;
        }
        left -= length;
    }
    return count * block_descriptor_size;
}

std::size_t encode_block_status_header(std::span<std::uint8_t> out, std::uint64_t cookie,
                                       std::uint32_t descriptor_bytes) {
    auto n = encode_chunk_header(out, reply_flag_done, chunk_block_status, cookie, 4 + descriptor_bytes);
    store_u32(out.data() + n, base_allocation_id);
    return n + 4;
}

}   // namespace nbdsched::nbd
