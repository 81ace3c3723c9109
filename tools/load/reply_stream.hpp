// Cuts the byte stream a server sends in transmission into replies, however
// the socket reads split it: simple replies only (the load client negotiates
// no structured replies), and the data after a successful READ's reply is
// skipped, not kept: the load client measures, it does not look.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "nbd/constants.hpp"
#include "nbd/transmission.hpp"

namespace nbdsched::load {

class ReplyStream {
public:
    // Cookies are slot numbers below `slots`.
    explicit ReplyStream(std::size_t slots);

    // The request sent under `cookie` is answered by `data_length` bytes of
    // data after a successful reply (a READ's length; 0 for other commands).
    void expect(std::uint64_t cookie, std::uint32_t data_length);

    // Appends every reply completed by `bytes` (header read and its data
    // skipped, so a request counts as answered once all of it arrived) to
    // `replies`. False when the stream is broken: not a simple
    // reply, or a cookie with no request outstanding.
    bool feed(std::span<const std::uint8_t> bytes, std::vector<nbd::SimpleReply>& replies);

private:
    static constexpr std::uint32_t idle = 0xffffffffu;   // no request under this cookie
    std::vector<std::uint32_t> data_length_;
    std::array<std::uint8_t, nbd::simple_reply_size> header_{};
    std::size_t header_have_ = 0;
    std::uint64_t skip_ = 0;     // data bytes of the last reply still to come
    nbd::SimpleReply pending_;   // that reply, answered once they have
};

}   // namespace nbdsched::load
