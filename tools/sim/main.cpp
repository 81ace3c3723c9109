// nbdsched-sim: runs a workload file in virtual time and prints what each job,
// each group and the device achieved.
//   nbdsched-sim workload.yaml [--json] [--policy cfq] [--set slice_idle=0]
//                [--profile hdd] [--device rpm=5400] [--runtime 5s]
//                [--pool batching] [--trace depth.csv --trace-window 50ms]
// Exit status: 0 ran; 1 could not write the --trace file; 2 bad command line
// or workload (the message says which); 3 ran, but a scheduler dispatched
// beyond the device's queue depth.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "sched/scheduler.hpp"
#include "tools/sim/assignments.hpp"
#include "tools/sim/engine.hpp"
#include "tools/sim/report.hpp"
#include "tools/sim/workload_yaml.hpp"

int main(int argc, char** argv) {
    using namespace nbdsched;
    CLI::App app{"nbdsched discrete-event scheduler simulator"};
    std::string path, policy, profile, runtime, pool, trace_path, trace_window;
    std::vector<std::string> sets, device_sets;
    bool json = false;
    app.add_option("workload", path, "workload YAML file")->required()->check(CLI::ExistingFile);
    app.add_flag("--json", json, "print JSON instead of a table");
    app.add_option("--policy", policy, "override scheduler.policy (none, cfq, bfq)");
    app.add_option("--profile", profile, "override device.profile (hdd, ssd, nvme); keeps --device params only");
    app.add_option("--set", sets, "override a tunable: name=value (repeatable)");
    app.add_option("--device", device_sets, "override a profile parameter: name=value (repeatable)");
    app.add_option("--runtime", runtime, "override runtime (e.g. 5s)");
    app.add_option("--pool", pool, "override pool.mode (unlimited, line, batching)");
    app.add_option("--trace", trace_path, "write the depth trace as CSV to this file");
    app.add_option("--trace-window", trace_window, "trace this long after ramp_time (default 100ms with --trace)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // CLI11's own codes (105, 109, ...) would make every input error a different status.
        return app.exit(e) == 0 ? 0 : 2;
    }
    if (!trace_window.empty() && trace_path.empty()) {
        std::cerr << "nbdsched-sim: --trace-window needs --trace FILE\n";
        return 2;
    }

    sim::Workload w;
    if (auto err = sim::load_workload(path, w); !err.empty()) {
        std::cerr << "nbdsched-sim: " << err << "\n";
        return 2;
    }
    if (!policy.empty() && policy != w.policy) {
        std::string unknown;
        if (!sched::make_scheduler(policy, sched::DeviceTraits{}, {}, unknown)) {
            std::cerr << "nbdsched-sim: --policy: " << unknown << "\n";
            return 2;
        }
        // The file's tunables were written for its own policy: keep only those
        // the new one knows, so one workload file serves every policy.
        w.policy = policy;
        auto known = sched::tunable_names(policy);
        std::erase_if(w.tunables, [&](const auto& kv) {
            bool keep = std::find(known.begin(), known.end(), kv.first) != known.end();
            if (!keep) std::cerr << "nbdsched-sim: " << policy << " ignores " << kv.first << "\n";
            return !keep;
        });
    }
    if (auto bad = sim::add_assignments(sets, w.tunables); !bad.empty()) {
        std::cerr << "nbdsched-sim: --set wants name=value, got '" << bad << "'\n";
        return 2;
    }
    if (!profile.empty() && profile != w.profile) {
        w.profile = profile;
        w.profile_params.clear();   // the file's parameters were for its own profile
    }
    if (auto bad = sim::add_assignments(device_sets, w.profile_params); !bad.empty()) {
        std::cerr << "nbdsched-sim: --device wants name=value, got '" << bad << "'\n";
        return 2;
    }
    if (!runtime.empty()) {
        auto d = parse_duration(runtime);
        if (!d || d->count() <= 0) {
            std::cerr << "nbdsched-sim: bad --runtime\n";
            return 2;
        }
        w.runtime = *d;
        if (w.ramp_time >= w.runtime) {
            std::cerr << "nbdsched-sim: --runtime " << runtime << " must be above the workload's ramp_time ("
                      << format_duration(w.ramp_time) << "): nothing would be measured\n";
            return 2;
        }
    }

    if (!pool.empty()) {
        auto mode = sim::parse_pool_mode(pool);
        if (!mode) {
            std::cerr << "nbdsched-sim: --pool wants unlimited, line or batching\n";
            return 2;
        }
        w.pool.mode = *mode;
    }
    if (!trace_window.empty() || (!trace_path.empty() && w.trace_window.count() == 0)) {
        auto d = parse_duration(trace_window.empty() ? "100ms" : trace_window);
        if (!d) {
            std::cerr << "nbdsched-sim: bad --trace-window\n";
            return 2;
        }
        w.trace_window = *d;
    }

    std::string error;
    sim::Results r = sim::simulate(w, error);
    if (!error.empty()) {   // a policy, tunable, profile or parameter the workload names is bad
        std::cerr << "nbdsched-sim: " << error << "\n";
        return 2;
    }
    if (!trace_path.empty()) {
        std::ofstream out(trace_path);
        sim::print_trace_csv(out, r);
        if (!out) {
            std::cerr << "nbdsched-sim: cannot write " << trace_path << "\n";
            return 1;
        }
    }
    if (json) sim::print_json(std::cout, r);
    else sim::print_table(std::cout, r);
    return r.depth_violations ? 3 : 0;
}
