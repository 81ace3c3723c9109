// tls: where the server's keys and certificates are. The files themselves
// are read at start and by --check-config (daemon/session/tls_context,
// daemon/process/check_config), not here: loading a config (ctl finds its
// control socket in it, on a machine that may lack the keys) needs none.
#include "config/parsers.hpp"

namespace nbdsched::config::detail {

void parse_tls(Reader& r, const Field& field, Tls& tls) {
    tls.origin = field.at;
    r.read_map(field, {"psk_file", "certificates", "verify_clients"}, [&](const Field& f) {
        if (f.key == "verify_clients") {
            if (auto v = r.boolean(f)) tls.verify_clients = *v;
            return;
        }
        auto v = r.string(f);
        if (!v) return;
        if (v->empty()) return r.error(f, "empty path");
        (f.key == "psk_file" ? tls.psk_file : tls.certificates) = *v;
        (f.key == "psk_file" ? tls.psk_file_origin : tls.certificates_origin) = f.at;
    });
    if (field.value.IsMap() && !tls.enabled())
        r.error(field, "give psk_file:, certificates: or both");
    if (tls.verify_clients && tls.certificates.empty())
        r.error(field, "verify_clients: true needs certificates: (the CA in ca-cert.pem)");
}

// A listener that offers TLS needs credentials to offer.
void check_listen_tls(Reader& r, const Config& config) {
    if (config.tls.enabled()) return;
    for (const auto& l : config.listen)
        if (l.tls != Listen::Tls::off)
            r.error(l.origin, "listen", "tls: on/require needs a top-level tls: section (psk_file or certificates)");
}

}   // namespace nbdsched::config::detail
