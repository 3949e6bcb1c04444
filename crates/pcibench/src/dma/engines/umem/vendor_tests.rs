//! Tests of what the umem driver must do as umem.c does (error clearing, semaphore errors, the
//! battery register, MWI, descriptor interrupt bits, chain length, magic numbers), each against
//! the sim NVRAM model's own rendering of that behaviour, which the model tests below check.

use super::tests::{
    bus, bytes, card, card_with, desc, pattern, sem_of, t, Card, CHAIN_COMP, COMPLETE, ERR_PAR, GO, LONG, READ, SEM,
};
use crate::access::{ConfigPort, DeviceAccess};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::umem::{UmemEngine, UmemOptions};
use crate::dma::{Direction, DmaAllocator, DmaBuffer, Engine};
use crate::mmio::Width;
use crate::sim::nvram::model::NvramModelConfig;
use std::sync::Arc;

const MASTER_ABT: u32 = 0x2_0000;
const PARITY_ERR_DET: u32 = 0x4000;

fn pci_status(c: &Card) -> u16 {
    let mut b = [0u8; 2];
    c.dev.config_read(6, &mut b).unwrap();
    u16::from_le_bytes(b)
}

fn pci_command(c: &Card) -> u16 {
    let mut b = [0u8; 2];
    c.dev.config_read(4, &mut b).unwrap();
    u16::from_le_bytes(b)
}

fn no_violations(c: &Card) {
    assert_eq!(c.model.violations(), Vec::<String>::new());
}

/// The control word of descriptor `i` in the engine's descriptor memory.
fn control_of(e: &UmemEngine, i: usize) -> u32 {
    let b = &bytes(e.descriptor_memory())[i * 64 + 0x28..i * 64 + 0x2c];
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Start a hand-made chain of one descriptor at `mem` and wait until the engine is idle.
fn one_descriptor(c: &Card, mem: &dyn DmaBuffer, pci: u64, local: u64, size: u32, control: u32) -> u32 {
    bytes(mem)[..64].copy_from_slice(&desc(pci, local, size, 0, bus(mem, 0x38), control));
    c.run_chain(bus(mem, 0))
}

#[test]
fn model_latches_errors_until_cleared_where_umem_c_clears_them() {
    let c = card();
    let a = c.alloc();
    let mem = a.alloc(64).unwrap();
    // A host address nothing answers: master abort, kept in PCI_STATUS and shown in the status.
    let s = one_descriptor(&c, &*mem, 0x1000, 0, 64, GO | SEM | READ);
    assert_eq!(s & MASTER_ABT, MASTER_ABT, "{s:#x}");
    assert_eq!(pci_status(&c) & 0x2000, 0x2000, "received master abort in PCI_STATUS");
    c.w32(0x68, 0x000f_f800);
    assert_eq!(c.r32(0x68) & MASTER_ABT, MASTER_ABT, "writing 1s to the status register does not clear it");
    let v = c.model.violations();
    assert!(v.len() == 1 && v[0].contains("umem.c clears only DMA_COMPLETE|CHAIN_COMPLETE"), "{v:?}");
    c.dev.config_write(6, &pci_status(&c).to_le_bytes()).unwrap();
    assert_eq!((c.r32(0x68) & MASTER_ABT, pci_status(&c) & 0xf900), (0, 0), "PCI_STATUS written back clears it");
    // Past card memory: ANY_ERR, cleared by writing 0 to ERROR_COUNT.
    let data = a.alloc(64).unwrap();
    let s = one_descriptor(&c, &*mem, bus(&*data, 0), (1 << 30) - 8, 16, GO | SEM | READ);
    assert_eq!(s & 0x800, 0x800, "{s:#x}");
    c.bar.write(0x3d, Width::B8, 0).unwrap();
    assert_eq!(c.r32(0x68) & 0x800, 0);
}

#[test]
fn a_latched_master_abort_is_cleared_through_pci_status_so_the_next_run_works() {
    let c = card();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let buf = a.alloc(8192).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 8192, 0)).unwrap();
    c.model.inject_status(MASTER_ABT);
    let err = e.run(LONG).unwrap_err().to_string();
    assert!(err.contains("master abort"), "{err}");
    assert_eq!(pci_status(&c) & 0xf900, 0, "the driver cleared PCI_STATUS");
    for _ in 0..3 {
        e.run(LONG).unwrap();
    }
    no_violations(&c);
}

