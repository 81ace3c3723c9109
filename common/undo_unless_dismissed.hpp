// A step that undoes half-done work when the scope building it is left
// early (an error return), unless dismissed once the work is complete.
#pragma once

#include <utility>

namespace nbdsched {

template <class Undo>
class UndoUnlessDismissed {
public:
    explicit UndoUnlessDismissed(Undo undo) : undo_(std::move(undo)) {}
    ~UndoUnlessDismissed() {
        if (armed_) undo_();
    }
    UndoUnlessDismissed(const UndoUnlessDismissed&) = delete;
    UndoUnlessDismissed& operator=(const UndoUnlessDismissed&) = delete;
    void dismiss() { armed_ = false; }

private:
    Undo undo_;
    bool armed_ = true;
};

}   // namespace nbdsched
