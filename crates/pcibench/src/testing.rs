//! What unit tests share: time limits scaled to the host they run on.

use std::time::Duration;

/// `d` times the host's slowdown: `PCIBENCH_TEST_SLOWDOWN` (a whole number, 1 unless set), which
/// `scripts/cross` sets under qemu-user and the lab sets in TCG guests, so a limit that is
/// generous on real hardware stays generous there instead of being skipped.
pub fn scaled(d: Duration) -> Duration {
    d * slowdown()
}

pub fn slowdown() -> u32 {
    std::env::var("PCIBENCH_TEST_SLOWDOWN").ok().and_then(|v| v.parse().ok()).filter(|n| *n >= 1).unwrap_or(1)
}
