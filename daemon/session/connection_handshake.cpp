// The handshake half of Connection: greeting, client flags, option haggling
// (decided by nbd::handle_option), then the switch to transmission.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "common/utf8.hpp"
#include "daemon/session/connection.hpp"
#include "daemon/tenancy/access.hpp"
#include "nbd/handshake.hpp"

namespace nbdsched::daemon {

namespace {
constexpr std::uint16_t offered_flags = nbd::flag_fixed_newstyle | nbd::flag_no_zeroes;
// How long a TLS goodbye waits for the peer's close_notify: ours is sent at
// once, and a peer that already hung up answers with an error at once.
constexpr auto tls_goodbye_wait = std::chrono::milliseconds(500);
}   // namespace

void Connection::send_greeting() {
    auto greeting = nbd::encode_greeting(offered_flags);
    hs_out_.assign(greeting.begin(), greeting.end());
    boost::asio::async_write(socket_, boost::asio::buffer(hs_out_),
                             [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                                 if (ec) return self->close("greeting: " + ec.message());
                                 self->read_client_flags();
                             });
}

void Connection::read_client_flags() {
    hs_in_.resize(4);
    boost::asio::async_read(socket_, boost::asio::buffer(hs_in_),
                            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                                if (ec) return self->close("reading client flags: " + ec.message());
                                auto flags = nbd::decode_client_flags(
                                    std::span<const std::uint8_t, 4>(self->hs_in_.data(), 4), offered_flags);
                                if (!flags) return self->close("client sent unknown client flags", spdlog::level::warn);
                                self->negotiation_.client = *flags;
                                self->read_option_header();
                            });
}

void Connection::read_option_header() {
    hs_in_.resize(nbd::option_header_size);
    auto on_header = [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
        if (ec) {
            // A client that only lists exports or asks for info usually
            // just hangs up: not worth more than a debug line.
            if (ec == boost::asio::error::eof || ec == boost::asio::ssl::error::stream_truncated) {
                spdlog::debug("{}: disconnected during the handshake", self->tag());
                return self->close("");
            }
            return self->close("reading option: " + ec.message());
        }
        auto header = nbd::decode_option_header(
            std::span<const std::uint8_t, nbd::option_header_size>(self->hs_in_.data(),
                                                                   nbd::option_header_size));
        if (!header) return self->close("malformed option (bad IHAVEOPT magic)", spdlog::level::warn);
        if (header->length > nbd::max_option_length)
            return self->close("option " + std::string(nbd::option_name(header->option)) + " length " +
                                   std::to_string(header->length) + " is too large",
                               spdlog::level::warn);
        self->read_option_data(*header);
    };
    with_stream([&](auto& stream) { boost::asio::async_read(stream, boost::asio::buffer(hs_in_), std::move(on_header)); });
}

void Connection::read_option_data(nbd::OptionHeader header) {
    hs_in_.resize(header.length);
    auto on_data = [self = shared_from_this(), header](const boost::system::error_code& ec, std::size_t) {
        if (ec) return self->close("reading option data: " + ec.message());
        self->answer_option(header);
    };
    with_stream([&](auto& stream) { boost::asio::async_read(stream, boost::asio::buffer(hs_in_), std::move(on_data)); });
}

void Connection::hold_handshake() {
    if (in_handshake()) hs_hold_ = true;
}

void Connection::release_handshake() {
    hs_hold_ = false;
    if (auto step = std::exchange(hs_held_, nullptr); step && !closed_) step();
}

void Connection::answer_option(const nbd::OptionHeader& header) {
    if (hs_hold_ && !negotiation_.shutting_down) {   // answered once the hand-over is decided
        hs_held_ = [this, header] { answer_option(header); };
        return;
    }
    hs_out_.clear();
    auto result = nbd::handle_option(negotiation_, header, hs_in_, context_.exports->infos, hs_out_);
    if (result.refused) refused(*result.refused);
    spdlog::debug("{}: option {} -> {}", tag(), nbd::option_name(header.option),
                  result.next == nbd::Next::close          ? "close"
                  : result.next == nbd::Next::transmission ? "transmission"
                  : result.next == nbd::Next::starttls     ? "TLS handshake"
                                                           : "continue");
    if (result.tls_refused)
        spdlog::warn("{}: refused {} in plaintext: this listener requires TLS (NBD_OPT_STARTTLS)", tag(),
                     nbd::option_name(header.option));
    auto next = [self = shared_from_this(), result](const boost::system::error_code& ec, std::size_t) {
        if (ec) return self->close("writing option reply: " + ec.message());
        switch (result.next) {
        case nbd::Next::more_options: return self->read_option_header();
        case nbd::Next::close:
            // ABORT is a normal way to end; anything else is worth a line.
            if (result.graceful) {
                spdlog::log(self->negotiation_.shutting_down ? spdlog::level::info : spdlog::level::debug, "{}: {}",
                            self->tag(), result.reason);
                if (self->tls_active()) return self->end_tls([self] { self->close(""); });
                return self->close("");
            }
            return self->close(result.reason, spdlog::level::warn);
        case nbd::Next::transmission:
            return self->to_transmission(result.chosen, result.transmission_flags, result.block_status);
        case nbd::Next::starttls: return self->start_tls();
        }
    };
    if (hs_out_.empty()) {
        next({}, 0);
        return;
    }
    with_stream([&](auto& stream) { boost::asio::async_write(stream, boost::asio::buffer(hs_out_), std::move(next)); });
}

