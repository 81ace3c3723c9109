// Internal constants of Linux 4.x CFQ (block/cfq-iosched.c), kept with the
// kernel's names so the code can be compared line by line.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/units.hpp"

namespace nbdsched::sched::cfq {

using namespace std::chrono_literals;

// The kernel mixes jiffies into its ns arithmetic. We pick HZ=250 (the common
// distribution default), so one jiffy is 4ms.
inline constexpr Nanos kJiffy = 4ms;
inline constexpr std::int64_t kHz = 250;

inline constexpr Nanos kIdleDelay = 200ms;                           // CFQ_IDLE_DELAY (unused: no idle class)
inline constexpr std::uint64_t kSliceModeGroupDelay = 200'000'000;   // NSEC_PER_SEC/5, vdisktime units
// HZ/5 added to a vdisktime counted in requests: a unit mix-up in the kernel
// that makes the delay negligible in IOPS mode. Kept as is.
inline constexpr std::uint64_t kIopsModeGroupDelay = kHz / 5;
inline constexpr Nanos kMinTt = 2 * kJiffy;               // CFQ_MIN_TT
inline constexpr std::int64_t kSliceScale = 5;            // CFQ_SLICE_SCALE
inline constexpr int kHwQueueMin = 5;                     // CFQ_HW_QUEUE_MIN
inline constexpr int kServiceShift = 12;                  // CFQ_SERVICE_SHIFT
inline constexpr std::uint64_t kSeekThr = 8 * 100;        // CFQQ_SEEK_THR, sectors
inline constexpr std::uint64_t kCloseThr = 8 * 1024;      // CFQQ_CLOSE_THR, sectors
inline constexpr std::uint64_t kSectThrNonrot = 2 * 32;   // CFQQ_SECT_THR_NONROT, sectors
inline constexpr unsigned kSeekyHistory = 32 / 8;         // CFQQ_SEEKY: more than 4 of 32 requests sought
inline constexpr unsigned kHistDivisor = 4;               // cfq_hist_divisor
inline constexpr std::uint64_t kPageSize = 4096;
inline constexpr int kHwTagSamples = 50;

// All queues are best-effort at the default priority 4 (IOPRIO_NORM); the
// kernel's RT and IDLE classes and ioprio levels are not modelled.
inline constexpr int kIoprio = 4;
inline constexpr int kIoprioBeNr = 8;

// Group weights: the project default is 100 (BFQ/cgroup-v2 style) rather than
// CFQ-legacy 500. Only ratios matter: vfraction = weight / sum of the weights
// of the active groups, so 1000:100 behaves the same under either default.
inline constexpr unsigned kDefaultWeight = 100;
inline constexpr unsigned kMinWeight = 1;
inline constexpr unsigned kMaxWeight = 1000;

}   // namespace nbdsched::sched::cfq
