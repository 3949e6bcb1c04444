//! The edu engine: transfers programmed as edu.c checks them, refusals before anything starts,
//! timeouts and a card gone, completion by MSI and INTx, and detection.

use super::*;
use crate::access::mapped::MappedBar;
use crate::access::{Mapping, Via};
use crate::os::mmap::{page_size, Mmap};

fn t(dir: Direction, card_addr: u64, len: u64) -> Transfer {
    Transfer { dir, buf_offset: 0, card_addr, len }
}

#[test]
fn programs_both_directions() {
    let p = program(&t(Direction::H2c, 0, 4095), Some(0x1000), 32).unwrap();
    assert_eq!(p, Program { src: 0x1000, dst: 0x40000, count: 4095, cmd: 1 });
    let p = program(&t(Direction::C2h, 0x40010, 16), Some(0x2000), 32).unwrap();
    assert_eq!(p, Program { src: 0x40010, dst: 0x2000, count: 16, cmd: 3 });
}

/// Sizes and addresses near 2^64 are refused, never wrapped (overflow checks on or off).
#[test]
fn huge_lengths_and_addresses_are_refused_not_wrapped() {
    for (card, len) in [(2, u64::MAX - 1), (0, u64::MAX), (0xfff, u64::MAX - 0xffe)] {
        let e = program(&t(Direction::H2c, card, len), Some(0x1000), 64).unwrap_err().to_string();
        assert!(e.contains("use --size 4095 or less"), "{e}");
    }
    let e = program(&t(Direction::C2h, 0, 16), Some(u64::MAX - 8), 64).unwrap_err().to_string();
    assert!(e.contains("overflows"), "{e}");
    assert!(program(&t(Direction::C2h, u64::MAX, 16), Some(0x1000), 64).is_err());
}

#[test]
fn refuses_what_would_abort_or_misdirect() {
    let e = program(&t(Direction::H2c, 0, 4096), Some(0x1000), 32).unwrap_err().to_string();
    assert!(e.contains("4095"), "{e}");
    assert!(program(&t(Direction::H2c, 0x800, 0x800), Some(0x1000), 32).is_err());
    assert!(program(&t(Direction::H2c, 0x7ff, 0x800), Some(0x1000), 32).is_ok());
    let e = program(&t(Direction::C2h, 0, 16), Some(0xffff_fff8), 32).unwrap_err().to_string();
    assert!(e.contains("32-bit dma_mask") && e.contains("no DMA was started"), "{e}");
    assert!(program(&t(Direction::C2h, 0, 16), Some(0x1000_0000), EDU_DEFAULT_DMA_BITS).is_err());
    let e = program(&t(Direction::C2h, 0, 16), None, 32).unwrap_err().to_string();
    assert!(e.contains("not bus-contiguous"), "{e}");
    assert!(card_offset(0x41000).is_err());
    assert!(program(&t(Direction::C2h, 0, 0), Some(0), 32).is_err());
}

/// A 4 KiB buffer the device would see at the given bus address (nothing behind it: the
/// fake BARs below never move data).
struct B(Vec<crate::dma::Segment>);
impl DmaBuffer for B {
    fn as_ptr(&self) -> *mut u8 {
        std::ptr::null_mut()
    }
    fn len(&self) -> usize {
        4096
    }
    fn segments(&self) -> &[crate::dma::Segment] {
        &self.0
    }
    fn addressing(&self) -> crate::dma::Addressing {
        crate::dma::Addressing::Iova
    }
    fn describe(&self) -> String {
        String::new()
    }
}

/// A fake BAR0 in host memory: the ID register is set, and since nothing clears the start bit,
/// `run` must time out and report the registers.
#[test]
fn a_device_that_never_finishes_times_out_with_its_status() {
    let bar = MappedBar::new(Mmap::anonymous(page_size(), false).unwrap(), 0, 0x1000, Mapping::Uc, Via::Sim);
    bar.write(0, Width::B32, 0x0100_00ed).unwrap();
    let mut e = EduEngine::new(Box::new(bar), 32).unwrap();
    let buf = B(vec![crate::dma::Segment { offset: 0, bus: 0x10_0000, len: 4096 }]);
    e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
    let err = e.run(Duration::from_millis(1)).unwrap_err().to_string();
    assert!(
        err.contains("did not finish") && err.contains("destination 0x100000") && err.contains("count 64"),
        "{err}"
    );
    assert!(e.prepare(&buf, &Transfer { dir: Direction::H2c, buf_offset: 4090, card_addr: 0, len: 16 }).is_err());
}

