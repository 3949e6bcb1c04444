//! The channel pair's performance monitors (PG195 "H2C/C2H Channel Performance Monitor Control
//! (0xC0)", cycle count 0xC4/0xC8, data count 0xCC/0xD0): armed in auto mode before each row and
//! read after it, so a row has the engine's own count of its cycles and data beats beside the
//! host's timing (`bench::counters`).
//!
//! Auto mode, as PG195 describes it, clears the counts whenever the channel's run bit rises and
//! stops them when the descriptor with the stop bit completes: after a row they hold the row's
//! last run, counted only while the engine ran. That is what the vendor's own measurement reads
//! (libxdma.c `enable_perf` writes clear, then auto and run; `get_perf_stats` reads the counts).

use super::regs::*;
use super::XdmaEngine;
use crate::dma::{Direction, EngineCounters};
use crate::Result;

impl XdmaEngine {
    /// The directions this channel index has.
    fn perf_dirs(&self) -> Vec<Direction> {
        let ch = self.opts.channel;
        [Direction::H2c, Direction::C2h].into_iter().filter(|&d| self.info.channel(d, ch).is_some()).collect()
    }

    /// Clear each monitor, then arm it in auto mode; a read of the identifier after each write
    /// flushes it, as the vendor does.
    pub(super) fn perf_start(&mut self) -> Result<()> {
        for dir in self.perf_dirs() {
            self.wr(self.ch_reg(dir, CH_PERF_CTRL), PERF_CLEAR)?;
            self.rd(self.ch_reg(dir, CH_ID))?;
            self.wr(self.ch_reg(dir, CH_PERF_CTRL), PERF_AUTO | PERF_RUN)?;
            self.rd(self.ch_reg(dir, CH_ID))?;
        }
        Ok(())
    }

    /// Read each monitor's counts and halt it. The counts are 42 bits (the high word's [9:0]);
    /// the high word's maxed bit says one saturated.
    pub(super) fn perf_read(&mut self) -> Result<Vec<EngineCounters>> {
        let mut out = Vec::new();
        for dir in self.perf_dirs() {
            let count = |lo: u32, hi: u32| -> Result<(u64, bool)> {
                let h = self.rd(self.ch_reg(dir, hi))?;
                let l = self.rd(self.ch_reg(dir, lo))?;
                Ok((((h & PERF_HI_COUNT) as u64) << 32 | l as u64, h & PERF_HI_MAXED != 0))
            };
            let (cycles, cycles_maxed) = count(CH_PERF_CYC_LO, CH_PERF_CYC_HI)?;
            let (beats, beats_maxed) = count(CH_PERF_DAT_LO, CH_PERF_DAT_HI)?;
            self.wr(self.ch_reg(dir, CH_PERF_CTRL), 0)?;
            out.push(EngineCounters {
                beat_bytes: Some(self.info.data_width_bits / 8),
                clock_hz: self.user_clock_hz,
                maxed: cycles_maxed || beats_maxed,
                last_run: true,
                ..EngineCounters::counts(dir, cycles, beats)
            });
        }
        Ok(out)
    }
}
