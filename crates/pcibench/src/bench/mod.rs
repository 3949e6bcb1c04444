//! Measurement, split by what it holds: `sample/` (the clock and its overhead, the one sampling
//! loop, statistics, the latency histogram), `context` (where a measurement ran), `pattern` (test
//! patterns), `counters` (the engine's own figures per DMA row), `result` (the rows every runner produces), and the runners: `pio/`, `dma/`,
//! `latency/`, `buffers`, `rate/` (open loop at an offered rate). `measure` plans and calls them; nothing else does.

pub mod buffers;
pub mod context;
pub mod counters;
pub mod dma;
pub mod gone;
pub mod latency;
pub mod memtest;
pub mod pattern;
pub mod pio;
pub mod rate;
pub mod result;
pub mod sample;
pub mod soak;
#[cfg(test)]
pub mod test_rig;
pub mod trace_cost;
