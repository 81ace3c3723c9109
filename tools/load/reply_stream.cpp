#include "tools/load/reply_stream.hpp"

#include <algorithm>
#include <cstring>

namespace nbdsched::load {

ReplyStream::ReplyStream(std::size_t slots) : data_length_(slots, idle) {}

void ReplyStream::expect(std::uint64_t cookie, std::uint32_t data_length) { data_length_.at(cookie) = data_length; }

bool ReplyStream::feed(std::span<const std::uint8_t> bytes, std::vector<nbd::SimpleReply>& replies) {
    while (!bytes.empty()) {
        if (skip_ > 0) {
            auto n = std::min<std::uint64_t>(skip_, bytes.size());
            skip_ -= n;
            bytes = bytes.subspan(n);
            if (skip_ == 0) replies.push_back(pending_);
            continue;
        }
        auto n = std::min(header_.size() - header_have_, bytes.size());
        std::memcpy(header_.data() + header_have_, bytes.data(), n);
        header_have_ += n;
        bytes = bytes.subspan(n);
        if (header_have_ < header_.size()) break;
        header_have_ = 0;
        auto reply = nbd::decode_simple_reply(header_);
        if (!reply || reply->cookie >= data_length_.size() || data_length_[reply->cookie] == idle) return false;
        // A failed READ sends no data after its simple reply.
        skip_ = reply->error == 0 ? data_length_[reply->cookie] : 0;
        data_length_[reply->cookie] = idle;
        if (skip_ == 0)
            replies.push_back(*reply);
        else
            pending_ = *reply;
    }
    return true;
}

}   // namespace nbdsched::load
