#include "tools/sim/workload_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>

namespace nbdsched::sim {
namespace {

struct Bad {
    explicit Bad(std::string message_, std::optional<YAML::Mark> mark_ = std::nullopt)
        : message(std::move(message_)), mark(mark_) {}

    std::string message;
    std::optional<YAML::Mark> mark;   // where in the file, when one node is to blame
};

// "line:col: " (1-based, as editors count) or nothing.
std::string position(const Bad& bad) {
    if (!bad.mark || bad.mark->is_null()) return {};
    return std::to_string(bad.mark->line + 1) + ":" + std::to_string(bad.mark->column + 1) + ": ";
}

std::string scalar(const YAML::Node& node, const std::string& where) {
    if (!node.IsScalar()) throw Bad{where + ": expected a scalar"};
    return node.as<std::string>();
}

Nanos duration(const YAML::Node& node, const std::string& where) {
    auto d = parse_duration(scalar(node, where));
    if (!d) throw Bad{where + ": bad duration '" + scalar(node, where) + "'"};
    return *d;
}

std::uint64_t size(const YAML::Node& node, const std::string& where) {
    auto s = parse_size(scalar(node, where));
    if (!s) throw Bad{where + ": bad size '" + scalar(node, where) + "'"};
    return *s;
}

std::uint64_t integer(const YAML::Node& node, const std::string& where) {
    std::string text = scalar(node, where);
    std::uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size())
        throw Bad{where + ": expected an integer, got '" + text + "'"};
    return v;
}

bool boolean(const YAML::Node& node, const std::string& where) {
    std::string text = scalar(node, where);
    if (text == "true" || text == "yes" || text == "1") return true;
    if (text == "false" || text == "no" || text == "0") return false;
    throw Bad{where + ": expected true or false, got '" + text + "'"};
}

void parse_rw(const std::string& rw, JobSpec& job, const std::string& where) {
    if (rw == "read" || rw == "randread") job.op = sched::Op::read;
    else if (rw == "write" || rw == "randwrite") job.op = sched::Op::write;
    else throw Bad{where + ": rw must be read, write, randread or randwrite"};
    job.pattern = rw.rfind("rand", 0) == 0 ? Pattern::random : Pattern::sequential;
}

// Key/value pairs of a map section, minus the one key handled by the caller.
std::map<std::string, std::string> rest(const YAML::Node& node, const std::string& skip,
                                        const std::string& where) {
    std::map<std::string, std::string> out;
    for (const auto& kv : node) {
        std::string key = kv.first.as<std::string>();
        if (key != skip) out[key] = scalar(kv.second, where + "." + key);
    }
    return out;
}

void parse_jobs(const YAML::Node& list, Workload& w) {
    if (!list.IsSequence()) throw Bad{"jobs: expected a list"};
    for (std::size_t i = 0; i < list.size(); ++i) {
        const YAML::Node& n = list[i];
        std::string where = "jobs[" + std::to_string(i) + "]";
        JobSpec job;
        job.name = "job" + std::to_string(i);
        unsigned numjobs = 1;
        for (const auto& kv : n) {
            std::string key = kv.first.as<std::string>();
            std::string at = where + "." + key;
            const YAML::Node& v = kv.second;
            if (key == "name") job.name = scalar(v, at);
            else if (key == "group") job.group = scalar(v, at);
            else if (key == "rw") parse_rw(scalar(v, at), job, at);
            else if (key == "bs") job.block_size = size(v, at);
            else if (key == "iodepth") job.iodepth = unsigned(integer(v, at));
            else if (key == "numjobs") numjobs = unsigned(integer(v, at));
            else if (key == "sync") job.sync = boolean(v, at);
            else if (key == "thinktime") job.think_time = duration(v, at);
            else if (key == "size") job.size = size(v, at);
            else if (key == "offset") job.offset = size(v, at);
            else if (key == "start_delay") job.start_delay = duration(v, at);
            else throw Bad{at + ": unknown key"};
        }
        if (job.block_size == 0 || job.block_size % 512 != 0)
            throw Bad{where + ".bs: must be a positive multiple of 512"};
        if (job.iodepth == 0 || job.iodepth > 4096) throw Bad{where + ".iodepth: 1..4096"};
        if (numjobs == 0 || numjobs > 100000) throw Bad{where + ".numjobs: 1..100000"};
        if (job.size < job.block_size) throw Bad{where + ".size: smaller than bs"};
        for (unsigned k = 0; k < numjobs; ++k) {
            JobSpec clone = job;
            // append, not `+= "." + ...`: g++ 12 -O3 reports a false -Wrestrict there.
            if (numjobs > 1) clone.name.append(".").append(std::to_string(k));
            // An explicit offset is the first clone's; the others follow it.
            if (job.offset) clone.offset = *job.offset + std::uint64_t(k) * job.size;
            w.jobs.push_back(clone);
        }
    }
}

void parse_pool(const YAML::Node& node, PoolSpec& pool) {
    if (!node.IsMap()) throw Bad{"pool: expected a map"};
    for (const auto& kv : node) {
        std::string key = kv.first.as<std::string>();
        std::string at = "pool." + key;
        if (key == "mode") {
            auto mode = parse_pool_mode(scalar(kv.second, at));
            if (!mode) throw Bad{at + ": unlimited, line or batching"};
            pool.mode = *mode;
        } else if (key == "nr_requests") {
            pool.nr_requests = unsigned(integer(kv.second, at));
        } else if (key == "batch_requests") {
            pool.batch_requests = unsigned(integer(kv.second, at));
        } else if (key == "batch_time") {
            pool.batch_time = duration(kv.second, at);
        } else if (key == "fair_share") {
            pool.fair_share = boolean(kv.second, at);
        } else if (key == "share_idle") {
            pool.share_idle = duration(kv.second, at);
        } else {
            throw Bad{at + ": unknown key"};
        }
    }
    if (pool.nr_requests < 2 || pool.nr_requests > 1000000) throw Bad{"pool.nr_requests: 2..1000000"};
    if (pool.batch_requests > 1000000) throw Bad{"pool.batch_requests: 0..1000000"};
}

// A job's group must be one that groups: defines ("default" always exists):
// a misspelt name would otherwise make a group of its own at the default weight.
void check_job_groups(const YAML::Node& jobs, const Workload& w) {
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        const YAML::Node& group = jobs[i]["group"];
        if (!group) continue;
        std::string name = group.as<std::string>();
        bool defined = std::any_of(w.groups.begin(), w.groups.end(), [&](const GroupSpec& g) { return g.name == name; });
        if (name != "default" && !defined)
            throw Bad{"jobs[" + std::to_string(i) + "].group: '" + name + "' is not in groups:", group.Mark()};
    }
}

