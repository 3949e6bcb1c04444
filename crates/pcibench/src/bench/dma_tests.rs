//! The DMA runner against a mock engine (a memcpy "card"): statistics, verification, bus
//! mastering restored, timeouts stop the engine, Ctrl-C keeps the samples so far.

use super::*;
use crate::access::{BarRegion, IoMode, Mapping, Via};
use crate::bench::clock::{Clock, FakeClock, MonotonicClock};
use crate::bench::timer::TimerOverhead;
use crate::dma::Addressing;
use crate::dma::Segment;
use crate::pci::config::COMMAND;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

struct HeapBuf {
    mem: Vec<u8>,
    seg: [Segment; 1],
}

impl DmaBuffer for HeapBuf {
    fn as_ptr(&self) -> *mut u8 {
        self.mem.as_ptr() as *mut u8
    }
    fn len(&self) -> usize {
        self.mem.len()
    }
    fn segments(&self) -> &[Segment] {
        &self.seg
    }
    fn addressing(&self) -> Addressing {
        Addressing::Sim
    }
    fn describe(&self) -> String {
        "test heap".into()
    }
}

struct HeapAlloc;

impl DmaAllocator for HeapAlloc {
    fn alloc(&self, len: usize) -> Result<Box<dyn DmaBuffer>> {
        let mem = vec![0u8; len];
        let bus = mem.as_ptr() as u64;
        Ok(Box::new(HeapBuf { mem, seg: [Segment { offset: 0, bus, len: len as u64 }] }))
    }
    fn dma_bits(&self) -> u32 {
        64
    }
}

#[derive(Default)]
struct MockEngine {
    card: Vec<u8>,
    job: Option<(usize, Transfer)>,
    corrupt: bool,
    hang: bool,
    stops: u32,
    /// Raise the stop flag after this many runs.
    interrupt_after: Option<(u32, &'static AtomicBool)>,
    runs: u32,
}

impl Engine for MockEngine {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn card_size(&self) -> u64 {
        self.card.len() as u64
    }
    fn max_transfer(&self) -> u64 {
        self.card.len() as u64
    }
    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        self.job = Some((buf.bus_range(t.buf_offset, t.len).unwrap() as usize, *t));
        Ok(())
    }
    fn run(&mut self, _timeout: Duration) -> Result<()> {
        self.runs += 1;
        if let Some((n, flag)) = self.interrupt_after {
            if self.runs >= n {
                flag.store(true, Ordering::Relaxed);
            }
        }
        if self.hang {
            return Err(Error::Device("mock engine timed out after 1 ms".into()));
        }
        let (host, t) = self.job.unwrap();
        let card = &mut self.card[t.card_addr as usize..(t.card_addr + t.len) as usize];
        // SAFETY: `host` is the bus (= virtual) address of a live HeapBuf of at least t.len bytes.
        unsafe {
            match t.dir {
                Direction::H2c => std::ptr::copy_nonoverlapping(host as *const u8, card.as_mut_ptr(), card.len()),
                Direction::C2h => std::ptr::copy_nonoverlapping(card.as_ptr(), host as *mut u8, card.len()),
            }
        }
        if self.corrupt && t.dir == Direction::C2h {
            // SAFETY: as above; offset 5 < t.len in these tests.
            unsafe { *(host as *mut u8).add(5) ^= 1 };
        }
        Ok(())
    }
    fn stop(&mut self) -> Result<String> {
        self.stops += 1;
        Ok("idle".into())
    }
}

struct CfgDev {
    command: Mutex<u16>,
}

impl DeviceAccess for CfgDev {
    fn via(&self) -> Via {
        Via::Sim
    }
    fn open_bar(&self, _i: u8, _m: Mapping, _io: IoMode) -> Result<Box<dyn BarRegion>> {
        Err(Error::Unsupported("no BARs".into()))
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        assert_eq!(offset, COMMAND as u64);
        buf.copy_from_slice(&self.command.lock().unwrap().to_le_bytes());
        Ok(())
    }
    fn config_write(&self, offset: u64, data: &[u8]) -> Result<()> {
        assert_eq!(offset, COMMAND as u64);
        *self.command.lock().unwrap() = u16::from_le_bytes([data[0], data[1]]);
        Ok(())
    }
}

fn plan() -> DmaPlan {
    DmaPlan {
        dirs: vec![Direction::H2c, Direction::C2h],
        sizes: vec![],
        total: 1 << 20,
        card_addr: 0,
        timeout: Duration::from_secs(1),
    }
}

/// Run `p` with the real clock; returns the report and the bytes reported as moved.
fn go(dev: &CfgDev, e: &mut MockEngine, p: &DmaPlan, stop: &AtomicBool) -> Result<(Report, u64)> {
    go_with(dev, e, p, stop, &MonotonicClock)
}

