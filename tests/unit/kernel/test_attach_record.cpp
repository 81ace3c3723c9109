// The record `nbdsched attach` keeps of what it connected /dev/nbdN to, and
// the check a later monitor makes before it takes a device over: another
// export, another server or a record left from an earlier attachment refuse.
#include <doctest/doctest.h>

#include "kernel/attach_record.hpp"

using namespace nbdsched::kernel;

namespace {

Target unix_target(const std::string& path, const std::string& name) { return Target{path, {}, 0, name}; }

}   // namespace

TEST_CASE("a record reads back as written") {
    AttachRecord r{"/run/nbdsched/nbdsched.sock", "disk0", 4242};
    auto back = parse_record(format_record(r));
    REQUIRE(back);
    CHECK(back->target == r.target);
    CHECK(back->export_name == "disk0");
    CHECK(back->kernel_pid == 4242);
    auto empty_export = parse_record(format_record({"127.0.0.1:10809", "", 7}));
    REQUIRE(empty_export);
    CHECK(empty_export->export_name.empty());
}

TEST_CASE("a damaged record is no record") {
    CHECK_FALSE(parse_record(""));
    CHECK_FALSE(parse_record("target=/s\nexport=a\n"));                           // no pid
    CHECK_FALSE(parse_record("target=/s\nexport=a\nkernel_pid=12"));              // cut short
    CHECK_FALSE(parse_record("target=/s\nexport=a\nkernel_pid=x1\n"));            // not a number
    CHECK_FALSE(parse_record("target=/s\nexport=a\nexport=b\nkernel_pid=1\n"));   // twice
    CHECK_FALSE(parse_record("target=/s\nexport=a\nkernel_pid=1\nsize=3\n"));     // unknown key
}

TEST_CASE("a monitor takes over only the server and export it would attach") {
    AttachRecord r{"/run/nbdsched/nbdsched.sock", "ea", 100};
    CHECK(record_mismatch(r, unix_target("/run/nbdsched/nbdsched.sock", "ea"), 100).empty());
    CHECK(record_mismatch(r, unix_target("/run/nbdsched/nbdsched.sock", "ea"), 0).empty());   // no pid file

    auto other_export = record_mismatch(r, unix_target("/run/nbdsched/nbdsched.sock", "eb"), 100);
    CHECK(other_export == "its export is 'ea', not 'eb'");
    auto default_export = record_mismatch(r, unix_target("/run/nbdsched/nbdsched.sock", ""), 100);
    CHECK(default_export == "its export is 'ea', not ''");

    auto other_server = record_mismatch(r, unix_target("/tmp/other.sock", "ea"), 100);
    CHECK(other_server == "its server is /run/nbdsched/nbdsched.sock, not /tmp/other.sock");
    auto tcp = unix_target("", "ea");
    tcp.host = "127.0.0.1";
    tcp.port = 10809;
    CHECK_FALSE(record_mismatch(r, tcp, 100).empty());

    // The device was detached and attached again by something else since.
    auto stale = record_mismatch(r, unix_target("/run/nbdsched/nbdsched.sock", "ea"), 200);
    CHECK(stale.find("earlier attachment") != std::string::npos);
}

TEST_CASE("records live in /run, apart from the daemon's runtime directory") {
    CHECK(record_path(3) == "/run/nbdsched-attach/nbd3");
}