#[test]
fn model_writes_error_bits_into_the_semaphore_beside_dma_complete() {
    let c = card();
    let a = c.alloc();
    let (mem, data) = (a.alloc(64).unwrap(), a.alloc(4096).unwrap());
    pattern(3, bytes(&*data));
    c.model.inject_completion_error(PARITY_ERR_DET);
    one_descriptor(&c, &*mem, bus(&*data, 0), 0, 4096, GO | SEM | READ);
    assert_eq!(sem_of(&*mem, 0), GO | SEM | READ | COMPLETE | PARITY_ERR_DET);
    let mut card_mem = vec![0u8; 4096];
    c.model.card_read(0, &mut card_mem).unwrap();
    assert_ne!(card_mem, bytes(&*data)[..4096], "the descriptor completed with damaged data");
    assert_eq!(pci_status(&c) & 0x8000, 0x8000, "detected parity error latched");
}

#[test]
fn a_semaphore_with_dma_complete_and_a_hard_error_is_an_io_error() {
    let c = card();
    let a = c.alloc();
    let mut e = c.engine(&a);
    let buf = a.alloc(8192).unwrap();
    e.prepare(&*buf, &t(Direction::C2h, 8192, 0)).unwrap();
    c.model.inject_completion_error(PARITY_ERR_DET);
    let err = e.run(LONG).unwrap_err().to_string();
    assert!(err.contains("completed with an error in its semaphore") && err.contains("parity error detected"), "{err}");
    e.run(LONG).unwrap();
    no_violations(&c);
}

#[test]
fn model_flags_a_battery_read_during_a_transfer() {
    let c = card();
    let a = c.alloc();
    let (data, mem) = (a.alloc(1 << 20).unwrap(), a.alloc(64).unwrap());
    let me = bus(&*mem, 0);
    bytes(&*mem)[..64].copy_from_slice(&desc(bus(&*data, 0), 0, 1 << 20, me, me + 0x38, GO | SEM | READ | 4));
    c.r8(0x04);
    no_violations(&c);
    c.w32(0x58, me as u32);
    c.w32(0x5c, (me >> 32) as u32);
    c.w32(0x68, GO | 4);
    c.r8(0x04);
    c.w32(0x68, 0);
    c.wait_idle();
    let v = c.model.violations();
    assert!(v.iter().any(|v| v.contains("battery register")), "{v:?}");
}

#[test]
fn the_battery_register_is_read_only_while_the_engine_is_halted() {
    let c = card();
    let a = c.alloc();
    let (data, mem) = (a.alloc(1 << 20).unwrap(), a.alloc(64).unwrap());
    let me = bus(&*mem, 0);
    // A run left going by an earlier process: a chain that points at itself.
    bytes(&*mem)[..64].copy_from_slice(&desc(bus(&*data, 0), 0, 1 << 20, me, me + 0x38, GO | SEM | READ | 4));
    c.w32(0x58, me as u32);
    c.w32(0x5c, (me >> 32) as u32);
    c.w32(0x68, GO | 4);
    let info = crate::sim::CardSpec::info(&crate::sim::nvram::card::NvramCard);
    let found = crate::dma::engines::detect(&info, &c.dev).into_iter().flatten().find(|d| d.engine == "umem").unwrap();
    assert!(found.summary.contains("batteries: not read: a transfer is running"), "{}", found.summary);
    let e = c.engine(&a);
    assert_eq!(e.info().batteries.as_ref().map(|b| b.len()), Some(2), "read once the engine was halted");
    assert_eq!(c.r32(0x68) & GO, 0);
    let v = c.model.violations();
    assert!(v.iter().all(|v| !v.contains("battery")), "{v:?}");
}

#[test]
fn model_flags_mwi_without_the_command_register_bit() {
    let c = card_with(NvramModelConfig { conventional_pci: true, ..Default::default() });
    let a = c.alloc();
    let (data, mem) = (a.alloc(4096).unwrap(), a.alloc(64).unwrap());
    one_descriptor(&c, &*mem, bus(&*data, 0), 0, 4096, GO | SEM | 0xc7 << 24);
    no_violations(&c);
    one_descriptor(&c, &*mem, bus(&*data, 0), 0, 4096, GO | SEM | 0xcf << 24);
    let v = c.model.violations();
    assert!(v.len() == 1 && v[0].contains("MWI Enable clear"), "{v:?}");
    c.dev.config_write(4, &(pci_command(&c) | 0x10).to_le_bytes()).unwrap();
    one_descriptor(&c, &*mem, bus(&*data, 0), 0, 4096, GO | SEM | 0xcf << 24);
    assert_eq!(c.model.violations().len(), 1, "MWI with the bit set is fine");
}

