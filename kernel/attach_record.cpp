#include "kernel/attach_record.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace nbdsched::kernel {

namespace {

constexpr const char* k_record_dir = "/run/nbdsched-attach";

bool parse_u64(std::string_view text, std::uint64_t& value) {
    if (text.empty() || text.size() > 19) return false;
    value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + std::uint64_t(c - '0');
    }
    return true;
}

}   // namespace

std::string format_record(const AttachRecord& r) {
    return "target=" + r.target + "\nexport=" + r.export_name + "\nkernel_pid=" + std::to_string(r.kernel_pid) + "\n";
}

std::optional<AttachRecord> parse_record(std::string_view text) {
    AttachRecord r;
    bool target = false, export_name = false, pid = false;
    while (!text.empty()) {
        auto end = text.find('\n');
        if (end == std::string_view::npos) return std::nullopt;   // cut short while being written
        auto line = text.substr(0, end);
        text.remove_prefix(end + 1);
        auto eq = line.find('=');
        if (eq == std::string_view::npos) return std::nullopt;
        auto key = line.substr(0, eq), value = line.substr(eq + 1);
        if (key == "target" && !target) {
            r.target = value;
            target = true;
        } else if (key == "export" && !export_name) {
            r.export_name = value;
            export_name = true;
        } else if (key == "kernel_pid" && !pid) {
            if (!parse_u64(value, r.kernel_pid)) return std::nullopt;
            pid = true;
        } else {
            return std::nullopt;
        }
    }
    if (!target || !export_name || !pid) return std::nullopt;
    return r;
}

std::string record_mismatch(const AttachRecord& r, const Target& t, std::uint64_t pid) {
    if (pid != 0 && r.kernel_pid != 0 && pid != r.kernel_pid)
        return "its record is from an earlier attachment (pid " + std::to_string(r.kernel_pid) +
               "; the kernel names pid " + std::to_string(pid) + " as the device's owner)";
    if (r.target != t.describe()) return "its server is " + r.target + ", not " + t.describe();
    if (r.export_name != t.export_name) return "its export is '" + r.export_name + "', not '" + t.export_name + "'";
    return {};
}

std::string record_directory() { return k_record_dir; }

std::string record_path(std::uint32_t index) {
    return std::string(k_record_dir) + "/nbd" + std::to_string(index);
}

bool write_record(std::uint32_t index, const AttachRecord& record, std::string& error) {
    if (::mkdir(k_record_dir, 0755) != 0 && errno != EEXIST) {
        error = std::string(k_record_dir) + ": " + std::strerror(errno);
        return false;
    }
    // Written beside and renamed, so that a reader never sees half of it.
    auto path = record_path(index), temporary = path + ".new";
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << format_record(record);
        if (!out.flush()) {
            error = temporary + ": cannot write";
            return false;
        }
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        error = path + ": " + std::strerror(errno);
        ::unlink(temporary.c_str());
        return false;
    }
    return true;
}

std::optional<AttachRecord> read_record(std::uint32_t index) {
    std::ifstream in(record_path(index));
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    return parse_record(text.str());
}

void remove_record(std::uint32_t index) { ::unlink(record_path(index).c_str()); }

std::uint64_t kernel_pid(std::uint32_t index) {
    std::ifstream in("/sys/block/nbd" + std::to_string(index) + "/pid");
    std::uint64_t pid = 0;
    return in >> pid ? pid : 0;
}

}   // namespace nbdsched::kernel
