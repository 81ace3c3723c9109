// The optional asynchronous submission path of a backend (RBD): a request is
// started and the call returns at once; the backend reports its end to a
// CompletionSink, from a thread of its own. The daemon then needs no thread
// per request in flight, so a deep queue is not capped by its pool's size.
// The synchronous Backend calls stay available (metadata, shutdown flush).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace nbdsched::backend {

class CompletionSink {
public:
    // `tag` as given to the submit call; `error` 0 or an errno. Called once
    // per request, from a backend thread (or from inside the submit call when
    // the request could not be started): the sink must be thread-safe and
    // must not call back into the backend.
    virtual void completed(void* tag, int error) = 0;

protected:
    ~CompletionSink() = default;
};

class AsyncBackend {
public:
    virtual ~AsyncBackend() = default;

    // Set once, before the first submit; it must outlive every request.
    virtual void set_sink(CompletionSink* sink) = 0;
    // Buffers stay the caller's and must live until the completion.
    virtual void submit_read(std::uint64_t offset, std::span<std::byte> out, void* tag) = 0;
    virtual void submit_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, void* tag) = 0;
    virtual void submit_flush(void* tag) = 0;
    virtual void submit_trim(std::uint64_t offset, std::uint64_t length, bool fua, void* tag) = 0;
    virtual void submit_write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua,
                                     void* tag) = 0;
};

}   // namespace nbdsched::backend
