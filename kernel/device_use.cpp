#include "kernel/device_use.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace nbdsched::kernel {

namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string first_word(const fs::path& path) {
    std::ifstream in(path);
    std::string word;
    in >> word;
    return word;
}

// Each line's whitespace-separated fields, in order.
template <typename Each>
void for_each_line(std::string_view text, Each each) {
    std::istringstream in{std::string(text)};
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::vector<std::string> fields;
        for (std::string w; words >> w;) fields.push_back(w);
        each(fields);
    }
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

}   // namespace

std::vector<std::string> mounts_of(std::string_view mountinfo, const std::vector<std::string>& devices) {
    std::vector<std::string> mounts;
    for_each_line(mountinfo, [&](const std::vector<std::string>& f) {
        if (f.size() > 4 && contains(devices, f[2])) mounts.push_back(f[4]);
    });
    return mounts;
}

std::vector<std::string> swaps_of(std::string_view swaps, const std::vector<std::string>& paths) {
    std::vector<std::string> found;
    for_each_line(swaps, [&](const std::vector<std::string>& f) {
        if (!f.empty() && contains(paths, f[0])) found.push_back(f[0]);
    });
    return found;
}

std::vector<std::string> device_users(std::uint32_t index) {
    const std::string name = "nbd" + std::to_string(index);
    const fs::path block = fs::path("/sys/block") / name;
    // The whole device and its partitions (nbd0p1, ...): their sysfs
    // directories, device numbers and /dev paths.
    std::vector<fs::path> dirs{block};
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(block, ec))
        if (entry.path().filename().string().rfind(name + "p", 0) == 0) dirs.push_back(entry.path());
    std::vector<std::string> numbers, paths;
    for (const auto& dir : dirs) {
        numbers.push_back(first_word(dir / "dev"));
        paths.push_back("/dev/" + dir.filename().string());
    }
    std::vector<std::string> users;
    for (const auto& mount : mounts_of(read_text("/proc/self/mountinfo"), numbers))
        users.push_back("mounted on " + mount);
    for (const auto& dir : dirs)
        for (const auto& holder : fs::directory_iterator(dir / "holders", ec))
            users.push_back("held by " + holder.path().filename().string());
    for (const auto& swap : swaps_of(read_text("/proc/swaps"), paths)) users.push_back("swap on " + swap);
    return users;
}

}   // namespace nbdsched::kernel
