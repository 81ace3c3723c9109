"""Deterministic test data, byte for byte the C++ tests' pattern()
(tests/lib/cpp/pattern.cpp): each byte depends on its absolute device
offset and a seed, so any sub-range can be checked on its own."""

_M64 = (1 << 64) - 1


def pattern_byte(position, seed=1):
    # A cheap 64-bit mix of (position, seed); never constant over a block.
    x = ((position * 0x9E3779B97F4A7C15) & _M64) ^ ((seed << 32) & _M64)
    x ^= x >> 29
    x = (x * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 32
    return x & 0xFF


def pattern(offset, length, seed=1):
    """The bytes of [offset, offset + length) for `seed`."""
    return bytes(pattern_byte(offset + i, seed) for i in range(length))
