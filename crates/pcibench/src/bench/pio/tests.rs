//! The PIO runner against memory-backed regions: statistics, verification, refusals.

use super::*;
use crate::access::{BarRegion, DeviceAccess, Mapping, Via};
use crate::bench::result::Row;
use crate::bench::sample::clock::{Clock, FakeClock, MonotonicClock};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// A BAR made of host memory, optionally faulty.
struct MemBar {
    mem: Vec<u64>,
    mapping: Mapping,
    /// 0: honest; 1: corrupt one byte on every bulk write; 2: reads all-ones.
    fault: u8,
}

impl BarRegion for MemBar {
    fn index(&self) -> u8 {
        2
    }
    fn len(&self) -> u64 {
        (self.mem.len() * 8) as u64
    }
    fn mapping(&self) -> Mapping {
        self.mapping
    }
    fn via(&self) -> Via {
        Via::Sim
    }
    fn ptr(&self) -> Option<*mut u8> {
        if self.fault == 0 {
            Some(self.mem.as_ptr() as *mut u8)
        } else {
            None
        }
    }
    fn read(&self, offset: u64, _w: Width) -> Result<u64> {
        let b = self.mem.as_ptr() as *const u8;
        // SAFETY: test region, offsets inside.
        Ok(unsafe { *b.add(offset as usize) } as u64)
    }
    fn write(&self, _offset: u64, _w: Width, _v: u64) -> Result<()> {
        Ok(())
    }
    fn read_bulk(&self, offset: u64, buf: &mut [u8], _w: Width) -> Result<()> {
        if self.fault == 2 {
            buf.fill(0xff);
            return Ok(());
        }
        let b = self.mem.as_ptr() as *const u8;
        // SAFETY: test region, offsets inside.
        unsafe { std::ptr::copy_nonoverlapping(b.add(offset as usize), buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }
    fn write_bulk(&self, offset: u64, buf: &[u8], _w: Width) -> Result<()> {
        let b = self.mem.as_ptr() as *mut u8;
        // SAFETY: test region, offsets inside.
        unsafe {
            std::ptr::copy_nonoverlapping(buf.as_ptr(), b.add(offset as usize), buf.len());
            if self.fault == 1 {
                *b.add(offset as usize + 3) ^= 0x40;
            }
        }
        Ok(())
    }
}

struct MemDev {
    fault: AtomicU8,
    wc: bool,
}

impl DeviceAccess for MemDev {
    fn via(&self) -> Via {
        Via::Sim
    }
    fn open_bar(&self, _index: u8, mapping: Mapping, _io: IoMode) -> Result<Box<dyn BarRegion>> {
        if mapping == Mapping::Wc && !self.wc {
            return Err(Error::Unsupported("WC is unavailable for BAR2: it is not prefetchable".into()));
        }
        Ok(Box::new(MemBar { mem: vec![0; 8192], mapping, fault: self.fault.load(Ordering::Relaxed) }))
    }
    fn config_read(&self, _o: u64, _b: &mut [u8]) -> Result<()> {
        Ok(())
    }
    fn config_write(&self, _o: u64, _d: &[u8]) -> Result<()> {
        Ok(())
    }
}

fn plan() -> PioPlan {
    PioPlan {
        bars: vec![2],
        maps: vec![MapMode::Uc],
        dirs: vec![Direction::H2c, Direction::C2h],
        widths: vec![Width::B32, Width::B64],
        sizes: vec![],
        total: 1 << 20,
        budget_ns: None,
        offset: 0,
        io: IoMode::Mmap,
        allow_write: true,
        strict_map: true,
        strict_width: true,
        registers: Vec::new(),
    }
}

fn link() -> Option<Link> {
    Some(Link { gen: 2, width: 4, mps: 256, mrrs: 512 })
}

/// Run `p` on `dev`, timed by `clock`; returns the report and the bytes reported as moved.
fn go_with(dev: &MemDev, link: Option<Link>, p: &PioPlan, clock: &dyn Clock) -> Result<(Report, u64)> {
    let stop = AtomicBool::new(false);
    let mut moved = 0;
    let mut progress = |b| moved += b;
    let mut s = Sampling::new(clock, &stop, &mut progress, None);
    let device = Device::for_test("test", false, link, &[(2, 65536)]);
    let r = run(dev, &device, p, &mut s)?;
    Ok((r, moved))
}

fn go(dev: &MemDev, link: Option<Link>, p: &PioPlan) -> Result<Report> {
    go_with(dev, link, p, &MonotonicClock).map(|(r, _)| r)
}

#[test]
fn whole_bar_both_ways_verified() {
    let dev = MemDev { fault: AtomicU8::new(0), wc: true };
    // 20 ns per clock reading, 1000 bytes per µs: a 64 KiB transfer is 65536 ns, one per sample.
    let clock = FakeClock::new(20, 0, 1000);
    let (r, moved) = go_with(&dev, link(), &plan(), &clock).unwrap();
    assert_eq!(r.results.len(), 4);
    assert!((r.timer_overhead_ns - 20.0).abs() < 1e-9);
    for x in &r.results {
        assert_eq!(x.size, 65536);
        assert_eq!(x.verify, Some(Verify::Ok), "{x:?}");
        let st = x.stats.as_ref().unwrap();
        assert_eq!((st.transfers, st.samples, st.batch), (16, 16, 1));
        let exact = 65536.0 / 65556e-9 / 1e6;
        assert!((st.median_mbps - exact).abs() < 1e-6 && (st.min_mbps - exact).abs() < 1e-6, "{st:?}");
        assert!(st.cv_pct.abs() < 1e-9);
        // Efficiency is the median against the limit; 999.7 MB/s is far above a Gen2 x4 link's
        // limit for 4- or 8-byte UC TLPs, so the row says the figure is not what it seems.
        let l = x.limit_mbps.unwrap();
        assert!((x.efficiency_pct.unwrap() - exact / l * 100.0).abs() < 1e-9);
        assert!(x.notes.iter().any(|n| matches!(n, Note::AboveLinkModel { .. })), "{:?}", x.notes);
        assert!(!x.notes.iter().any(|n| matches!(n, Note::FewSamples { .. } | Note::Noisy { .. })));
    }
    assert_eq!(moved, 4 << 20);
    // UC 32-bit writes: one 4-byte TLP each (4 / (4 + 24) of the TLP bandwidth).
    let l = link().unwrap();
    assert!((r.results[0].limit_mbps.unwrap() - l.write_bps(4) / 1e6).abs() < 1e-6);
}

#[test]
fn noise_and_thin_samples_are_flagged() {
    let dev = MemDev { fault: AtomicU8::new(0), wc: true };
    // Every 4th sample takes 4x as long: CV well past 10%.
    let clock = FakeClock::new(20, 0, 1000).slow_every(4, 3 * 65536);
    let p = PioPlan { dirs: vec![Direction::H2c], widths: vec![Width::B64], ..plan() };
    let (r, _) = go_with(&dev, None, &p, &clock).unwrap();
    let x = &r.results[0];
    assert!(x.limit_mbps.is_none() && x.efficiency_pct.is_none(), "no link: no limit");
    assert!(x.notes.iter().any(|n| matches!(n, Note::Noisy { cv_pct, .. } if *cv_pct > 10.0)), "{:?}", x.notes);
    // Two transfers of 64 KiB: two samples.
    let p = PioPlan { total: 2 * 65536, ..p };
    let (r, _) = go_with(&dev, None, &p, &FakeClock::new(20, 0, 1000)).unwrap();
    assert_eq!(r.results[0].stats.as_ref().unwrap().samples, 2);
    assert!(r.results[0].notes.contains(&Note::FewSamples { samples: 2 }));
}

#[test]
fn sweeps_skip_what_cannot_run_and_totals_are_checked_first() {
    let dev = MemDev { fault: AtomicU8::new(0), wc: true };
    // 128 KiB does not fit the 64 KiB BAR: skipped with the reason, the other sizes measured.
    let p = PioPlan { sizes: vec![4096, 131072], total: 1 << 20, widths: vec![Width::B64], ..plan() };
    let r = go(&dev, None, &p).unwrap();
    assert_eq!(r.measured(), 2);
    assert!(r.results.iter().any(|x| x.size == 131072 && x.skipped()));
    // A total below one transfer, or zero, is refused before anything moves.
    for total in [0, 1024] {
        let p = PioPlan { sizes: vec![4096], total, ..plan() };
        let e = go(&dev, None, &p).unwrap_err().to_string();
        assert!(e.contains("--total"), "{e}");
    }
}

#[test]
fn tiny_transfers_are_batched_and_said_so() {
    let dev = MemDev { fault: AtomicU8::new(0), wc: true };
    let p = PioPlan { sizes: vec![8], widths: vec![Width::B64], total: 4096, ..plan() };
    let r = go(&dev, link(), &p).unwrap();
    let x = &r.results[0];
    assert!(x.notes.iter().any(|n| matches!(n, Note::Batched { .. })), "{:?}", x.notes);
    assert!(x.stats.as_ref().unwrap().batch > 1);
    assert_eq!(x.verify, Some(Verify::Ok));
}

#[test]
fn corruption_names_the_first_mismatch() {
    let dev = MemDev { fault: AtomicU8::new(1), wc: true };
    let p = PioPlan { io: IoMode::Syscall, sizes: vec![256], total: 1024, ..plan() };
    let r = go(&dev, None, &p).unwrap();
    match &r.results[0].verify {
        Some(Verify::Mismatch { mismatch }) => assert_eq!(mismatch.offset, 3),
        v => panic!("expected a mismatch, got {v:?}"),
    }
    assert!(!r.warnings.is_empty());
}

#[test]
fn all_ones_bar_warns() {
    let dev = MemDev { fault: AtomicU8::new(2), wc: true };
    let p = PioPlan { dirs: vec![Direction::C2h], allow_write: false, sizes: vec![64], total: 64, ..plan() };
    let r = go(&dev, None, &p).unwrap();
    assert!(r.results[0].notes.contains(&Note::AllOnes));
    assert!(matches!(r.results[0].verify, Some(Verify::Unverified { .. })));
}

#[test]
fn refusals_and_skips() {
    let dev = MemDev { fault: AtomicU8::new(0), wc: false };
    // No --allow-write: writes are skipped, never made.
    let p = PioPlan { allow_write: false, dirs: vec![Direction::H2c], sizes: vec![64], ..plan() };
    let r = go(&dev, None, &p).unwrap();
    let skip = |x: &Row, what: &str| matches!(&x.notes[0], Note::Skipped { reason } if reason.contains(what));
    assert!(r.results.iter().all(|x| x.stats.is_none() && skip(x, "--allow-write")));
    // One configuration past the end of the BAR, or misaligned for its width: an error; in a
    // sweep, a skipped row.
    let one = PioPlan { widths: vec![Width::B32], sizes: vec![64], ..plan() };
    let p = PioPlan { offset: 65536 - 8, ..one.clone() };
    let e = go(&dev, None, &p).unwrap_err().to_string();
    assert!(e.contains("past the end of BAR2"), "{e}");
    let p = PioPlan { offset: 2, ..one.clone() };
    assert!(go(&dev, None, &p).unwrap_err().to_string().contains("multiples of 4"));
    let p = PioPlan { offset: 2, widths: vec![Width::B8, Width::B32], ..one };
    let r = go(&dev, None, &p).unwrap();
    assert!(r.results.iter().any(|x| x.width == Some(Width::B8) && x.stats.is_some()));
    assert!(r.results.iter().any(|x| x.width == Some(Width::B32) && skip(x, "multiples of 4")));
    // WC asked for explicitly: an error; with `all`, a skipped row.
    let p = PioPlan { maps: vec![MapMode::Wc], ..plan() };
    assert!(go(&dev, None, &p).is_err());
    let p = PioPlan { maps: MapMode::ALL.to_vec(), strict_map: false, sizes: vec![64], ..plan() };
    let r = go(&dev, None, &p).unwrap();
    assert_eq!(r.results.iter().filter(|x| skip(x, "WC is unavailable")).count(), 2);
}
