// Splits the bytes handle_option wrote into the option replies in them.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "nbd/handshake.hpp"

namespace nbdsched::nbd::test {

inline std::vector<OptionReply> replies(const std::vector<std::uint8_t>& out) {
    std::vector<OptionReply> all;
    std::span<const std::uint8_t> in(out);
    while (!in.empty()) {
        OptionReply r;
        auto n = decode_option_reply(in, r);
        REQUIRE(n);
        REQUIRE(*n > 0);
        all.push_back(r);
        in = in.subspan(*n);
    }
    return all;
}

}   // namespace nbdsched::nbd::test
