#include "timing/profiles.hpp"

#include "timing/hdd_model.hpp"
#include "timing/ssd_model.hpp"

namespace nbdsched::timing {

std::unique_ptr<DeviceModel> make_model(std::string_view profile,
                                        const std::map<std::string, std::string>& params,
                                        std::string& error) {
    error.clear();
    if (profile == "none") {
        if (!params.empty()) error = "profile none takes no parameters";
        return nullptr;
    }
    if (profile == "hdd") {
        HddParams p;
        error = read_hdd_params(params, p);
        if (!error.empty()) return nullptr;
        return std::make_unique<HddModel>(p);
    }
    if (profile == "ssd" || profile == "nvme") {
        SsdParams p = profile == "ssd" ? ssd_defaults() : nvme_defaults();
        error = read_ssd_params(params, p);
        if (!error.empty()) return nullptr;
        return std::make_unique<SsdModel>(p);
    }
    error = "unknown profile '" + std::string(profile) + "' (none, hdd, ssd, nvme)";
    return nullptr;
}

std::string check_profile(std::string_view profile, const std::map<std::string, std::string>& params) {
    std::string error;
    make_model(profile, params, error);
    return error;
}

}   // namespace nbdsched::timing