#[test]
fn mwi_only_with_pci_command_mwi_enable_set_else_memory_write() {
    for (conventional, mwi_bit, write_cmd) in [(true, 0x10, 0xf), (false, 0, 0x7)] {
        let c = card_with(NvramModelConfig { conventional_pci: conventional, ..Default::default() });
        let a = c.alloc();
        let mut e = c.engine(&a);
        assert_eq!(pci_command(&c) & 0x10, mwi_bit, "conventional PCI {conventional}");
        assert_eq!(e.pci_commands() >> 24, 0xc0 | write_cmd, "read multiple, and the write command");
        let mut lt = [0u8];
        c.dev.config_read(0x0d, &mut lt).unwrap();
        assert_eq!(lt[0], if conventional { 0xf8 } else { 0 }, "umem.c's latency timer where the card has one");
        let buf = a.alloc(4096).unwrap();
        pattern(1, bytes(&*buf));
        e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
        e.run(LONG).unwrap();
        let back = a.alloc(4096).unwrap();
        e.prepare(&*back, &t(Direction::C2h, 4096, 0)).unwrap();
        assert_eq!(control_of(&e, 0) >> 24, 0xc0 | write_cmd);
        e.run(LONG).unwrap();
        assert!(bytes(&*back)[..] == bytes(&*buf)[..]);
        no_violations(&c);
    }
}

#[test]
fn model_flags_an_interrupt_nothing_services() {
    let c = card();
    let a = c.alloc();
    let (data, mem) = (a.alloc(4096).unwrap(), a.alloc(64).unwrap());
    one_descriptor(&c, &*mem, bus(&*data, 0), 0, 4096, GO | SEM | READ | CHAIN_COMP);
    let v = c.model.violations();
    assert!(v.len() == 1 && v[0].contains("chain complete with CHAIN_COMP_EN"), "{v:?}");
    // Interrupt Disable masks INTx only on a PCI 2.3 function: the card still asserts it.
    c.dev.config_write(4, &(pci_command(&c) | 0x400).to_le_bytes()).unwrap();
    c.clear();
    one_descriptor(&c, &*mem, 0x1000, 0, 4096, GO | SEM | READ | ERR_PAR);
    let v = c.model.violations();
    assert!(v.len() == 2 && v[1].contains("an error with ERR_INT_EN") && v[1].contains("PCI 2.3"), "{v:?}");
    // Without enables the card keeps quiet, completion and errors alike (fpga_sio's descriptors).
    c.clear();
    one_descriptor(&c, &*mem, bus(&*data, 0), 0, 4096, GO | SEM | READ);
    c.clear();
    one_descriptor(&c, &*mem, 0x1000, 0, 4096, GO | SEM | READ);
    assert_eq!(c.model.violations().len(), 2);
}

#[test]
fn c2_descriptors_carry_no_interrupt_enables_and_chain_complete_is_cleared_after_a_run() {
    let c = card();
    let scattered = SimAllocator::scattered(c.dev.host_map().clone());
    let mut e = c.engine(&scattered);
    assert_eq!(pci_command(&c) & 0x400, 0x400, "Interrupt Disable set at open");
    let buf = scattered.alloc(3 * 4096).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 3 * 4096, 0)).unwrap();
    for i in 0..3 {
        let ctl = control_of(&e, i);
        assert_eq!(ctl & (ERR_PAR | CHAIN_COMP), 0, "descriptor {i}: no interrupt enable ({ctl:#x})");
        assert_eq!(ctl & 4 != 0, i < 2, "descriptor {i}: CHAIN_EN on all but the last");
    }
    e.run(LONG).unwrap();
    assert_eq!(c.r32(0x68) & 0x8_0000, 0, "CHAIN_COMPLETE left latched after the run");
    c.model.inject_status(0x1_0000);
    assert!(e.run(LONG).is_err());
    e.run(LONG).unwrap();
    assert_eq!(c.r32(0x68) & 0x8_0000, 0);
    no_violations(&c);
}

#[test]
fn model_flags_a_chain_longer_than_umem_c_builds() {
    let c = card();
    let a = c.alloc();
    let (data, mem) = (a.alloc(129 * 64).unwrap(), a.alloc(129 * 64).unwrap());
    for n in [128usize, 129] {
        for i in 0..n {
            let at = i as u64 * 64;
            let last = i + 1 == n;
            let next = if last { 0 } else { bus(&*mem, at + 64) };
            let ctl = GO | SEM | READ | if last { 0 } else { 4 };
            let d = desc(bus(&*data, at), at, 64, next, bus(&*mem, at + 0x38), ctl);
            bytes(&*mem)[at as usize..at as usize + 64].copy_from_slice(&d);
        }
        c.run_chain(bus(&*mem, 0));
        let v = c.model.violations();
        assert_eq!(v.len(), usize::from(n > 128), "{n} descriptors: {v:?}");
    }
    assert!(c.model.violations()[0].contains("more than 128 descriptors"));
}

