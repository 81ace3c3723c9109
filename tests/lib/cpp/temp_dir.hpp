// A private temporary directory for one test, removed with its contents.
#pragma once

#include <string>

namespace nbdsched::testlib {

class TempDir {
public:
    // Under $TMPDIR when that is short (unix socket paths are limited to
    // 107 bytes and daemons put theirs here), else under /tmp.
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

}   // namespace nbdsched::testlib