void parse_root(const YAML::Node& root, Workload& w) {
    if (!root.IsMap()) throw Bad{"workload: expected a map at the top"};
    for (const auto& kv : root) {
        std::string key = kv.first.as<std::string>();
        const YAML::Node& v = kv.second;
        if (key == "device") {
            if (v["profile"]) w.profile = scalar(v["profile"], "device.profile");
            w.profile_params = rest(v, "profile", "device");
        } else if (key == "scheduler") {
            if (v["policy"]) w.policy = scalar(v["policy"], "scheduler.policy");
            for (auto& [name, value] : rest(v, "policy", "scheduler")) w.tunables[name] = value;
        } else if (key == "runtime") {
            w.runtime = duration(v, key);
        } else if (key == "ramp_time") {
            w.ramp_time = duration(v, key);
        } else if (key == "seed") {
            w.seed = integer(v, key);
        } else if (key == "groups") {
            if (!v.IsMap()) throw Bad{"groups: expected a map of name: weight"};
            for (const auto& g : v) {
                std::string name = g.first.as<std::string>();
                std::uint64_t weight = integer(g.second, "groups." + name);
                if (weight < 1 || weight > 1000) throw Bad{"groups." + name + ": weight 1..1000"};
                w.groups.push_back({name, unsigned(weight)});
            }
        } else if (key == "jobs") {
            parse_jobs(v, w);
        } else if (key == "pool") {
            parse_pool(v, w.pool);
        } else if (key == "trace") {
            w.trace_window = duration(v, key);
        } else if (key == "changes") {
            if (!v.IsSequence()) throw Bad{"changes: expected a list"};
            for (const auto& c : v) {
                if (!c["at"]) throw Bad{"changes: every entry needs 'at'"};
                Nanos at = duration(c["at"], "changes.at");
                for (auto& [name, value] : rest(c, "at", "changes")) w.changes.push_back({at, name, value});
            }
        } else {
            throw Bad{key + ": unknown key"};
        }
    }
    if (w.jobs.empty()) throw Bad{"jobs: at least one job is needed"};
    if (w.runtime.count() <= 0) throw Bad{"runtime: must be > 0"};
    if (w.ramp_time >= w.runtime)
        throw Bad{"ramp_time: must be below runtime (nothing would be measured)", root["ramp_time"].Mark()};
    check_job_groups(root["jobs"], w);
    std::set<std::string> names;
    for (const auto& j : w.jobs)
        if (!names.insert(j.name).second) throw Bad{"jobs: duplicate name '" + j.name + "'"};
}

}   // namespace

std::optional<PoolSpec::Mode> parse_pool_mode(const std::string& text) {
    if (text == "unlimited") return PoolSpec::Mode::unlimited;
    if (text == "line") return PoolSpec::Mode::line;
    if (text == "batching") return PoolSpec::Mode::batching;
    return std::nullopt;
}

std::string parse_workload(const std::string& yaml_text, Workload& out) {
    try {
        Workload w;
        parse_root(YAML::Load(yaml_text), w);
        out = std::move(w);
        return {};
    } catch (const Bad& bad) {
        return position(bad) + bad.message;
    } catch (const YAML::Exception& e) {
        return std::string("yaml: ") + e.what();
    }
}

std::string load_workload(const std::string& path, Workload& out) {
    try {
        YAML::Node root = YAML::LoadFile(path);
        Workload w;
        parse_root(root, w);
        out = std::move(w);
        return {};
    } catch (const Bad& bad) {
        std::string at = position(bad);
        return path + (at.empty() ? ": " : ":" + at) + bad.message;
    } catch (const YAML::Exception& e) {
        return path + ": " + e.what();
    }
}

}   // namespace nbdsched::sim
