#include "daemon/session/tls_context.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>

#include "common/hex.hpp"
#include "common/utf8.hpp"

namespace nbdsched::daemon {

namespace {

std::string openssl_error() {
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0) return "unknown OpenSSL error";
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    return buf;
}

// Our own ex_data slots: Asio keeps its verify callback in the "app data"
// slot of both the SSL and the SSL_CTX, and deletes whatever is there.
int ssl_peer_index() {
    static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
    return index;
}

// A context's PSK table, freed with the context: after a reload, a
// handshake still under way on the previous context looks its key up there.
void free_psk_table(void*, void* table, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<PskTable*>(table); }

int ctx_psk_index() {
    static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, &free_psk_table);
    return index;
}

// Far above any key or certificate file: a path naming a device or a huge
// file is refused instead of read without end.
constexpr std::size_t max_file_bytes = 1 << 20;

// The whole file, its SHA-256 added to `digests` (what a reload compares);
// nullopt and `error` naming it when it cannot be read.
std::optional<std::string> read_whole(const std::string& path, std::map<std::string, std::string>& digests,
                                      std::string& error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = path + ": cannot read: " + std::strerror(errno);
        return std::nullopt;
    }
    std::string text;
    char buf[16384];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, static_cast<std::size_t>(in.gcount()));
        if (text.size() > max_file_bytes) {
            error = path + ": larger than 1MiB: not a key or certificate file";
            return std::nullopt;
        }
    }
    if (in.bad()) {
        error = path + ": cannot read: " + std::strerror(errno);
        return std::nullopt;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_Digest(text.data(), text.size(), md, &md_len, EVP_sha256(), nullptr) != 1) {
        error = path + ": cannot hash: " + openssl_error();
        return std::nullopt;
    }
    digests[path] = std::string(reinterpret_cast<const char*>(md), md_len);
    return text;
}

// Whether the handshake that just ended was authenticated by a PSK: a
// TLS 1.3 session that took a PSK counts as resumed (tickets and the
// session cache are off, so nothing else is), a TLS 1.2 one runs a PSK key
// exchange. A PSK that OpenSSL looked up and then dropped is neither.
bool psk_authenticated(SSL* ssl) {
    if (SSL_version(ssl) >= TLS1_3_VERSION) return SSL_session_reused(ssl) == 1;
    const SSL_CIPHER* cipher = SSL_get_current_cipher(ssl);
    if (!cipher) return false;
    int kx = SSL_CIPHER_get_kx_nid(cipher);
    return kx == NID_kx_psk || kx == NID_kx_ecdhe_psk || kx == NID_kx_dhe_psk || kx == NID_kx_rsa_psk;
}

// The subject CN of a client certificate as a TLS identity; empty when
// there is none, and empty with `why` when it is refused rather than
// guessed at: more than one CN (which one a reader takes depends on the
// order of the RDNs); one that is not a string or has a NUL byte
// ("alice\0.evil.example" is not alice, however a C string reads it); one
// longer than a PSK identity may be.
std::string common_name(X509* cert, std::string& why) {
    X509_NAME* subject = X509_get_subject_name(cert);
    int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
    if (at < 0) return {};
    if (X509_NAME_get_index_by_NID(subject, NID_commonName, at) >= 0) {
        why = "more than one CN in its subject";
        return {};
    }
    unsigned char* utf8 = nullptr;
    int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
    if (len < 0) {
        why = "its CN is not a string";
        return {};
    }
    std::string cn(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
    OPENSSL_free(utf8);
    if (cn.empty()) why = "its CN is empty";
    if (cn.find('\0') != std::string::npos) why = "its CN has a NUL byte";
    if (cn.size() > PSK_MAX_IDENTITY_LEN) why = "its CN is longer than " + std::to_string(PSK_MAX_IDENTITY_LEN) + " bytes";
    return why.empty() ? cn : std::string{};
}

}   // namespace