/// A card that falls off the bus mid-run: command and identification registers read all-ones
/// (the fake BAR is filled with 0xff once the transfer is prepared), named as gone, not as a
/// DMA still running or timed out.
#[test]
fn an_edu_that_stops_answering_is_named_gone() {
    let bar = MappedBar::new(Mmap::anonymous(page_size(), false).unwrap(), 0, 0x1000, Mapping::Uc, Via::Sim);
    bar.write(0, Width::B32, 0x0100_00ed).unwrap();
    let regs = bar.ptr().unwrap() as usize;
    let mut e = EduEngine::new(Box::new(bar), 32).unwrap();
    let buf = B(vec![crate::dma::Segment { offset: 0, bus: 0x10_0000, len: 4096 }]);
    e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
    // SAFETY: the mapping is one page of anonymous memory owned by the engine's BAR, alive here.
    unsafe { std::ptr::write_bytes(regs as *mut u8, 0xff, 0x100) };
    let err = e.run(Duration::from_secs(20)).unwrap_err();
    assert!(matches!(err, Error::Gone(_)), "{err}");
    assert!(err.to_string().contains("identification registers read 0xffffffff"), "{err}");
}

/// edu's timer as an interrupt: a wait that "completes" the DMA in the fake BAR (start bit
/// cleared, DMA-done status set) unless told to fire early or never.
struct FakeMsi {
    regs: usize,
    early: bool,
    silent: bool,
}

/// edu's INTx: the fake timer as above; `unmask` records the acknowledge register as it reads
/// then (the line must be lowered before it is unmasked).
struct FakeIntx {
    msi: FakeMsi,
    ack_at_unmask: std::sync::Mutex<Vec<u64>>,
    /// An interrupt pending from before the transfer (a stale cause).
    pending: std::sync::atomic::AtomicBool,
    /// The acknowledge register when the transfer's own wait began.
    ack_at_wait: std::sync::Mutex<Vec<u64>>,
}

impl crate::access::Interrupts for FakeIntx {
    fn kind(&self) -> crate::access::IrqKind {
        crate::access::IrqKind::Intx
    }
    fn vectors(&self) -> u32 {
        1
    }
    fn wait(&self, timeout: Duration) -> Result<crate::access::Fired> {
        if timeout.is_zero() && self.pending.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Ok(crate::access::Fired::from_counts(vec![1]));
        }
        if !timeout.is_zero() {
            // SAFETY: `regs` is the live 4 KiB mapping behind the test's BAR.
            let ack = unsafe { *((self.msi.regs + REG_IRQ_ACK as usize) as *const u32) };
            self.ack_at_wait.lock().unwrap().push(ack as u64);
        }
        self.msi.wait(timeout)
    }
    fn unmask(&self) -> Result<()> {
        // SAFETY: `regs` is the live 4 KiB mapping behind the test's BAR.
        let ack = unsafe { *((self.msi.regs + REG_IRQ_ACK as usize) as *const u32) };
        self.ack_at_unmask.lock().unwrap().push(ack as u64);
        Ok(())
    }
    fn describe(&self) -> String {
        "fake INTx".into()
    }
}

impl crate::access::Interrupts for FakeMsi {
    fn kind(&self) -> crate::access::IrqKind {
        crate::access::IrqKind::Msi
    }
    fn vectors(&self) -> u32 {
        1
    }
    fn wait(&self, timeout: Duration) -> Result<crate::access::Fired> {
        if timeout.is_zero() || self.silent {
            return Ok(crate::access::Fired::none(1));
        }
        let reg = |off: u64| (self.regs + off as usize) as *mut u32;
        // SAFETY: `regs` is the live 4 KiB mapping behind the test's BAR.
        unsafe {
            if !self.early {
                *reg(REG_DMA_CMD) &= !(CMD_START as u32);
            }
            *reg(REG_IRQ_STATUS) |= DMA_IRQ as u32;
        }
        Ok(crate::access::Fired::from_counts(vec![1]))
    }
    fn describe(&self) -> String {
        "fake MSI".into()
    }
}

fn irq_engine() -> (EduEngine, usize) {
    let bar = MappedBar::new(Mmap::anonymous(page_size(), false).unwrap(), 0, 0x1000, Mapping::Uc, Via::Sim);
    bar.write(0, Width::B32, 0x0100_00ed).unwrap();
    let regs = bar.ptr().unwrap() as usize;
    (EduEngine::new(Box::new(bar), 32).unwrap(), regs)
}

