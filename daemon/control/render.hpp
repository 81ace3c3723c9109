// Human tables for `nbdsched ctl list`, `ctl stats` and `ctl faults`, rendered from the
// JSON replies (so `--json` and the tables always show the same numbers).
#pragma once

#include <string>

#include "daemon/control/report.hpp"

namespace nbdsched::daemon::control {

std::string render_list(const Json& reply);
std::string render_stats(const Json& reply);
// "device d0: faults on, 1 rule" and a row of the injected counts.
std::string render_faults(const Json& reply);

// Left-aligned first column, right-aligned numbers; column widths from content.
class Table {
public:
    explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    std::string str(const std::string& indent = "") const;

private:
    std::vector<std::vector<std::string>> rows_;
};

}   // namespace nbdsched::daemon::control
