// An NBD client with OpenSSL's TLS, for the cases libnbd (GnuTLS) cannot
// make: a PSK identity claimed with any key under chosen TLS 1.3 suites,
// optionally next to a client certificate. It sends NBD_OPT_STARTTLS, runs
// the handshake, then NBD_OPT_INFO for each export named and prints:
//   tls TLSv1.3 TLS_AES_256_GCM_SHA384 psk=no     (or "tls failed: ...", exit 3)
//   NAME ok | NAME refused 0xTYPE
// usage: starttls_client [-2] [-s SUITES] [-p IDENTITY:HEXKEY] [-c CERT -k KEY] SOCKET EXPORT...
//   -2  TLS 1.2 only (PSK and certificate cipher suites)
#include <getopt.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace {

constexpr std::uint64_t IHAVEOPT = 0x49484156454f5054ull;
constexpr std::uint32_t OPT_INFO = 6;
constexpr std::uint32_t OPT_STARTTLS = 5;
constexpr std::uint32_t REP_ACK = 1;

std::string psk_identity;
std::vector<unsigned char> psk_key;

unsigned int psk_callback(SSL*, const char*, char* identity, unsigned int max_identity, unsigned char* psk,
                          unsigned int max_psk) {
    if (psk_identity.size() >= max_identity || psk_key.size() > max_psk) return 0;
    std::memcpy(identity, psk_identity.c_str(), psk_identity.size() + 1);
    std::memcpy(psk, psk_key.data(), psk_key.size());
    return static_cast<unsigned int>(psk_key.size());
}

void put32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (24 - 8 * i));
}

void put64(std::uint8_t* p, std::uint64_t v) {
    put32(p, v >> 32);
    put32(p + 4, static_cast<std::uint32_t>(v));
}

std::uint32_t get32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}

void die(const char* what) {
    std::printf("%s\n", what);
    std::exit(2);
}

void plain_read(int fd, std::uint8_t* buf, std::size_t n) {
    for (std::size_t got = 0; got < n;) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) die("connection closed in plaintext");
        got += static_cast<std::size_t>(r);
    }
}

void plain_write(int fd, const std::uint8_t* buf, std::size_t n) {
    if (write(fd, buf, n) != static_cast<ssize_t>(n)) die("plaintext write failed");
}

void tls_read(SSL* ssl, std::uint8_t* buf, std::size_t n) {
    for (std::size_t got = 0; got < n;) {
        int r = SSL_read(ssl, buf + got, static_cast<int>(n - got));
        if (r <= 0) die("connection closed under TLS");
        got += static_cast<std::size_t>(r);
    }
}

void parse_psk(const char* arg) {
    const char* colon = std::strrchr(arg, ':');
    if (!colon) die("-p wants IDENTITY:HEXKEY");
    psk_identity.assign(arg, colon);
    psk_key.clear();
    for (const char* hex = colon + 1; hex[0] && hex[1]; hex += 2) {
        char byte[3] = {hex[0], hex[1], 0};
        psk_key.push_back(static_cast<unsigned char>(std::strtoul(byte, nullptr, 16)));
    }
}

// NBD_OPT_INFO for `name`; prints whether the server answered it.
void info(SSL* ssl, const char* name) {
    auto len = static_cast<std::uint32_t>(std::strlen(name));
    std::vector<std::uint8_t> opt(16 + 4 + len + 2);   // ends with no information requests
    put64(opt.data(), IHAVEOPT);
    put32(opt.data() + 8, OPT_INFO);
    put32(opt.data() + 12, 4 + len + 2);
    put32(opt.data() + 16, len);
    std::memcpy(opt.data() + 20, name, len);
    if (SSL_write(ssl, opt.data(), static_cast<int>(opt.size())) <= 0) die("TLS write failed");
    for (;;) {
        std::uint8_t reply[20];
        tls_read(ssl, reply, sizeof reply);
        std::uint32_t type = get32(reply + 12), data_len = get32(reply + 16);
        std::vector<std::uint8_t> data(data_len);
        tls_read(ssl, data.data(), data.size());
        if (type == REP_ACK) {
            std::printf("%s ok\n", name);
            return;
        }
        if (type & 0x80000000u) {
            std::printf("%s refused 0x%x\n", name, type);
            return;
        }
    }
}

}   // namespace

int main(int argc, char** argv) {
    int tls12 = 0;
    const char *suites = nullptr, *cert = nullptr, *key = nullptr;
    for (int c; (c = getopt(argc, argv, "2s:p:c:k:")) != -1;) {
        switch (c) {
        case '2': tls12 = 1; break;
        case 's': suites = optarg; break;
        case 'p': parse_psk(optarg); break;
        case 'c': cert = optarg; break;
        case 'k': key = optarg; break;
        default: return 1;
        }
    }
    if (argc - optind < 1 || !cert != !key) {
        std::fprintf(stderr, "usage: %s [-2] [-s SUITES] [-p IDENTITY:HEXKEY] [-c CERT -k KEY] SOCKET EXPORT...\n",
                     argv[0]);
        return 1;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, argv[optind], sizeof addr.sun_path - 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) die("cannot connect");

    std::uint8_t greeting[18];
    plain_read(fd, greeting, sizeof greeting);
    std::uint8_t flags[4];
    put32(flags, 3);   // FIXED_NEWSTYLE | NO_ZEROES
    plain_write(fd, flags, sizeof flags);
    std::uint8_t starttls[16];
    put64(starttls, IHAVEOPT);
    put32(starttls + 8, OPT_STARTTLS);
    put32(starttls + 12, 0);
    plain_write(fd, starttls, sizeof starttls);
    std::uint8_t reply[20];
    plain_read(fd, reply, sizeof reply);
    if (get32(reply + 12) != REP_ACK || get32(reply + 16) != 0) die("STARTTLS refused");

    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    if (tls12) {
        SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_cipher_list(ctx, psk_key.empty() ? "DEFAULT" : "PSK");
    } else {
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    }
    if (suites && SSL_CTX_set_ciphersuites(ctx, suites) != 1) die("bad suites");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    if (cert && (SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM) != 1 ||
                 SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1))
        die("cannot load the client certificate");
    if (!psk_key.empty()) SSL_CTX_set_psk_client_callback(ctx, psk_callback);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
        char why[256];
        ERR_error_string_n(ERR_get_error(), why, sizeof why);
        std::printf("tls failed: %s\n", why);
        return 3;
    }
    // A TLS 1.3 handshake that used the PSK shows as a resumed session.
    int psk_used = SSL_session_reused(ssl) || SSL_CIPHER_get_auth_nid(SSL_get_current_cipher(ssl)) == NID_auth_psk;
    std::printf("tls %s %s psk=%s\n", SSL_get_version(ssl), SSL_get_cipher_name(ssl), psk_used ? "yes" : "no");
    std::fflush(stdout);
    for (int i = optind + 1; i < argc; ++i) info(ssl, argv[i]);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}
