//! memtest on every simulated card with card memory, through the measuring API; the aliasing
//! fault is the CLI's test (`tests/memtest.rs`: it is switched on for every card a process builds).

use crate::bench::result::{Report, Verify};
use crate::bench::sample::sampler::Progress;
use crate::host::Host;
use crate::measure::*;
use std::sync::atomic::{AtomicBool, Ordering};

fn request(device: &str, size: Option<u64>, chunk: Option<u64>) -> Request {
    Request::Memtest(MemtestRequest {
        device: device.parse().unwrap(),
        via: None,
        engine: EngineRequest::default(),
        offset: None,
        size,
        chunk,
        timeout_ms: 60_000,
        allow_dma: false,
        common: Common { cpu: None, command_line: vec!["pcibench".into()] },
    })
}

/// Raises the stop flag once `after` bytes have moved (a Ctrl-C mid-test).
struct StopAfter<'a> {
    moved: u64,
    after: u64,
    stop: &'a AtomicBool,
}

impl Progress for StopAfter<'_> {
    fn add(&mut self, bytes: u64) {
        self.moved += bytes;
        if self.moved >= self.after {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn memtest(r: &Request, stop_after: u64) -> crate::Result<Report> {
    let host = Host::with_root("/nonexistent-root");
    let stop = AtomicBool::new(false);
    let mut p = StopAfter { moved: 0, after: stop_after, stop: &stop };
    let m = measure(&host, r, &mut Hooks { stop: &stop, progress: &mut p, trace: None })?;
    let Measured::Report(report) = m.measured else { panic!("a report") };
    Ok(report)
}

#[test]
fn every_card_with_memory_answers_at_its_whole_size() {
    for (card, size, chunk, whole) in [
        ("sim", None, None, 0x12_8000),
        ("sim-xdma4", None, Some(256 << 10), 0x12_8000),
        ("sim-qdma", None, Some(4 << 20), 32 << 20),
        // The NVRAM's 1 GiB whole is the CLI's to run; its first 8 MiB here, 1 MiB at a time.
        ("sim-nvram", Some(8 << 20), Some(1 << 20), 8 << 20),
    ] {
        let r = memtest(&request(card, size, chunk), u64::MAX).unwrap();
        let t = r.memtest.as_ref().unwrap();
        assert!(t.passed(), "{card}: {t:?}");
        assert_eq!((t.size, t.tested, t.answers), (whole, whole, whole), "{card}");
        assert_eq!(t.chunk, chunk.unwrap_or(whole).min(whole), "{card}");
        assert_eq!(t.passes.len(), 2, "{card}: the address pass and its complement");
        let a = t.aliasing.as_ref().unwrap();
        assert_eq!(a.offsets[..3], [0, 8, 16], "{card}");
        assert!(*a.offsets.last().unwrap() * 2 >= whole, "{card}: up to the last power of two inside");
        assert!(r.results.iter().all(|x| x.verify == Some(Verify::Ok)), "{card}");
        let chunks = whole.div_ceil(t.chunk) as usize;
        assert!(
            r.results.iter().all(|x| x.stats.as_ref().unwrap().samples == 2 * chunks),
            "{card}: a sample per chunk and pass"
        );
        assert!(!r.interrupted);
    }
}

#[test]
fn a_stop_ends_it_between_chunks_with_what_was_tested() {
    let r = memtest(&request("sim-qdma", None, Some(4 << 20)), 12 << 20).unwrap();
    let t = r.memtest.as_ref().unwrap();
    assert!(r.interrupted);
    assert_eq!(t.tested, 12 << 20, "three 4 MiB chunks written, then read back and checked");
    assert!(t.passes.iter().all(|p| p.bad_bytes == 0));
    assert!(t.aliasing.is_none(), "no aliasing pass after a stop");
    assert!(r.results.iter().all(|x| x.verify == Some(Verify::Ok)));
}

#[test]
fn what_memtest_refuses() {
    for card in ["sim-xdma-st", "sim-qdma-st"] {
        let e = memtest(&request(card, None, None), u64::MAX).err().unwrap().to_string();
        assert!(e.contains("there is no card memory behind it to test"), "{card}: {e}");
    }
    let e = memtest(&request("sim", Some(2 << 20), None), u64::MAX).err().unwrap().to_string();
    assert!(e.contains("do not fit the xdma engine's 0x128000 bytes of card memory"), "{e}");
    assert!(e.contains("--card-size"), "{e}");
    let e = memtest(&request("sim", None, Some(0)), u64::MAX).err().unwrap().to_string();
    assert!(e.starts_with("--chunk 0"), "{e}");
}
