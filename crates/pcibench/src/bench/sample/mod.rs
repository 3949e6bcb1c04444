//! Sampling and statistics, shared by every runner: the clock (real, fake, and the invariant TSC
//! on x86-64) and the timer's own overhead, the one sampling loop, the statistics of a row's
//! samples, and the log-linear latency histogram.

pub mod clock;
pub mod estimate;
pub mod histogram;
pub mod sampler;
pub mod single;
pub mod stats;
pub mod timer;
#[cfg(target_arch = "x86_64")]
pub mod tsc;
