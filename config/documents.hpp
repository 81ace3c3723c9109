// How many YAML documents a text holds, found without YAML::LoadAll: in
// yaml-cpp 0.7 LoadAll never returns on some malformed input (a stray ','
// where a node should start makes every parse step yield another null
// document without consuming anything; jbeder/yaml-cpp#1040, fixed upstream
// in 0.8.x). The probe parses at most two documents.
#pragma once

#include <string>

#include "config/yaml.hpp"

namespace nbdsched::config::detail {

struct DocumentProbe {
    enum class Outcome { one,
                         several,
                         stuck };
    Outcome outcome = Outcome::one;
    // several: where the second document starts; stuck: where parsing stopped.
    YAML::Mark at;
};

// Throws YAML::ParserException on a syntax error, as YAML::Load does.
DocumentProbe probe_documents(const std::string& yaml);

}   // namespace nbdsched::config::detail