std::optional<PskTable> parse_psk_file(std::string_view text, std::string& error) {
    PskTable out;
    std::size_t line_no = 0;
    while (!text.empty()) {
        auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        ++line_no;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
        if (line.empty() || line.front() == '#') continue;
        auto at = "line " + std::to_string(line_no) + ": ";
        auto colon = line.rfind(':');
        if (colon == std::string_view::npos || colon == 0) {
            error = at + "expected identity:hexkey";
            return std::nullopt;
        }
        auto hex = line.substr(colon + 1);
        if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 2 * PSK_MAX_PSK_LEN) {
            error = at + "the key must be an even number of hex digits (at most " +
                    std::to_string(2 * PSK_MAX_PSK_LEN) + ")";
            return std::nullopt;
        }
        std::string lower(hex);   // psktool writes a-f; a key typed by hand may be A-F
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        auto key = from_hex(lower);
        if (!key) {
            error = at + "the key is not hexadecimal";
            return std::nullopt;
        }
        auto identity = line.substr(0, colon);
        if (identity.size() > PSK_MAX_IDENTITY_LEN) {
            error = at + "identity longer than " + std::to_string(PSK_MAX_IDENTITY_LEN) + " bytes";
            return std::nullopt;
        }
        if (!out.emplace(std::string(identity), std::move(*key)).second) {
            error = at + "identity '" + std::string(identity) + "' listed twice";
            return std::nullopt;
        }
    }
    if (out.empty()) {
        error = "no keys";
        return std::nullopt;
    }
    return out;
}

std::unique_ptr<boost::asio::ssl::context> TlsContext::make_context() {
    auto context = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_server);
    auto& ssl = *context;
    SSL_CTX* ctx = ssl.native_handle();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    ssl.set_options(boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::single_dh_use);
    // TLS 1.2 PSK suites are not in DEFAULT; 1.3 suites are set apart.
    SSL_CTX_set_cipher_list(ctx, "DEFAULT:PSK");
    // A TLS 1.3 PSK from the PSK callback is bound to SHA-256: a SHA-384
    // suite picked by the client's preference (GnuTLS puts AES-256 first)
    // would make OpenSSL ignore the key and ask for a certificate instead
    // (and that session has no PSK identity: see peer_identity()).
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384");
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
    // No resumption: an NBD connection lives long and reconnects rarely,
    // and tickets would be one more write after every handshake.
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    // Still required once clients are verified (a TLS 1.3 PSK makes a session).
    static const unsigned char sid[] = "nbdsched";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    return context;
}

std::optional<TlsContext::Credentials> TlsContext::read(const config::Tls& tls, std::string& error) {
    Credentials c;
    c.ssl = make_context();
    if (!tls.certificates.empty() && !load_certificates(c, tls, error)) return std::nullopt;
    if (!tls.psk_file.empty() && !load_psk(c, tls.psk_file, error)) return std::nullopt;
    return c;
}

std::unique_ptr<TlsContext> TlsContext::load(const config::Tls& tls, std::string& error) {
    auto credentials = read(tls, error);
    if (!credentials) return nullptr;
    std::unique_ptr<TlsContext> c(new TlsContext());
    c->ssl_ = std::move(credentials->ssl);
    c->digests_ = std::move(credentials->digests);
    return c;
}

bool TlsContext::reload(const config::Tls& tls, std::string& note, std::string& error) {
    auto credentials = read(tls, error);
    if (!credentials) return false;
    std::string changed;
    for (const auto& [path, digest] : credentials->digests) {
        auto was = digests_.find(path);
        if (was == digests_.end() || was->second != digest) changed += (changed.empty() ? "" : ", ") + path;
    }
    if (changed.empty()) return true;
    // The context in force goes; OpenSSL keeps it (and its PSK table) for
    // as long as a session or a handshake under way still uses it.
    ssl_ = std::move(credentials->ssl);
    digests_ = std::move(credentials->digests);
    note = "tls: " + changed + " changed: new TLS handshakes use the new credentials" +
           (tls.psk_file.empty() ? "" : " (" + std::to_string(credentials->psk_identities) + " PSK identities)") +
           ", sessions already up keep theirs";
    return true;
}

