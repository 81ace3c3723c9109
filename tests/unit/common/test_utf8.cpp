// UTF-8 checks (common/utf8.hpp) and JSON text that never throws
// (common/json_text.hpp) on bytes that are not UTF-8.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/json_text.hpp"
#include "common/utf8.hpp"

using namespace nbdsched;

TEST_CASE("well-formed UTF-8 is accepted") {
    CHECK(is_utf8(""));
    CHECK(is_utf8("disk0 /system.slice/a\\x2db.service"));
    CHECK(is_utf8("\xc3\xa9t\xc3\xa9"));                        // été
    CHECK(is_utf8("\xe2\x82\xac \xed\x9f\xbf \xef\xbf\xbd"));   // € U+D7FF U+FFFD
    CHECK(is_utf8("\xf0\x9f\x92\xbe \xf4\x8f\xbf\xbf"));        // 💾 U+10FFFF
}

TEST_CASE("ill-formed UTF-8 is found at its first bad byte") {
    CHECK(invalid_utf8_at("e\xfex") == 1u);
    CHECK(invalid_utf8_at("\xff") == 0u);
    CHECK(invalid_utf8_at("ab\x80") == 2u);             // a lone continuation byte
    CHECK(invalid_utf8_at("a\xc3") == 1u);              // cut short
    CHECK(invalid_utf8_at("\xc0\xaf") == 0u);           // overlong '/'
    CHECK(invalid_utf8_at("\xe0\x80\xaf") == 0u);       // overlong, three bytes
    CHECK(invalid_utf8_at("x\xed\xa0\x80") == 1u);      // a surrogate (U+D800)
    CHECK(invalid_utf8_at("\xf4\x90\x80\x80") == 0u);   // above U+10FFFF
    CHECK(invalid_utf8_at("\xf5\x80\x80\x80") == 0u);
    CHECK(invalid_utf8_at("\xc3\xa9\xe2\x82") == 2u);   // é, then a cut euro sign
}

TEST_CASE("printable: bad bytes and control characters as \\xNN, the rest as it is") {
    CHECK(printable("/user.slice/a.scope") == "/user.slice/a.scope");
    CHECK(printable("/a\\x2db") == "/a\\x2db");   // systemd's escape is left alone
    CHECK(printable("/t-\xff") == "/t-\\xff");
    CHECK(printable("a\nb\x7f\t") == "a\\x0ab\\x7f\\x09");
    CHECK(printable("\xc3\xa9\xc3") == "\xc3\xa9\\xc3");
    CHECK(is_utf8(printable("\xfe\xed\xa0\x80\xf4\x90")));
}

TEST_CASE("json_text: bytes that are not UTF-8 become U+FFFD instead of an exception") {
    nlohmann::json j = {{"error", "bad request: last read: '\"\xff'"}, {"peer", "unix cgroup /t-\xfe"}};
    CHECK_THROWS_AS(j.dump(), nlohmann::json::type_error);   // what the daemon used to call
    std::string text;
    REQUIRE_NOTHROW(text = json_text(j));
    CHECK(is_utf8(text));
    auto back = nlohmann::json::parse(text);
    CHECK(back["error"] == "bad request: last read: '\"\xef\xbf\xbd'");
    CHECK(back["peer"] == "unix cgroup /t-\xef\xbf\xbd");
    // Well-formed text is written as it is, not as \u escapes; indent as dump()'s.
    nlohmann::ordered_json o = {{"b", "\xc3\xa9"}, {"a", 1}};
    CHECK(json_text(o) == "{\"b\":\"\xc3\xa9\",\"a\":1}");
    CHECK(json_text(o, 2) == o.dump(2));
}
