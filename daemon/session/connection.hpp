// One client connection: the fixed newstyle handshake, then the transmission
// phase. Requests are parsed out of a large read buffer (many headers per
// read), submitted to the export's device, and answered out of order through
// one queue of replies written with scatter-gather, one write at a time.
// Back-pressure: no new request is parsed while the connection has too many
// requests (or bytes) read but not yet answered, or while its device has
// (InflightBudget: then it waits there for room).
//
// Lifetime: the server owns the connection (shared_ptr) until it reports
// itself finished; Asio handlers hold it too. It never finishes while the
// device holds one of its requests.
#pragma once

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/common.h>
#include <sys/uio.h>
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "daemon/tenancy/classify.hpp"
#include "daemon/tenancy/exports.hpp"
#include "daemon/device/handler_slot.hpp"
#include "daemon/device/inflight_budget.hpp"
#include "daemon/device/io_request.hpp"
#include "daemon/session/connection_state.hpp"
#include "daemon/session/job_timer.hpp"
#include "daemon/session/tls_context.hpp"
#include "nbd/negotiation.hpp"
#include "nbd/transmission.hpp"

namespace nbdsched::daemon {

using Socket = boost::asio::generic::stream_protocol::socket;
// Over the connection's own socket, which stays the one to shut down and close.
using TlsStream = boost::asio::ssl::stream<Socket&>;

// A connected stream socket's descriptor as a Socket of `io` (its family read
// from the descriptor); false and `ec` when Asio refuses it (the fd stays open).
bool adopt_socket(boost::asio::io_context& io, int fd, Socket& into, boost::system::error_code& ec);

class Connection;

// What all connections share; owned by the server, outlives them.
struct ConnectionContext {
    const ExportTable* exports = nullptr;
    config::Limits limits;
    TlsContext* tls = nullptr;   // null: no tls: section, STARTTLS is refused everywhere
    // Called (posted, never from inside a connection method) once the
    // connection is closed and no request of it is left anywhere.
    std::function<void(Connection&)> on_finished;
    // Called (posted) once a connection asked to park() has stopped at a
    // request boundary with nothing left to answer.
    std::function<void(Connection&)> on_parked;
    // Opens the connection's queue as it enters transmission (classification
    // rules pick the group, or `keep_group`: a handed-over connection's);
    // unset: the export's group.
    std::function<sched::QueueId(std::uint64_t connection, const PeerInfo& identity, const std::string& export_name,
                                 const ExportBinding& binding, std::optional<sched::GroupId> keep_group)>
        open_queue;
    // Runs `f` where it may touch any device, whichever event loop runs it
    // (daemon/process/event_loops.hpp); unset: `f` runs directly.
    std::function<void(const std::function<void()>&)> exclusive;
    // The event loop a connection entering transmission runs on, and its
    // index (called inside exclusive()); unset: its device's.
    std::function<boost::asio::io_context&(Device&, std::size_t& index)> place;
};

class Connection final : public std::enable_shared_from_this<Connection>,
                         public RequestSink,
                         public InflightBudget::Waiter {
public:
    // `identity`: who the peer is, taken at accept (access rules, classification).
    Connection(Socket socket, std::uint64_t id, std::string peer, PeerInfo identity, const ConnectionContext& context,
               nbd::TlsMode tls_mode = nbd::TlsMode::off);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    void start();
    // Graceful stop: no new requests; in-flight ones are answered; then
    // close. In the handshake: the next option is answered
    // NBD_REP_ERR_SHUTDOWN, then close.
    void shutdown();
    // Closes the socket now (requests at the device still complete first).
    // Protocol violations log at warn, ordinary endings at info.
    void close(const std::string& reason, spdlog::level::level_enum level = spdlog::level::info);

    std::uint64_t id() const { return id_; }
    bool in_transmission() const { return device_ != nullptr; }
    // Still negotiating (the NBD options or a TLS handshake), not closed.
    bool in_handshake() const { return device_ == nullptr && !closed_; }
    // Who the peer is, as read at accept.
    const PeerInfo& peer_identity() const { return identity_; }
    // The device its export is on; null before transmission.
    const Device* device() const { return device_; }
    // The event loop of its transmission phase (ConnectionContext::place);
    // no_loop before it, or without `place`.
    static constexpr std::size_t no_loop = SIZE_MAX;
    std::size_t loop_index() const { return loop_index_; }
    bool tls_active() const { return tls_ != nullptr && negotiation_.tls_active; }
    // Who the peer proved to be over TLS: the PSK identity or the client
    // certificate's subject CN; empty without TLS or without a client certificate.
    const std::string& tls_identity() const { return tls_peer_.identity; }

    // Planned restart (connection_handover.cpp). park(): read no further
    // than the next request boundary, answer everything read, then report
    // through context.on_parked; the socket stays open, nothing is lost.
    // unpark(): the hand-over failed, carry on reading.
    void park();
    void unpark();
    // Planned restart, in the handshake (connection_handshake.cpp): while
    // the hand-over is decided the client's next step waits (its next
    // option is read but not answered; a GO answered just before does not
    // enter transmission). release_handshake(): it failed, go on as usual;
    // shutdown() instead: it succeeded, answer NBD_REP_ERR_SHUTDOWN.
    void hold_handshake();
    void release_handshake();
    bool parked() const { return parked_; }
    int native_handle() { return socket_.native_handle(); }
    // A parked connection's state; `group` is left to the caller to name.
    ConnectionState handover_state() const;
    sched::GroupId group() const { return group_; }
    // In the new process, instead of start(): the transmission phase of a
    // handed-over socket goes on. An export that is gone or changed size
    // closes the connection with an error logged.
    void resume(const ConnectionState& state, std::optional<sched::GroupId> group);

    void request_done(IoRequest& request) override;
    // A reload changed limits.stall_timeout (connection_stall.cpp). Called
    // under exclusive(), every loop paused.
    void stall_timeout_changed();

    // Requests are parsed out of a buffer this large (a hand-over passes at most this many unread bytes).
    static constexpr std::size_t read_buffer_size = 256u << 10;
    // A connection's own buffer: a 4 KiB WRITE and its header, or many
    // headers; reads that fill it move to a large one (buffer_pool).
    static constexpr std::size_t small_read_size = 8u << 10;
    // How long a reply batch may wait for the client to make room, or an
    // in-place WRITE payload for the client to send the rest, before the
    // device's pages it holds are let go (the data is copied or received
    // into a buffer instead). Much longer than a 1 MiB transfer takes on a
    // client that keeps up (the copy is then never made), short next to a
    // paused VM: a pin held meanwhile keeps every page freed on the device.
    static constexpr auto stall_copy_after = std::chrono::milliseconds(100);
    void budget_available() override;

private:
    // A large payload's SO_RCVLOWAT over TCP (raise_low_water).
    enum class LowWater { unused,
                          raised,
                          done };   // this payload's stall step came: not again for it
    enum class ReadState { header,
                           payload,
                           discard };

    // Closes the connection at `until` unless it entered transmission.
    void watch_handshake(std::chrono::steady_clock::time_point until);

    // connection_handshake.cpp
    void send_greeting();
    void read_client_flags();
    void read_option_header();
    void read_option_data(nbd::OptionHeader header);
    void answer_option(const nbd::OptionHeader& header);
    void to_transmission(const nbd::ExportInfo* info, std::uint16_t flags, bool block_status);
    void enter_transmission(const nbd::ExportInfo* info, std::uint16_t flags, bool block_status);
    void bind_export(const nbd::ExportInfo& info, std::uint16_t flags, bool block_status,
                     std::optional<sched::GroupId> keep_group);

    void start_tls();
    // Ends the TLS session with close_notify before the TCP connection closes
    // (the spec asks for it after NBD_CMD_DISC and NBD_OPT_ABORT), then runs
    // `then`; the peer's own close_notify is waited for only briefly.
    void end_tls(std::function<void()> then);

    // connection_handover.cpp
    void maybe_park();
    void on_parking_read(const boost::system::error_code& ec, std::size_t n);

    // Runs `f` with the stream the bytes go through: the socket, or the TLS
    // stream over it once STARTTLS succeeded. One test per I/O call, not per byte.
    template <class F>
    void with_stream(F&& f) {
        if (tls_)
            f(*tls_);
        else
            f(socket_);
    }
    // The transmission phase runs on the loop placed for it (loop_): the
    // socket moves there (when it is another one), then `next` runs there.
    void move_to_its_loop(void (Connection::*next)());
    void exclusively(const std::function<void()>& f) const;
    bool may_open(const nbd::ExportInfo& info) const;
    void refused(const nbd::ExportInfo& info);

    // connection_reader.cpp
    void read_more();
    void pick_read_buffer();
    void on_read(const boost::system::error_code& ec, std::size_t n);
    void parse();
    bool consume_payload();
    void read_payload_direct();
    std::byte* payload_buffer_at();
    ssize_t recv_in_place();
    void watch_payload_stall(bool progressed);
    void raise_low_water();
    void lower_low_water(LowWater next);
    void unpin_stalled_payload();
    void read_payload_tls();
    void payload_done();
    void payload_received(IoRequest& r);
    bool place_payload(IoRequest& r);
    void handle_request(const nbd::RequestHeader& header);
    void submit(IoRequest& r);
    void charge(IoRequest& r, std::uint64_t bytes);
    bool pause_if_over_limits();
    void resume();

    // connection_writer.cpp
    IoRequest& acquire();
    void release(IoRequest& r);
    void queue_reply(IoRequest& r);
    void flush_replies();
    void send_batch();
    void send_tls_batch();
    void batch_sent();
    void advance_iov(std::size_t n);
    void watch_stall(bool progressed);
    void end_stall();
    void unpin_stalled();
    void copy_out(IoRequest& r);
    void on_written(const boost::system::error_code& ec);
    void after_write();
    void maybe_finish();
    bool linger();
    void discard_read();
    void watch_linger(std::chrono::steady_clock::time_point until);
    // connection_stall.cpp: limits.stall_timeout. Once the stall timer of
    // `side` has let go of the device's pages, it goes on timing the wait,
    // and closes the connection once it has lasted the timeout. `request`:
    // a request begun and not whole, that holds no pages (part of its
    // header, or a refused WRITE's payload read to be dropped).
    enum class StallSide { replies,
                           payload,
                           request };
    void watch_request_stall();
    void time_stall(StallSide side);
    bool stalled_on(StallSide side) const;
    void close_stalled(StallSide side, std::chrono::steady_clock::duration waited);

    // The timer whose handlers run on the loop that owns the socket now:
    // handshake_timer_ during the handshake, closing_timer_ after it.
    boost::asio::steady_timer& socket_timer();

    std::string tag() const;

    Socket socket_;
    std::uint64_t id_;
    std::string peer_;
    // Read at accept; TLS code adds tls_identity once its handshake is done.
    PeerInfo identity_;
    const ConnectionContext& context_;

    // handshake; in a graceful stop it times the linger (linger())
    boost::asio::steady_timer handshake_timer_;
    // Times the linger and the TLS goodbye once the connection is on its
    // own loop: handshake_timer_ stays bound to loop 0, which accepted the
    // socket, and its handler would race the connection's loop there.
    JobTimer closing_timer_;
    nbd::Negotiation negotiation_;
    std::vector<std::uint8_t> hs_in_;
    std::vector<std::uint8_t> hs_out_;
    std::unique_ptr<TlsStream> tls_;
    bool tls_ending_ = false;   // close_notify on its way
    bool tls_ended_ = false;
    TlsPeer tls_peer_;
    std::vector<const nbd::ExportInfo*> refused_;   // exports its allow: rules refused, counted once
    // A hand-over is being decided: the next step of the handshake waits
    // (hold_handshake), here.
    bool hs_hold_ = false;
    std::function<void()> hs_held_;

    // transmission
    Device* device_ = nullptr;
    boost::asio::io_context* loop_ = nullptr;   // the loop it runs on (and its requests' home)
    std::size_t loop_index_ = no_loop;
    const ExportBinding* binding_ = nullptr;
    nbd::ExportLimits limits_;
    sched::QueueId queue_ = 0;
    sched::GroupId group_ = 0;   // the queue's group: its share of the device's in-flight budget
    bool queue_open_ = false;

    // rbuf_ is small_ or, while reads fill that (busy_), big_ from the buffer pool.
    std::array<std::uint8_t, small_read_size> small_;
    AlignedBuffer big_;
    std::uint8_t* rbuf_ = small_.data();
    std::size_t rcap_ = small_read_size;
    bool busy_ = false;
    std::size_t rbeg_ = 0;
    std::size_t rend_ = 0;
    DetachedSlot read_slot_;   // the pending read's Asio operation (its handler holds this connection)
    ReadState rstate_ = ReadState::header;
    IoRequest* current_ = nullptr;     // request whose WRITE payload is being read
    std::uint64_t payload_left_ = 0;   // payload (or discarded) bytes still to come
    std::size_t payload_got_ = 0;
    std::vector<iovec> recv_iov_;   // recv_in_place's; reused: no allocation per request
    // SO_RCVLOWAT for the rest of a large payload over TCP (raise_low_water).
    LowWater low_water_ = LowWater::unused;
    bool tcp_ = false;       // a TCP socket (not Unix): SO_RCVLOWAT wakes epoll only then
    bool reading_ = false;   // an async read is pending
    bool parsing_ = false;
    bool paused_ = false;           // back-pressure
    bool waiting_budget_ = false;   // in line at the device's InflightBudget
    bool has_ticket_ = false;       // reached the head of that line: may take one request
    bool stop_reading_ = false;     // DISC, EOF or shutdown: no more requests
    bool parking_ = false;          // hand-over: stop at the next request boundary
    bool parked_ = false;           // ...and there now, nothing pending
    std::string export_name_;
    std::uint16_t transmission_flags_ = 0;

    // An in-place payload the client has not finished sending a while after
    // the daemon first had to wait for it lets go of the device's pages
    // (unpin_stalled_payload), as a stalled reply batch does. The same timer
    // times a request header or a refused WRITE's payload the client stops
    // sending half-way (StallSide::request).
    JobTimer payload_timer_;
    bool payload_watched_ = false;   // the current payload's (or request's) timer runs
    bool payload_checks_ = false;    // ...past its stall step: each run checks stall_timeout
    // Since when the current payload (or request) has waited for the client
    // with no byte received (limits.stall_timeout).
    std::chrono::steady_clock::time_point payload_wait_since_;

    // Graceful stop (shutdown()): no request past the next boundary; once
    // every reply is out, the sending half closes and what the client still
    // sends is read and dropped until it hangs up or linger_limit passes.
    bool draining_ = false;
    bool lingering_ = false;   // ...the sending half is closed: waiting for the client's EOF
    bool peer_gone_ = false;   // ...and it came (or the wait ended)

    // requests read but not yet answered, and their bytes
    std::size_t inflight_ = 0;
    std::uint64_t inflight_bytes_ = 0;
    std::vector<std::unique_ptr<IoRequest>> all_;
    std::vector<IoRequest*> free_;

    std::vector<IoRequest*> pending_;   // replies waiting for the writer
    std::vector<IoRequest*> batch_;     // replies being written now
    std::vector<iovec> iov_;            // reused: no allocation per write
    std::size_t iov_at_ = 0;            // the first iovec not (wholly) written yet
    // TLS: the batch copied into one buffer, as an ssl::stream write takes
    // one buffer at a time (a TLS record per 16-byte reply header otherwise).
    std::vector<std::uint8_t> tls_out_;
    std::size_t tls_sent_ = 0;   // ...of which the TLS stream has taken this much
    // A batch the client has not taken for a while is copied here and lets
    // go of the device's pages (RAM replies are sent from them): a paused or
    // stalled client must not keep every page trimmed meanwhile.
    JobTimer stall_timer_;
    std::vector<std::byte> stall_copy_;
    // Since when the batch has waited for room with no byte taken (limits.stall_timeout).
    std::chrono::steady_clock::time_point reply_wait_since_;
    bool stall_watched_ = false;   // this batch waited for room: the timer runs
    bool stalled_ = false;         // ...and fired: replies queued now are copied too
    bool writing_ = false;
    bool flush_posted_ = false;   // a flush_replies() is posted for replies queued outside a parse
    DetachedSlot flush_slot_;     // that post's Asio operation (its handler holds this connection)

    bool closed_ = false;
    bool finished_ = false;
};

}   // namespace nbdsched::daemon