bool TlsContext::load_certificates(Credentials& into, const config::Tls& tls, std::string& error) {
    SSL_CTX* ctx = into.ssl->native_handle();
    const std::string cert = tls.certificates + "/server-cert.pem";
    const std::string key = tls.certificates + "/server-key.pem";
    const std::string ca = tls.certificates + "/ca-cert.pem";
    // Read here for the digests; OpenSSL reads them again, by name.
    if (!read_whole(cert, into.digests, error) || !read_whole(key, into.digests, error)) return false;
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) != 1) {
        error = cert + ": not a PEM certificate: " + openssl_error();
        return false;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
        error = key + ": not a PEM private key: " + openssl_error();
        return false;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        error = key + ": does not match " + cert;
        return false;
    }
    if (!tls.verify_clients) return true;
    if (!read_whole(ca, into.digests, error)) return false;
    if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) {
        error = ca + ": not a PEM CA certificate: " + openssl_error();
        return false;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    return true;
}

bool TlsContext::load_psk(Credentials& into, const std::string& path, std::string& error) {
    auto text = read_whole(path, into.digests, error);
    if (!text) return false;
    auto table = parse_psk_file(*text, error);
    if (!table) {
        error = path + ": " + error;
        return false;
    }
    into.psk_identities = table->size();
    SSL_CTX* ctx = into.ssl->native_handle();
    auto owned = std::make_unique<PskTable>(std::move(*table));
    if (SSL_CTX_set_ex_data(ctx, ctx_psk_index(), owned.get()) != 1) {
        error = path + ": " + openssl_error();
        return false;
    }
    owned.release();   // the context's now (free_psk_table)
    // OpenSSL uses this callback for TLS 1.3 too (with SHA-256, as GnuTLS).
    SSL_CTX_set_psk_server_callback(ctx, &TlsContext::psk_callback);
    return true;
}

unsigned int TlsContext::psk_callback(SSL* ssl, const char* identity, unsigned char* psk, unsigned int max_len) {
    const auto* table = static_cast<const PskTable*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_psk_index()));
    auto* peer = static_cast<TlsPeer*>(SSL_get_ex_data(ssl, ssl_peer_index()));
    std::string_view id = identity ? identity : "";
    if (peer) peer->psk_offered.clear();
    auto it = table ? table->find(id) : PskTable::const_iterator{};
    if (!table || it == table->end() || it->second.size() > max_len) {
        spdlog::warn("{}: TLS: unknown PSK identity '{}'", peer ? peer->tag : "?", printable(id));
        return 0;
    }
    std::memcpy(psk, it->second.data(), it->second.size());
    // Not the peer's identity yet: the key is proved (or dropped) later.
    if (peer) peer->psk_offered = std::string(id);
    return static_cast<unsigned int>(it->second.size());
}

void TlsContext::attach(SSL* ssl, TlsPeer* peer) { SSL_set_ex_data(ssl, ssl_peer_index(), peer); }

std::string TlsContext::peer_identity(SSL* ssl, const TlsPeer& peer) {
    if (psk_authenticated(ssl)) {
        // TLS 1.2 keeps the identity in the session; OpenSSL 3.0 does not
        // for a TLS 1.3 PSK from the callback: there the PSK used is the
        // last one the callback gave (OpenSSL stops at the first it keeps).
        const char* id = SSL_get_psk_identity(ssl);
        return id ? std::string(id) : peer.psk_offered;
    }
    X509* cert = SSL_get0_peer_certificate(ssl);
    if (!cert || SSL_get_verify_result(ssl) != X509_V_OK) return {};
    std::string why;
    auto cn = common_name(cert, why);
    if (!why.empty()) spdlog::warn("{}: TLS: client certificate without an identity: {}", peer.tag, why);
    return cn;
}

std::string TlsContext::verify_error(SSL* ssl) {
    long result = SSL_get_verify_result(ssl);
    if (result == X509_V_OK) return {};
    return X509_verify_cert_error_string(result);
}

}   // namespace nbdsched::daemon
