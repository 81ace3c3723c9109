// nbdsched-load: a load on one NBD connection that costs its client little,
// for measuring a server where fio's single thread would be the limit (one
// system call sends every free slot's request, one reads every reply that
// has arrived). Plain NBD: fixed newstyle, NBD_OPT_GO, simple replies; no TLS.
//   nbdsched-load (--unix PATH | --tcp HOST:PORT) [--export NAME]
//                 --rw read|write|randread|randwrite [--bs 4k] [--qd 64]
//                 [--seconds 3] [--seed N] [--stall-timeout 30]
// Prints one JSON line: requests, bytes, errors, seconds (first request to
// last reply), iops, mib_s, and cpu_s: this process's CPU over the load.
// Exit status: 0 every request answered without error; 1 the server could
// not be reached, refused the request size, broke the connection, made no
// progress for the stall timeout or answered an error; 2 a bad command line
// (also --qd x --bs over 1 GiB of write buffers).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <sys/resource.h>

#include "common/units.hpp"
#include "config/config.hpp"
#include "kernel/connect.hpp"
#include "tools/load/load_loop.hpp"

namespace {

using namespace nbdsched;

constexpr std::uint64_t max_write_buffers = 1ull << 30;

double cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
    return s(u.ru_utime) + s(u.ru_stime);
}

}   // namespace

int main(int argc, char** argv) {
    CLI::App app{"a light NBD load on one connection"};
    kernel::Target target;
    std::string tcp, rw, bs = "4k";
    unsigned depth = 64;
    double seconds = 3;
    load::LoadSpec spec;
    auto* unix_opt = app.add_option("--unix", target.unix_path, "the server's Unix socket");
    auto* tcp_opt = app.add_option("--tcp", tcp, "the server's HOST:PORT");
    unix_opt->excludes(tcp_opt);
    app.add_option("--export", target.export_name, "export name (default \"\")");
    app.add_option("--rw", rw, "read, write, randread or randwrite")
        ->required()
        ->check(CLI::IsMember({"read", "write", "randread", "randwrite"}));
    app.add_option("--bs", bs, "request size, a multiple of 512 (4k, 1M)");
    app.add_option("--qd", depth, "requests in flight")->check(CLI::Range(1u, 1024u));
    app.add_option("--seconds", seconds, "how long to send requests")->check(CLI::Range(0.01, 3600.0));
    app.add_option("--seed", spec.seed, "seed of the random offsets");
    double stall = 30;
    app.add_option("--stall-timeout", stall, "seconds without progress before giving up (default 30)")
        ->check(CLI::Range(0.001, 3600.0));
    CLI11_PARSE(app, argc, argv);
    if (target.unix_path.empty() && tcp.empty()) {
        std::fprintf(stderr, "nbdsched-load: --unix or --tcp is required\n");
        return 2;
    }
    if (!tcp.empty()) {
        std::string why;
        auto where = config::parse_tcp_listen(tcp, why);   // the syntax of the daemon's --listen-tcp
        if (!where) {
            std::fprintf(stderr, "nbdsched-load: --tcp %s: %s\n", tcp.c_str(), why.c_str());
            return 2;
        }
        target.host = where->host;
        target.port = where->port;
    }
    auto block = parse_size(bs);
    if (!block || *block == 0 || *block % 512 != 0 || *block > (32u << 20)) {
        std::fprintf(stderr, "nbdsched-load: --bs %s: expected a multiple of 512 up to 32M\n", bs.c_str());
        return 2;
    }
    spec.write = rw.find("write") != std::string::npos;
    // Every slot keeps its own write payload: bounded, so that a large
    // --qd times --bs is a usage error and not a failed allocation.
    if (spec.write && std::uint64_t(depth) * *block > max_write_buffers) {
        std::fprintf(stderr, "nbdsched-load: --qd %u x --bs %s is over 1 GiB of write buffers\n", depth, bs.c_str());
        return 2;
    }
    spec.random = rw.starts_with("rand");
    spec.block = static_cast<std::uint32_t>(*block);
    spec.depth = depth;
    spec.duration = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds));
    spec.stall_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(stall));

    std::string error;
    auto connected = kernel::connect_export(target, std::chrono::seconds(10), error);
    if (!connected) {
        std::fprintf(stderr, "nbdsched-load: %s\n", error.c_str());
        return 1;
    }
    spec.export_size = connected->info.size;
    if (spec.export_size < spec.block) {
        std::fprintf(stderr, "nbdsched-load: the export (%llu bytes) is smaller than one request\n",
                     static_cast<unsigned long long>(spec.export_size));
        return 1;
    }
    if (spec.block > connected->info.max_block) {
        std::fprintf(stderr, "nbdsched-load: --bs %s is over the export's largest request (%u bytes)\n", bs.c_str(),
                     connected->info.max_block);
        return 1;
    }
    if (spec.write && (connected->info.flags & nbd::tflag_read_only)) {
        std::fprintf(stderr, "nbdsched-load: the export is read-only\n");
        return 1;
    }
    double cpu0 = cpu_seconds();
    auto totals = load::run_load(connected->socket.get(), spec);
    double cpu = cpu_seconds() - cpu0;
    double secs = totals.seconds > 0 ? totals.seconds : 1e-9;
    std::printf("{\"requests\": %llu, \"bytes\": %llu, \"errors\": %llu, \"seconds\": %.6f, \"iops\": %.1f, "
                "\"mib_s\": %.2f, \"cpu_s\": %.6f}\n",
                static_cast<unsigned long long>(totals.requests), static_cast<unsigned long long>(totals.bytes),
                static_cast<unsigned long long>(totals.errors), totals.seconds, double(totals.requests) / secs,
                double(totals.bytes) / secs / (1 << 20), cpu);
    if (!totals.failure.empty()) {
        std::fprintf(stderr, "nbdsched-load: %s\n", totals.failure.c_str());
        return 1;
    }
    if (totals.errors > 0) {
        std::fprintf(stderr, "nbdsched-load: %llu requests answered with an error\n",
                     static_cast<unsigned long long>(totals.errors));
        return 1;
    }
    return 0;
}
