//! The buffer-access runner (`pcibench buffers`, seed 003): for each buffer, each way in (mmap
//! with each `--width` copy routine, file read()/write()) and each coherence mode (explicit sync,
//! O_SYNC, or none for coherent memory), the CPU writes the whole buffer (or `--size`) with a
//! fresh pattern, then reads it back the same way; each is timed in parts (sync for CPU, the copy,
//! sync for device, total) through the one sampling loop, and the read-back is compared.

use super::pattern::{verify, Pattern};
use super::result::{BufferFacts, Kind, Note, Parts, Report, Row, Verify};
use super::sample::clock::Clock;
use super::sample::sampler::{check_total, Sampling};
use crate::access::Via;
use crate::direction::Direction;
use crate::dma::cpu::{Access, CpuBuffer, CpuView, Sync};
use crate::mmio::{self, HostBuf, MemType, Width};
use crate::{Error, Result};

/// What to measure on each buffer.
#[derive(Debug, Clone)]
pub struct BufferPlan {
    /// Copy routines for mmap access (file access moves bytes with read()/write()).
    pub widths: Vec<Width>,
    /// Bytes per access (default: the whole buffer).
    pub size: Option<u64>,
    /// Bytes per configuration.
    pub total: u64,
    /// The total was not given: each row also stops once its samples took this many ns
    /// (`sampler::ROW_BUDGET_NS`).
    pub budget_ns: Option<u64>,
}

/// Part times of one access, nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
struct PartNs {
    sync_for_cpu: u64,
    main: u64,
    sync_for_device: u64,
}

