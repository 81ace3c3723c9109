#include "helpers.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace nbdsched::backend::test {

TempDir::TempDir()
{
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/nbdsched-backend-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
        throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
}

TempDir::~TempDir()
{
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

namespace {
std::byte byte_at(std::uint64_t pos, std::uint32_t seed)
{
    std::uint64_t x = (pos + 1) * 0x9e3779b97f4a7c15ull ^ seed * 0xbf58476d1ce4e5b9ull;
    return static_cast<std::byte>((x >> 29) ^ (x >> 7));
}
} // namespace

std::vector<std::byte> pattern(std::uint64_t offset, std::size_t length, std::uint32_t seed)
{
    std::vector<std::byte> v(length);
    for (std::size_t i = 0; i < length; ++i)
        v[i] = byte_at(offset + i, seed);
    return v;
}

bool is_pattern(const std::vector<std::byte>& data, std::uint64_t offset, std::uint32_t seed)
{
    for (std::size_t i = 0; i < data.size(); ++i)
        if (data[i] != byte_at(offset + i, seed))
            return false;
    return true;
}

bool all_zero(const std::vector<std::byte>& data)
{
    return std::all_of(data.begin(), data.end(), [](std::byte b) { return b == std::byte{0}; });
}

} // namespace nbdsched::backend::test