#[test]
fn transfers_beyond_128_descriptors_run_as_chains_of_at_most_128() {
    let c = card();
    let scattered = SimAllocator::scattered(c.dev.host_map().clone());
    let mut e = c.engine(&scattered);
    let (src, dst) = (scattered.alloc(300 * 4096).unwrap(), scattered.alloc(300 * 4096).unwrap());
    pattern(300, bytes(&*src));
    e.prepare(&*src, &t(Direction::H2c, 300 * 4096, 0x1000)).unwrap();
    let counts: Vec<usize> = e.chain().unwrap().parts.iter().map(|p| p.count).collect();
    assert_eq!(counts, [128, 128, 44]);
    e.run(LONG).unwrap();
    e.prepare(&*dst, &t(Direction::C2h, 300 * 4096, 0x1000)).unwrap();
    e.run(LONG).unwrap();
    assert!(bytes(&*dst)[..] == bytes(&*src)[..], "300 pages through three chains, both ways");
    no_violations(&c);
}

#[test]
fn only_the_magic_umem_c_knows_is_accepted_for_a_5425() {
    let c = card_with(NvramModelConfig { magic: 0x5e, ..Default::default() });
    let err = c.try_engine(&c.alloc(), UmemOptions::default()).err().unwrap().to_string();
    assert!(err.contains("magic byte 0x5e") && err.contains("not 0x5c (MM-5425CN, umem.c)"), "{err}");
    assert_eq!(c.r8(0x0c), 0, "nothing written");
    let ok = card();
    assert_eq!(ok.engine(&ok.alloc()).info().magic, 0x5c);
}

/// An access path that drops PCI_STATUS writes, as vfio-pci does (vfio_pci_config.c gives
/// PCI_STATUS no writable bits).
struct DropsStatusWrites(Arc<dyn ConfigPort>);

impl ConfigPort for DropsStatusWrites {
    fn read(&self, offset: u64, buf: &mut [u8]) -> crate::Result<()> {
        self.0.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8]) -> crate::Result<()> {
        if offset == 6 {
            return Ok(());
        }
        self.0.write(offset, data)
    }
    fn address(&self) -> String {
        self.0.address()
    }
}

#[test]
fn errors_the_card_keeps_latched_are_refused_with_the_way_to_clear_them() {
    let c = card();
    let a = c.alloc();
    let open = |alloc: &dyn DmaAllocator| {
        let bar = c.dev.open_bar(0, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
        let port = Arc::new(DropsStatusWrites(c.dev.config_port().unwrap()));
        UmemEngine::new(bar, port, 0x5425, alloc, UmemOptions::default())
    };
    let mut e = open(&a).unwrap();
    let buf = a.alloc(4096).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
    c.model.inject_status(MASTER_ABT);
    let err = e.run(LONG).unwrap_err().to_string();
    let fix = "sudo setpci -s sim-nvram STATUS=0xf900";
    assert!(err.contains("master abort") && err.contains("still latches") && err.contains(fix), "{err}");
    let again = e.run(LONG).unwrap_err().to_string();
    assert!(again.starts_with("the MM-5425CN still latches") && again.contains(fix), "{again}");
    drop(e);
    let refused = open(&a).err().unwrap().to_string();
    assert!(refused.contains(fix), "{refused}");
    // Cleared by hand (what setpci does), the card works again.
    c.dev.config_write(6, &0xf900u16.to_le_bytes()).unwrap();
    let mut e = open(&a).unwrap();
    e.prepare(&*buf, &t(Direction::H2c, 4096, 0)).unwrap();
    e.run(LONG).unwrap();
}

#[test]
fn each_device_id_takes_its_own_magic_byte() {
    for (device, magic, batteries) in [(0x5415u16, 0x59u8, 2usize), (0x6155, 0x99, 0)] {
        let c = card_with(NvramModelConfig { magic, ..Default::default() });
        let open = |device| {
            let bar = c.dev.open_bar(0, crate::access::Mapping::Uc, crate::access::IoMode::Mmap).unwrap();
            UmemEngine::new(bar, c.dev.config_port().unwrap(), device, &c.alloc(), UmemOptions::default())
        };
        let e = open(device).unwrap();
        assert_eq!(e.info().batteries.as_ref().map(Vec::len), Some(batteries), "{device:#x}");
        drop(e);
        let err = open(0x5425).err().unwrap().to_string();
        assert!(err.contains(&format!("magic byte {magic:#04x}")) && err.contains("not 0x5c"), "{err}");
    }
}

#[test]
fn every_memory_size_code_umem_h_knows_is_read() {
    for (size, code) in [(128u64 << 20, 0xfe), (256 << 20, 0xfc), (512 << 20, 0xf8), (1 << 30, 0xf0), (2 << 30, 0xe0)] {
        let c = card_with(NvramModelConfig { card_size: size, ..Default::default() });
        let info = crate::dma::engines::umem::regs::probe(&*c.bar, 0x5425).unwrap();
        assert_eq!((info.memory_code, info.memory), (code, Some(size)));
    }
    let c = card();
    c.bar.write(0x07, Width::B8, 0x12).unwrap();
    assert_eq!(c.r8(0x07), 0xf0, "the size code is read-only");
}
