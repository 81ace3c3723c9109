#include "config/documents.hpp"

#include <sstream>

#include <yaml-cpp/eventhandler.h>

namespace nbdsched::config::detail {
namespace {

// Records where each document starts; ignores its content.
class DocumentStarts : public YAML::EventHandler {
public:
    YAML::Mark last_start;
    void OnDocumentStart(const YAML::Mark& mark) override { last_start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

}   // namespace

DocumentProbe probe_documents(const std::string& yaml) {
    std::istringstream in(yaml);
    YAML::Parser parser(in);
    DocumentStarts starts;
    DocumentProbe probe;
    if (!parser.HandleNextDocument(starts)) return probe;
    const YAML::Mark first = starts.last_start;
    if (!parser.HandleNextDocument(starts)) return probe;
    probe.at = starts.last_start;
    // A second document that starts where the first did means the parser made
    // no progress: it would yield null documents for ever.
    probe.outcome = probe.at.pos == first.pos ? DocumentProbe::Outcome::stuck : DocumentProbe::Outcome::several;
    return probe;
}

}   // namespace nbdsched::config::detail
