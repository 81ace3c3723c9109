// Shared helpers of the backend unit tests: a temporary directory and
// deterministic data patterns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace nbdsched::backend::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

// Bytes that depend on (seed, absolute offset): any misplaced copy shows.
std::vector<std::byte> pattern(std::uint64_t offset, std::size_t length, std::uint32_t seed = 1);
bool is_pattern(const std::vector<std::byte>& data, std::uint64_t offset, std::uint32_t seed = 1);
bool all_zero(const std::vector<std::byte>& data);

} // namespace nbdsched::backend::test