// The ACK went out in plaintext; the TLS handshake follows on the same
// socket, still under the handshake timer.
void Connection::start_tls() {
    tls_ = std::make_unique<TlsStream>(socket_, context_.tls->ssl());
    tls_peer_.tag = tag();
    TlsContext::attach(tls_->native_handle(), &tls_peer_);
    tls_->async_handshake(TlsStream::server, [self = shared_from_this()](const boost::system::error_code& ec) {
        if (self->closed_) return;
        SSL* ssl = self->tls_->native_handle();
        if (ec) {
            auto why = TlsContext::verify_error(ssl);
            return self->close("TLS handshake failed: " + ec.message() +
                                   (why.empty() ? "" : " (client certificate: " + why + ")"),
                               spdlog::level::warn);
        }
        self->tls_peer_.identity = TlsContext::peer_identity(ssl, self->tls_peer_);
        // allow: tls_identity rules and the refusal log see it from the next option on.
        if (!self->tls_peer_.identity.empty()) self->identity_.tls_identity = self->tls_peer_.identity;
        self->negotiation_.tls_active = true;
        spdlog::info("{}: TLS up ({}, {}{})", self->tag(), SSL_get_version(ssl), SSL_get_cipher_name(ssl),
                     self->tls_peer_.identity.empty() ? "" : ", identity '" + printable(self->tls_peer_.identity) + "'");
        self->read_option_header();
    });
}

void Connection::end_tls(std::function<void()> then) {
    tls_ending_ = true;
    auto& timer = socket_timer();
    timer.expires_after(tls_goodbye_wait);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec) return;   // the shutdown ended first
        boost::system::error_code ignored;
        self->socket_.cancel(ignored);   // a peer that never answers ours
    });
    tls_->async_shutdown([self = shared_from_this(), then = std::move(then)](const boost::system::error_code&) {
        self->socket_timer().cancel();
        self->tls_ended_ = true;
        then();
    });
}

// The GO was answered before the stop began: the export is not opened any
// more. Before a hand-over began: the export is opened once it failed.
void Connection::to_transmission(const nbd::ExportInfo* info, std::uint16_t flags, bool block_status) {
    if (negotiation_.shutting_down) return close("server shutting down during the handshake");
    if (hs_hold_) {
        hs_held_ = [this, info, flags, block_status] { to_transmission(info, flags, block_status); };
        return;
    }
    enter_transmission(info, flags, block_status);
}

void Connection::enter_transmission(const nbd::ExportInfo* info, std::uint16_t flags, bool block_status) {
    handshake_timer_.cancel();
    hs_in_ = {};
    hs_out_ = {};
    bind_export(*info, flags, block_status, std::nullopt);
    spdlog::info("{}: export '{}' on device {} (loop {}, flags 0x{:x}, {} replies)", tag(), info->name,
                 device_->name(), loop_index_ == no_loop ? 0 : loop_index_, flags,
                 limits_.structured ? "structured" : "simple");
    move_to_its_loop(&Connection::read_more);
}

void Connection::bind_export(const nbd::ExportInfo& info, std::uint16_t flags, bool block_status,
                             std::optional<sched::GroupId> keep_group) {
    binding_ = &context_.exports->binding_of(&info);
    device_ = binding_->device;
    limits_.size = info.size;
    limits_.read_only = binding_->read_only;
    limits_.structured = negotiation_.structured_replies;
    limits_.block_status = block_status;
    limits_.max_payload = info.max_block;
    // The device may run on another loop; classification may touch every device.
    exclusively([&] {
        queue_ = context_.open_queue ? context_.open_queue(id_, identity_, info.name, *binding_, keep_group)
                                     : device_->open_queue(keep_group.value_or(binding_->group));
        group_ = device_->group_of(queue_);
        loop_ = context_.place ? &context_.place(*device_, loop_index_) : &device_->io();
    });
    queue_open_ = true;
    export_name_ = info.name;
    transmission_flags_ = flags;
}

void Connection::exclusively(const std::function<void()>& f) const {
    if (context_.exclusive)
        context_.exclusive(f);
    else
        f();
}

void Connection::move_to_its_loop(void (Connection::*next)()) {
    auto& target = *loop_;
    boost::asio::execution_context& here = boost::asio::query(socket_.get_executor(), boost::asio::execution::context);
    if (&here == &target) return (this->*next)();
    if (tls_) return close("a TLS session cannot move to another event loop", spdlog::level::err);
    // Nothing is pending on the socket between the handshake and the first read.
    boost::system::error_code ec;
    const int fd = socket_.release(ec);
    if (ec) return close("moving to another event loop: " + ec.message(), spdlog::level::err);
    boost::asio::post(target, [self = shared_from_this(), fd, next, &target] {
        if (self->closed_) {   // closed on loop 0 meanwhile (shutdown, hand-over)
            ::close(fd);
            return;
        }
        boost::system::error_code ec;
        if (!adopt_socket(target, fd, self->socket_, ec)) {
            ::close(fd);
            return self->close("adopting the socket on another event loop: " + ec.message(), spdlog::level::err);
        }
        if (self->stop_reading_) return self->maybe_finish();
        if (self->parking_) self->maybe_park();   // asked on loop 0 meanwhile (hand-over)
        ((*self).*next)();
    });
}

// Read at every option, so a reload's new allow: rules hold from the next one.
bool Connection::may_open(const nbd::ExportInfo& info) const {
    return allowed(context_.exports->binding_of(&info).allow, identity_);
}

void Connection::refused(const nbd::ExportInfo& info) {
    // Clients ask twice (libnbd: INFO, then GO): one refusal per export and connection.
    if (std::find(refused_.begin(), refused_.end(), &info) != refused_.end()) return;
    refused_.push_back(&info);
    const auto& binding = context_.exports->binding_of(&info);
    exclusively([&] { binding.device->stats().refused(info.name); });
    spdlog::warn("{}: export '{}' refused: {} matches none of its {} allow: rule(s)", tag(), info.name,
                 identity_.describe(), binding.allow.size());
}

}   // namespace nbdsched::daemon