#[test]
fn completion_by_interrupt_arms_checks_and_acknowledges() {
    let buf = B(vec![crate::dma::Segment { offset: 0, bus: 0x20_0000, len: 4096 }]);
    let (mut e, regs) = irq_engine();
    assert!(e.completes_by_interrupt());
    e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
    e.run_interrupt(&FakeMsi { regs, early: false, silent: false }, Duration::from_secs(1)).unwrap();
    let rd = |off: u64| e.bar.read(off, Width::B32).unwrap();
    // The command carried the interrupt bit; the DMA-done bit was acknowledged.
    assert_eq!(rd(REG_DMA_CMD), CMD_TO_RAM | CMD_IRQ, "start bit cleared by the fake timer");
    assert_eq!((rd(REG_DMA_DST), rd(REG_DMA_COUNT)), (0x20_0000, 64));
    assert_eq!(rd(REG_IRQ_ACK), DMA_IRQ);
    // An interrupt while the engine still runs is an error, never a completion.
    let (mut e, regs) = irq_engine();
    e.prepare(&buf, &t(Direction::H2c, 0, 64)).unwrap();
    let err = e.run_interrupt(&FakeMsi { regs, early: true, silent: false }, Duration::from_secs(1)).unwrap_err();
    assert!(err.to_string().contains("before the completion it signals"), "{err}");
    // No interrupt at all: a timeout naming the interrupt and the registers.
    let (mut e, regs) = irq_engine();
    e.prepare(&buf, &t(Direction::H2c, 0, 64)).unwrap();
    let err = e.run_interrupt(&FakeMsi { regs, early: false, silent: true }, Duration::from_millis(1)).unwrap_err();
    assert!(err.to_string().contains("raised no interrupt") && err.to_string().contains("fake MSI"), "{err}");
}

/// With MSI off edu raises INTx: the same completion, then the line unmasked after the
/// acknowledge has lowered it, once per transfer.
#[test]
fn completion_by_intx_unmasks_after_the_acknowledge() {
    let buf = B(vec![crate::dma::Segment { offset: 0, bus: 0x20_0000, len: 4096 }]);
    let (mut e, regs) = irq_engine();
    let irq = FakeIntx {
        msi: FakeMsi { regs, early: false, silent: false },
        ack_at_unmask: Default::default(),
        pending: false.into(),
        ack_at_wait: Default::default(),
    };
    for _ in 0..2 {
        e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
        e.run_interrupt(&irq, Duration::from_secs(1)).unwrap();
        // SAFETY: as in FakeIntx: the next transfer's fake timer sets the status again.
        unsafe { *((regs + REG_IRQ_ACK as usize) as *mut u32) = 0 };
    }
    assert_eq!(*irq.ack_at_unmask.lock().unwrap(), [DMA_IRQ, DMA_IRQ], "acknowledged, then unmasked, each time");
    // No interrupt: no unmask either (nothing was masked).
    let silent = FakeIntx {
        msi: FakeMsi { regs, early: false, silent: true },
        ack_at_unmask: Default::default(),
        pending: false.into(),
        ack_at_wait: Default::default(),
    };
    e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
    assert!(e.run_interrupt(&silent, Duration::from_millis(1)).is_err());
    assert!(silent.ack_at_unmask.lock().unwrap().is_empty());
    // An interrupt pending before the command (a transfer that completed after its run was
    // killed; edu raised it on INTx): its status acknowledged and the line unmasked first.
    let (mut e, regs) = irq_engine();
    // SAFETY: as above: the status bit the killed run's transfer left.
    unsafe { *((regs + REG_IRQ_STATUS as usize) as *mut u32) = DMA_IRQ as u32 };
    let stale = FakeIntx {
        msi: FakeMsi { regs, early: false, silent: false },
        ack_at_unmask: Default::default(),
        pending: true.into(),
        ack_at_wait: Default::default(),
    };
    e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
    e.run_interrupt(&stale, Duration::from_secs(1)).unwrap();
    assert_eq!(*stale.ack_at_unmask.lock().unwrap(), [DMA_IRQ, DMA_IRQ], "unmasked before the command and after");
    // The same cause never delivered (a level already up when INTx was routed): acknowledged
    // before the command all the same, so edu raises the line afresh; nothing to unmask first.
    let (mut e, regs) = irq_engine();
    // SAFETY: as above.
    unsafe { *((regs + REG_IRQ_STATUS as usize) as *mut u32) = DMA_IRQ as u32 };
    let quiet = FakeIntx {
        msi: FakeMsi { regs, early: false, silent: false },
        ack_at_unmask: Default::default(),
        pending: false.into(),
        ack_at_wait: Default::default(),
    };
    e.prepare(&buf, &t(Direction::C2h, 0, 64)).unwrap();
    e.run_interrupt(&quiet, Duration::from_secs(1)).unwrap();
    assert_eq!(*quiet.ack_at_wait.lock().unwrap(), [DMA_IRQ], "acknowledged before the command");
    assert_eq!(quiet.ack_at_unmask.lock().unwrap().len(), 1, "one unmask: after the transfer");
}

#[test]
fn rejects_a_bar_that_is_not_edu() {
    let bar = MappedBar::new(Mmap::anonymous(page_size(), false).unwrap(), 0, 0x1000, Mapping::Uc, Via::Sim);
    let e = EduEngine::new(Box::new(bar), 32).err().unwrap().to_string();
    assert!(e.contains("0x010000ed"), "{e}");
}