fn median(v: &mut [u64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

fn parts_of(samples: &[PartNs]) -> Parts {
    let us = |f: fn(&PartNs) -> u64| median(&mut samples.iter().map(f).collect::<Vec<_>>()) / 1000.0;
    let total: Vec<u64> = samples.iter().map(|p| p.sync_for_cpu + p.main + p.sync_for_device).collect();
    Parts {
        sync_for_cpu_us: us(|p| p.sync_for_cpu),
        main_us: us(|p| p.main),
        sync_for_device_us: us(|p| p.sync_for_device),
        total_us: median(&mut total.clone()) / 1000.0,
    }
}

/// One access, timed in parts: sync for the CPU, the copy, sync for the device.
fn access(
    clock: &dyn Clock,
    view: &mut dyn CpuView,
    how: (Access, Sync, Width, MemType),
    dir: Direction,
    host: &mut [u8],
) -> Result<PartNs> {
    let (acc, sync, w, mem) = how;
    let len = host.len() as u64;
    let t0 = clock.now_ns();
    if sync == Sync::Explicit {
        view.sync_for_cpu(0, len, dir)?;
    }
    let t1 = clock.now_ns();
    match (acc, dir) {
        (Access::File, Direction::H2c) => view.write_file(0, host)?,
        (Access::File, Direction::C2h) => view.read_file(0, host)?,
        // SAFETY: the view maps at least `len` bytes (the runner sizes host buffers from the
        // buffer's length), page-aligned so every width's alignment holds; `available(w)` was
        // checked; `host` is a distinct live buffer.
        (Access::Mmap, Direction::H2c) => unsafe { mmio::copy_to_io(w, mem, view.ptr(), host.as_ptr(), host.len()) },
        (Access::Mmap, Direction::C2h) => unsafe {
            mmio::copy_from_io(w, mem, host.as_mut_ptr(), view.ptr(), host.len())
        },
    }
    let t2 = clock.now_ns();
    if sync == Sync::Explicit {
        view.sync_for_device(0, len, dir)?;
    }
    let t3 = clock.now_ns();
    Ok(PartNs { sync_for_cpu: t1 - t0, main: t2 - t1, sync_for_device: t3 - t2 })
}

/// The (access, coherence, width) configurations a buffer supports under `plan`.
fn configs(buf: &dyn CpuBuffer, plan: &BufferPlan) -> Vec<(Access, Sync, Width)> {
    let mut v = Vec::new();
    for sync in buf.syncs() {
        for acc in buf.accesses() {
            match acc {
                Access::Mmap => v.extend(plan.widths.iter().map(|w| (acc, sync, *w))),
                Access::File => v.push((acc, sync, Width::B8)),
            }
        }
    }
    v
}

/// Measure `buffers`; `unavailable` lists (name, why) of kinds the host could not provide, which
/// the report names as skipped.
pub fn run(
    buffers: &[Box<dyn CpuBuffer>],
    unavailable: &[(String, String)],
    plan: &BufferPlan,
    s: &mut Sampling,
) -> Result<Report> {
    // Host memory, reached by the CPU alone: no device's access path (each buffer names its own
    // kind and file, a real u-dma-buf as one).
    let mut report = Report::new(Kind::Buffers, "host", false, Via::Host, s.overhead.median_s * 1e9);
    let sizes: Vec<u64> = buffers.iter().map(|b| plan.size.unwrap_or(b.len() as u64)).collect();
    check_total(plan.total, &sizes)?;
    for (name, why) in unavailable {
        report.buffers.push(BufferFacts {
            name: name.clone(),
            kind: None,
            path: None,
            facts: Vec::new(),
            skipped: Some(why.clone()),
        });
    }
    let mut pattern = Pattern::fresh();
    'all: for (buf, &size) in buffers.iter().zip(&sizes) {
        if size > buf.len() as u64 {
            return Err(Error::usage(format!("{} holds {} bytes: --size {size} does not fit", buf.name(), buf.len())));
        }
        report.buffers.push(BufferFacts {
            name: buf.name(),
            kind: Some(buf.kind()),
            path: buf.path(),
            facts: buf.facts(),
            skipped: None,
        });
        for (acc, sync, w) in configs(buf.as_ref(), plan) {
            let mem = buf.mem_type(sync);
            let row = |dir| {
                let mut r = Row::new(dir, size);
                r.buffer = Some(buf.name());
                r.access = Some(acc);
                r.sync = Some(sync);
                r.memory = Some(buf.memory_type(sync));
                r.mem = (acc == Access::Mmap).then_some(mem);
                r.width = (acc == Access::Mmap).then_some(w);
                r
            };
            let (mut wr, mut rd) = (row(Direction::H2c), row(Direction::C2h));
            let unaligned = acc == Access::Mmap && size % w.bytes() as u64 != 0;
            if let Some(why) = mmio::available(w)
                .err()
                .map(|e| e.to_string())
                .or(unaligned.then(|| format!("width {w} moves {}-byte accesses: {size} is not a multiple", w.bytes())))
            {
                for r in [&mut wr, &mut rd] {
                    r.notes.push(Note::Skipped { reason: why.clone() });
                }
                report.results.extend([wr, rd]);
                continue;
            }
            pattern = pattern.successor();
            let expected = pattern.try_generate(size as usize)?;
            let mut view = buf.open(sync)?;
            let sync_ns = if sync == Sync::Explicit { Some(sync_cost(s.clock, view.as_mut(), size)?) } else { None };
            for (dir, r) in [(Direction::H2c, &mut wr), (Direction::C2h, &mut rd)] {
                // Page-aligned host side, as in the PIO runner (mmio::HostBuf says why).
                let mut host =
                    if dir == Direction::H2c { HostBuf::copy_of(&expected)? } else { HostBuf::zeroed(size as usize)? };
                let mut parts = Vec::new();
                let clock = s.clock;
                let sampled = match s.run_within(size, plan.total, plan.budget_ns, |k| {
                    for _ in 0..k {
                        parts.push(access(clock, view.as_mut(), (acc, sync, w, mem), dir, &mut host)?);
                    }
                    Ok(())
                }) {
                    // The device whose buffers these are stopped answering (the sampler watches
                    // it between samples): the rows before are kept, the one line says so.
                    Err(Error::Gone(what)) => {
                        let device = s.health.and_then(|h| h.functions().next().map(str::to_string));
                        report.gone = Some(super::gone::line(device.as_deref().unwrap_or("the device"), &what, s));
                        break 'all;
                    }
                    r => r?,
                };
                r.measured(&sampled, None, s.overhead.median_s * 1e9);
                r.parts = Some(parts_of(&parts));
                if let (Some(ns), Some(t)) = (sync_ns, r.traced.filter(|t| t.secs > 0.0)) {
                    // Every access syncs once each way: what that costs the row (issue 43).
                    let share_pct = (ns * sampled.measured() as f64 * 1e-9 / t.secs * 100.0).min(100.0);
                    r.notes.push(Note::SyncCost { ns_per_access: ns, share_pct });
                }
                if sampled.interrupted {
                    r.notes.push(Note::Interrupted { engine: None });
                    report.interrupted = true;
                }
                if dir == Direction::C2h {
                    let v = match verify(&expected, &host, 0) {
                        Ok(()) => Verify::Ok,
                        Err(m) => {
                            report.warnings.push(format!("{} {} {dir}: {m}", buf.name(), acc.name()));
                            Verify::Mismatch { mismatch: m }
                        }
                    };
                    r.verify = Some(v);
                }
            }
            // The read-back checks what the write left in the buffer.
            wr.verify = rd.verify.clone();
            if sync == Sync::Explicit && acc == Access::Mmap {
                partial_sync(view.as_mut(), size, &mut wr);
            }
            let stop = report.interrupted;
            report.results.extend([wr, rd]);
            if stop {
                break 'all;
            }
        }
    }
    Ok(report)
}

/// Syncs timed at setup, median taken.
const SYNC_PROBES: usize = 9;

/// What one access's syncs cost (for the CPU, then for the device, of the whole `size`), timed on
/// `clock` once per view before its rows: the median of `SYNC_PROBES` pairs, in ns. On u-dma-buf
/// that is the packed command's write(2) and the driver's dma_sync_single_for_*.
fn sync_cost(clock: &dyn Clock, view: &mut dyn CpuView, size: u64) -> Result<f64> {
    let mut t = Vec::with_capacity(SYNC_PROBES);
    for _ in 0..SYNC_PROBES {
        let t0 = clock.now_ns();
        view.sync_for_cpu(0, size, Direction::H2c)?;
        view.sync_for_device(0, size, Direction::H2c)?;
        // A fake clock charges two calls of its cost model; a real one measured them.
        clock.did(2, 0);
        t.push(clock.now_ns().saturating_sub(t0));
    }
    t.sort_unstable();
    Ok(t[SYNC_PROBES / 2] as f64)
}

/// Sync the middle half of the buffer alone: the region the interface took is checked by the
/// view (u-dma-buf reads its sync_offset/sync_size/sync_direction back); a failure is a note.
fn partial_sync(view: &mut dyn CpuView, size: u64, row: &mut Row) {
    let (off, len) = ((size / 4) & !0xfff, (size / 2).max(1));
    let r = view.sync_for_cpu(off, len, Direction::H2c).and_then(|_| view.sync_for_device(off, len, Direction::H2c));
    row.notes.push(match r {
        Ok(()) => Note::PartialSync { offset: off, size: len, error: None },
        Err(e) => Note::PartialSync { offset: off, size: len, error: Some(e.to_string()) },
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sample::clock::FakeClock;
    use crate::dma::cpu::anon::Anon;
    use std::sync::atomic::AtomicBool;

    fn go(buffers: &[Box<dyn CpuBuffer>], plan: &BufferPlan, clock: &dyn Clock) -> Result<Report> {
        let stop = AtomicBool::new(false);
        let mut progress = ();
        let mut s = Sampling::new(clock, &stop, &mut progress, None);
        run(buffers, &[], plan, &mut s)
    }

    #[test]
    fn heap_write_then_read_verified_with_exact_parts() {
        let bufs: Vec<Box<dyn CpuBuffer>> = vec![Box::new(Anon::new(64 << 10, false).unwrap())];
        // 10 ns per clock reading, 1000 bytes/µs: one 64 KiB access is 65536 ns of copying.
        let clock = FakeClock::new(10, 0, 1000);
        let plan = BufferPlan { widths: vec![Width::Memcpy], size: None, total: 16 * 65536, budget_ns: None };
        let r = go(&bufs, &plan, &clock).unwrap();
        assert_eq!(r.results.len(), 2);
        for x in &r.results {
            assert_eq!(x.verify, Some(Verify::Ok), "{x:?}");
            assert_eq!(x.stats.as_ref().unwrap().transfers, 16);
            let p = x.parts.unwrap();
            // Coherent memory: no sync calls; the copy's cost lands when the clock is told, after
            // the last reading of the access, so the parts are the readings' cost alone.
            assert_eq!((p.sync_for_cpu_us, p.main_us, p.sync_for_device_us), (0.01, 0.01, 0.01));
        }
        assert_eq!(r.buffers[0].name, "heap");
    }

    /// The device whose buffers are measured stops answering (its config space reads all-ones):
    /// the run ends with the card-gone line, not a plain error (issue 37).
    #[test]
    fn a_device_that_stops_answering_ends_the_run_with_the_card_gone_line() {
        let t = tempfile::tempdir().unwrap();
        let fx = crate::pci::fixture::health_tree(t.path());
        let host = crate::host::Host::with_root(t.path());
        let probe = crate::pci::health::HealthProbe::new(&host, &"0000:03:00.0".parse().unwrap());
        crate::pci::fixture::health_down(&fx);
        let bufs: Vec<Box<dyn CpuBuffer>> = vec![Box::new(Anon::new(64 << 10, false).unwrap())];
        // 10 bytes/µs: each 64 KiB access is 6.5 ms, past the 1 ms between checks.
        let clock = FakeClock::new(10, 0, 10);
        let plan = BufferPlan { widths: vec![Width::Memcpy], size: None, total: 16 * 65536, budget_ns: None };
        let stop = AtomicBool::new(false);
        let mut progress = ();
        let mut s = Sampling::new(&clock, &stop, &mut progress, Some(&probe));
        let r = run(&bufs, &[], &plan, &mut s).expect("a report, not an error");
        let line = r.gone.as_deref().expect("the device named as gone");
        assert!(
            line.starts_with("0000:03:00.0 no longer answers (surprise removal, link down, or a reset): its config space reads vendor id 0xffff; upstream port 0000:00:1c.0: link down"),
            "{line}"
        );
        assert!(r.results.is_empty(), "no row was measured whole");
        assert_eq!(crate::outcome::Outcome::of_report(&r).code(), 1);
    }

    #[test]
    fn u_dma_buf_every_way_in_verified_in_seed_format() {
        let (_t, h) = crate::dma::cpu::udev::testing::fixture(true);
        let bufs: Vec<Box<dyn CpuBuffer>> =
            vec![Box::new(crate::dma::cpu::udev::UDmaBuf::open(&h, "udmabuf0", Some(16384)).unwrap())];
        let plan = BufferPlan { widths: vec![Width::Memcpy], size: None, total: 16 * 16384, budget_ns: None };
        let r = go(&bufs, &plan, &crate::bench::sample::clock::MonotonicClock).unwrap();
        // {explicit sync, O_SYNC} x {mmap, file} x {write, read}.
        assert_eq!(r.results.len(), 8);
        assert!(r.results.iter().all(|x| x.verify == Some(Verify::Ok)), "{:?}", r.results);
        assert!(r.results.iter().any(|x| x
            .notes
            .iter()
            .any(|n| matches!(n, Note::PartialSync { offset: 0x1000, size: 0x2000, error: None }))));
        let seed = crate::report::seed::Seed;
        let text = crate::report::Exporter::report(&seed, &r).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "device=u-dma-buf udmabuf0");
        assert!(lines.contains(&"phys_addr=0x0000000012340000"));
        assert_eq!(text.matches("compare = ok").count(), 4);
        assert!(
            text.contains("mmap write test : sync=0 time=") && text.contains("file read  test : sync=1 time="),
            "{text}"
        );
    }

    /// Issue 43: the sync is pcibench's own cost in a cached + sync row, measured once at setup
    /// and said. On a fake clock charging 500 ns a call and 10 ns a reading, a sync pair costs
    /// 1010 ns; only the explicit-sync rows say it.
    #[test]
    fn a_sync_row_says_what_its_syncs_cost_measured_at_setup() {
        let (_t, h) = crate::dma::cpu::udev::testing::fixture(true);
        let bufs: Vec<Box<dyn CpuBuffer>> =
            vec![Box::new(crate::dma::cpu::udev::UDmaBuf::open(&h, "udmabuf0", Some(16384)).unwrap())];
        let plan = BufferPlan { widths: vec![Width::Memcpy], size: None, total: 16 * 16384, budget_ns: None };
        let r = go(&bufs, &plan, &FakeClock::new(10, 500, 1000)).unwrap();
        for x in &r.results {
            let said: Vec<_> = x.notes.iter().filter(|n| matches!(n, Note::SyncCost { .. })).collect();
            match (x.sync, said.as_slice()) {
                (Some(Sync::Explicit), [Note::SyncCost { ns_per_access, share_pct }]) => {
                    assert_eq!(*ns_per_access, 1010.0);
                    assert!(*share_pct > 0.0 && *share_pct < 100.0, "{share_pct}");
                    let text = crate::report::notes::text(said[0]);
                    assert!(text.starts_with("sync cost about 1.0 µs per access"), "{text}");
                }
                (Some(Sync::OSync), []) => {}
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn widths_the_size_cannot_take_are_skipped() {
        let bufs: Vec<Box<dyn CpuBuffer>> = vec![Box::new(Anon::new(4096, false).unwrap())];
        let plan =
            BufferPlan { widths: vec![Width::B64, Width::Memcpy], size: Some(4100), total: 1 << 20, budget_ns: None };
        let e = go(&bufs, &plan, &crate::bench::sample::clock::MonotonicClock).unwrap_err().to_string();
        assert!(e.contains("does not fit"), "{e}");
        let plan =
            BufferPlan { widths: vec![Width::B64, Width::Memcpy], size: Some(4092), total: 1 << 20, budget_ns: None };
        let r = go(&bufs, &plan, &crate::bench::sample::clock::MonotonicClock).unwrap();
        assert!(r.results.iter().filter(|x| x.width == Some(Width::B64)).all(|x| x.skipped()));
        assert!(r.results.iter().filter(|x| x.width == Some(Width::Memcpy)).all(|x| x.verify == Some(Verify::Ok)));
    }
}
