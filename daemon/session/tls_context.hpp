// The server's TLS credentials, loaded at start and again by each reload:
// an OpenSSL context (through Boost.Asio's ssl::context) with the X.509
// certificate and key and/or the PSK table, TLS 1.2 at least. Connections
// make their ssl::stream from it when a client sends NBD_OPT_STARTTLS.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace nbdsched::daemon {

using PskTable = std::map<std::string, std::vector<unsigned char>, std::less<>>;

// psktool's format: one "identity:hexkey" per line; blank lines and '#'
// comments skipped. nullopt and `error` ("line N: ...") on anything else.
std::optional<PskTable> parse_psk_file(std::string_view text, std::string& error);

// What the TLS handshake learnt about the peer; attached to each SSL object
// so the OpenSSL callbacks can log with the connection's tag.
struct TlsPeer {
    std::string tag;   // "conn 3 (peer)" for log lines
    // The identity whose key the PSK callback last handed to OpenSSL. Only a
    // claim: OpenSSL may still drop that PSK (a TLS 1.3 suite with another
    // hash) and finish with a certificate, so peer_identity() uses it only
    // when the PSK authenticated the session.
    std::string psk_offered;
    // Set once after a successful handshake, from peer_identity().
    std::string identity;
};

class TlsContext {
public:
    // nullptr and `error` naming the file when a key or certificate cannot
    // be read or does not match.
    static std::unique_ptr<TlsContext> load(const config::Tls& tls, std::string& error);
    // Reads the files again (a reload): when one changed, new handshakes use
    // the new credentials and `note` says which files (sessions already up,
    // and handshakes under way, keep what they started with; the table of a
    // PSK context lives as long as OpenSSL keeps that context). False and
    // `error` naming the file when they cannot be loaded: the credentials in
    // force stay.
    bool reload(const config::Tls& tls, std::string& note, std::string& error);

    // The credentials in force; valid until the next reload() that changes them.
    boost::asio::ssl::context& ssl() { return *ssl_; }
    // After a successful handshake, who the peer proved to be: its PSK
    // identity when a PSK authenticated the session, else the subject CN of
    // a client certificate that verified (its only CN, whole), else empty.
    static std::string peer_identity(SSL* ssl, const TlsPeer& peer);
    // Why the peer's certificate was refused, empty when it was not.
    static std::string verify_error(SSL* ssl);
    static void attach(SSL* ssl, TlsPeer* peer);

private:
    // One reading of the files: the context, and a digest of each file's bytes.
    struct Credentials {
        std::unique_ptr<boost::asio::ssl::context> ssl;
        std::map<std::string, std::string> digests;   // path -> SHA-256 of what was read
        std::size_t psk_identities = 0;
    };
    static std::optional<Credentials> read(const config::Tls& tls, std::string& error);
    static std::unique_ptr<boost::asio::ssl::context> make_context();
    static bool load_certificates(Credentials& into, const config::Tls& tls, std::string& error);
    static bool load_psk(Credentials& into, const std::string& path, std::string& error);
    static unsigned int psk_callback(SSL* ssl, const char* identity, unsigned char* psk, unsigned int max_len);

    TlsContext() = default;

    std::unique_ptr<boost::asio::ssl::context> ssl_;
    std::map<std::string, std::string> digests_;
};

}   // namespace nbdsched::daemon
