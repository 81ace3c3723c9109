#include "daemon/process/check_config.hpp"

#include <iostream>

#include "daemon/session/tls_context.hpp"

namespace nbdsched::daemon {

std::vector<config::Error> tls_file_errors(const config::Tls& tls) {
    std::vector<config::Error> errors;
    std::string error;
    // One part at a time, so that each error names its own key.
    if (!tls.psk_file.empty()) {
        config::Tls psk;
        psk.psk_file = tls.psk_file;
        if (!TlsContext::load(psk, error)) errors.push_back({tls.psk_file_origin, "tls.psk_file", error});
    }
    if (!tls.certificates.empty()) {
        config::Tls certificates;
        certificates.certificates = tls.certificates;
        certificates.verify_clients = tls.verify_clients;
        if (!TlsContext::load(certificates, error))
            errors.push_back({tls.certificates_origin, "tls.certificates", error});
    }
    return errors;
}

int check_config(const std::string& path) {
    auto result = config::load_file(path);
    auto errors = result.config ? tls_file_errors(result.config->tls) : std::move(result.errors);
    for (const auto& e : errors) std::cerr << e.str() << "\n";
    if (!errors.empty()) return 1;
    std::cout << path << ": OK\n";
    return 0;
}

}   // namespace nbdsched::daemon