fn go_with(
    dev: &CfgDev,
    e: &mut MockEngine,
    p: &DmaPlan,
    stop: &AtomicBool,
    clock: &dyn Clock,
) -> Result<(Report, u64)> {
    let mut moved = 0;
    let mut progress = |n| moved += n;
    let mut s =
        Sampling { clock, overhead: TimerOverhead::measure(clock), stop, progress: &mut progress, health: None };
    let r = run(setup(dev, e), p, &mut s)?;
    Ok((r, moved))
}

fn setup<'a>(dev: &'a CfgDev, e: &'a mut MockEngine) -> DmaSetup<'a> {
    DmaSetup {
        dev,
        device: "test",
        simulated: true,
        link: Some(Link { gen: 2, width: 4, mps: 256, mrrs: 512 }),
        engine: e,
        alloc: &HeapAlloc,
    }
}

#[test]
fn both_directions_verified_and_bus_master_restored() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 0x10000], ..Default::default() };
    let stop = AtomicBool::new(false);
    // 10 ns per clock reading, 2 µs per engine run plus 2000 bytes per µs: one 64 KiB transfer
    // takes 34768 ns, one per sample, 16 samples for 1 MiB.
    let clock = FakeClock::new(10, 2000, 2000);
    let (r, moved) = go_with(&dev, &mut e, &plan(), &stop, &clock).unwrap();
    assert_eq!(r.results.len(), 2);
    let mut timed = 0;
    for x in &r.results {
        assert_eq!(x.size, 0x10000);
        assert_eq!(x.verify, Some(Verify::Ok));
        let st = x.stats.as_ref().unwrap();
        assert_eq!((st.transfers, st.samples, st.batch), (16, 16, 1), "{st:?}");
        assert!((st.median_mbps - 65536.0 / 34778e-9 / 1e6).abs() < 1e-6, "{st:?}");
        timed += st.bytes;
    }
    assert_eq!(moved, timed);
    // h2c is a read by the card: its limit is the model's read limit.
    let l = Link { gen: 2, width: 4, mps: 256, mrrs: 512 };
    assert!((r.results[0].limit_mbps.unwrap() - l.read_bps(0x10000) / 1e6).abs() < 1e-6);
    assert_eq!(*dev.command.lock().unwrap(), 0x0002, "bus master restored");
    assert!(!r.interrupted);
}

#[test]
fn corruption_is_named() {
    let dev = CfgDev { command: Mutex::new(0x0006) };
    let mut e = MockEngine { card: vec![0; 4096], corrupt: true, ..Default::default() };
    let p = DmaPlan { dirs: vec![Direction::C2h], sizes: vec![64], total: 256, ..plan() };
    let (r, _) = go(&dev, &mut e, &p, &AtomicBool::new(false)).unwrap();
    assert_eq!(r.results[0].mismatch().unwrap().offset, 5);
}

#[test]
fn timeout_stops_the_engine_and_reports() {
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 4096], hang: true, ..Default::default() };
    let err = go(&dev, &mut e, &plan(), &AtomicBool::new(false)).unwrap_err().to_string();
    assert!(err.contains("timed out") && err.contains("engine stopped; status: idle"), "{err}");
    assert_eq!(e.stops, 1);
    assert_eq!(*dev.command.lock().unwrap(), 0x0002, "bus master restored after an error");
}

#[test]
fn ctrl_c_keeps_samples_and_stops_engine() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let dev = CfgDev { command: Mutex::new(0x0002) };
    let mut e = MockEngine { card: vec![0; 4096], interrupt_after: Some((20_000, &STOP)), ..Default::default() };
    let p = DmaPlan { dirs: vec![Direction::H2c], total: 4096 << 20, ..plan() };
    let (r, _) = go(&dev, &mut e, &p, &STOP).unwrap();
    assert!(r.interrupted);
    assert_eq!(e.stops, 1);
    let st = r.results[0].stats.as_ref().unwrap();
    assert!(st.samples >= 1 && st.transfers < 1 << 20, "{st:?}");
}

#[test]
fn sizes_outside_card_memory_are_refused() {
    let dev = CfgDev { command: Mutex::new(0) };
    let mut e = MockEngine { card: vec![0; 4096], ..Default::default() };
    let p = DmaPlan { sizes: vec![8192], ..plan() };
    assert!(go(&dev, &mut e, &p, &AtomicBool::new(false)).is_err());
    let p = DmaPlan { card_addr: 4096, ..plan() };
    let e2 = go(&dev, &mut e, &p, &AtomicBool::new(false)).unwrap_err();
    assert!(e2.to_string().contains("--card-addr"));
    assert_eq!(*dev.command.lock().unwrap(), 0, "no bus mastering when nothing ran");
}
