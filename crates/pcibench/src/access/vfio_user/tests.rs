//! The client against `serve` on a thread (regions, bounds the server enforces, DMA maps) and
//! against a minimal hand-written server (MSI through an eventfd, which the sim cards do not raise).

use super::server::{bind, serve, ServeOptions};
use super::wire::{self, cmd, Header, Put};
use super::*;
use crate::access::{Fired, IrqKind};
use crate::mmio::Width;
use crate::sim::SimId;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// Run `f` against `card` served on a thread.
fn with_served(card: SimId, mmap: bool, f: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let listener = bind(&socket).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&listener, card, ServeOptions { mmap, ..Default::default() }, &stop, &|_| {}));
        // Stopped however `f` ends: a failed assertion must fail the test, not hang it.
        let _stop = StopOnDrop(&stop);
        f(&socket);
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
    });
}

/// Sets the flag when dropped (a panic unwinding included).
pub(super) struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn served_regions_config_and_the_bounds_the_server_keeps() {
    with_served(SimId::DEFAULT, true, |socket| {
        let dev = VfioUserDevice::open(socket).unwrap();
        assert!(dev.region(0).unwrap().mappable() && dev.region(2).unwrap().mappable());
        assert!(!dev.region(4).unwrap().mappable(), "registers are messages");
        assert!(dev.region(1).is_none());
        let mut ids = [0u8; 4];
        dev.config_read(0, &mut ids).unwrap();
        assert_eq!(ids, [0xee, 0x10, 0x24, 0x70]);
        let c = dev.client();
        let refused = |r: Result<()>| r.unwrap_err().to_string();
        assert!(refused(c.region_read(4, 0x10000, &mut [0; 4])).contains("refused REGION_READ"), "past the BAR");
        assert!(refused(c.region_read(4, 0, &mut [0; 3])).contains("refused REGION_READ"), "not a register width");
        assert!(refused(c.region_read(2, 0, &mut vec![0; wire::MAX_DATA + 1])).contains("refused REGION_READ"));
        assert!(refused(c.region_write(CONFIG_REGION, 0xfe, &[0; 4])).contains("refused REGION_WRITE"));
        // DMA_MAP: one descriptor, whole pages, no overlap; DMA_UNMAP only what was mapped.
        let DmaPath::Shared(map) = dev.dma_path().unwrap() else { panic!("shared memory") };
        let f = crate::dma::buffers::shared::sealed_memfd("t", 8192).unwrap();
        let iova = map.map_shared(f.as_fd(), 8192, 64).unwrap();
        assert!(iova >= 1 << 20, "from the allocator, not this process's address: {iova:#x}");
        let again = Put::default().u32(32).u32(3).u64(0).u64(iova + 4096).u64(4096).0;
        let e = c.request(cmd::DMA_MAP, &again, &[f.as_fd()]).unwrap_err().to_string();
        assert!(e.contains("refused DMA_MAP") && e.contains("File exists"), "a map over a map: EEXIST: {e}");
        // Not whole pages: not mappable, so reached by message (a ROM's odd section from QEMU).
        let odd = Put::default().u32(32).u32(3).u64(0).u64(0x7000_0000).u64(100).0;
        c.request(cmd::DMA_MAP, &odd, &[f.as_fd()]).unwrap();
        c.request(cmd::DMA_UNMAP, &Put::default().u32(24).u32(0).u64(0x7000_0000).u64(100).0, &[]).unwrap();
        assert!(map.unmap_shared(iova, 4096).is_err(), "not a mapping");
        map.unmap_shared(iova, 8192).unwrap();
        // XDMA's INTx pin, 32 MSI and 32 MSI-X vectors, counted from its config space.
        assert_eq!(dev.irqs()[..3], [(0, 1), (1, 32), (2, 32)]);
        assert!(dev.reset().unwrap_err().to_string().contains("offers no reset"));
    });
    // The QDMA card has MSI-X only (no pin): INTx is refused in one line.
    with_served(SimId::from_name("sim-qdma").unwrap(), true, |socket| {
        let dev = VfioUserDevice::open(socket).unwrap();
        assert_eq!(dev.irqs()[..3], [(0, 0), (1, 0), (2, 32)]);
        let e = dev.interrupts(crate::access::IrqRequest::only(IrqKind::Intx, 1)).err().unwrap().to_string();
        assert!(e.contains("offers no INTx vectors") && e.contains("it offers: MSI-X"), "{e}");
    });
}

/// The MSI and MSI-X registers as vfio-pci keeps them from a user: only DEVICE_SET_IRQS enables
/// them, and the MSI-X table is not the client's to read or write.
#[test]
fn the_client_s_interrupt_enables_and_the_msix_table_are_the_server_s() {
    with_served(SimId::DEFAULT, true, |socket| {
        let dev = VfioUserDevice::open(socket).unwrap();
        let caps = |d: &VfioUserDevice| {
            let mut b = [0u8; 256];
            d.config_read(0, &mut b).unwrap();
            crate::pci::intr::read(&b)
        };
        let x = caps(&dev).msix.unwrap();
        assert_eq!((x.table_bar, x.table_offset, x.vectors, x.enabled), (4, 0x8000, 32, false));
        // The client's writes to MSI-X and MSI Enable do not reach the card.
        dev.config_write(x.offset as u64 + 2, &0xc01fu16.to_le_bytes()).unwrap();
        dev.config_write(0x4a, &1u16.to_le_bytes()).unwrap();
        assert!(!caps(&dev).msix.unwrap().enabled && !caps(&dev).msi.unwrap().enabled);
        // The table reads all-ones and ignores writes; the PBA reads through.
        let c = dev.client();
        c.region_write(4, 0x800c, &0u32.to_le_bytes()).unwrap();
        let mut w = [0u8; 4];
        c.region_read(4, 0x800c, &mut w).unwrap();
        assert_eq!(w, [0xff; 4]);
        c.region_read(4, 0x8fe0, &mut w).unwrap();
        assert_eq!(w, [0; 4]);
        // DEVICE_SET_IRQS enables MSI-X at the card, and its teardown clears it.
        let irq = dev.interrupts(crate::access::IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
        assert_eq!((irq.kind(), irq.vectors()), (IrqKind::MsiX, 2));
        let x = caps(&dev).msix.unwrap();
        assert!(x.enabled && !x.function_masked, "{x:?}");
        drop(irq);
        assert!(!caps(&dev).msix.unwrap().enabled);
        let irq = dev.interrupts(crate::access::IrqRequest::only(IrqKind::Msi, 1)).unwrap();
        assert!(caps(&dev).msi.unwrap().enabled);
        drop(irq);
        assert!(!caps(&dev).msi.unwrap().enabled);
    });
}

#[test]
fn message_only_bars_read_back_what_was_written() {
    with_served(SimId::DEFAULT, false, |socket| {
        let dev = VfioUserDevice::open(socket).unwrap();
        let bar = dev.open_bar(2, Mapping::Uc, IoMode::Mmap).unwrap();
        assert!(bar.ptr().is_none());
        bar.write_bulk(0x40, &[1, 2, 3, 4, 5, 6, 7, 8], Width::B32).unwrap();
        assert_eq!(bar.read(0x40, Width::B64).unwrap(), 0x0807_0605_0403_0201);
        assert!(bar.read(0x20000, Width::B32).is_err(), "bounds are checked before any message");
    });
}

#[test]
fn msi_arrives_through_the_eventfd_the_server_was_given_and_reset_is_asked_where_offered() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("msi.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        while let Some(m) = wire::recv(&s, &wire::tests::patient(std::time::Duration::from_secs(60))).unwrap() {
            let h = Header { id: m.header.id, command: m.header.command, size: 0, flags: wire::FLAG_REPLY, error: 0 };
            let reply = match m.header.command {
                cmd::VERSION => Put::default().u16(0).u16(1).bytes(b"{}\0").0,
                cmd::DEVICE_GET_INFO => Put::default().u32(16).u32(DEVICE_PCI | DEVICE_RESET).u32(0).u32(2).0,
                cmd::DEVICE_RESET => Vec::new(),
                cmd::DEVICE_GET_IRQ_INFO => {
                    let index = u32::from_le_bytes(m.payload[8..12].try_into().unwrap());
                    Put::default().u32(16).u32(0).u32(index).u32(u32::from(index == MSI_INDEX)).0
                }
                cmd::DEVICE_SET_IRQS => {
                    // Signal once through every eventfd it was given: an MSI.
                    for fd in &m.fds {
                        rustix::io::write(fd, &1u64.to_ne_bytes()).unwrap();
                    }
                    Vec::new()
                }
                _ => unreachable!("not asked"),
            };
            wire::send(&s, h, &reply, &[], None).unwrap();
        }
    });
    let dev = VfioUserDevice::open(&socket).unwrap();
    dev.reset().unwrap();
    let irq = dev.interrupts(crate::access::IrqRequest::any(1)).unwrap();
    assert!(irq.describe().contains("vfio-user eventfd"));
    assert_eq!(irq.wait(std::time::Duration::from_secs(60)).unwrap().vector(0), 1);
    drop(irq);
    drop(dev);
    server.join().unwrap();
}

#[test]
fn dma_outside_the_mapped_buffers_is_the_engine_s_one_line_error() {
    use crate::dma::buffers::shared::SharedAllocator;
    use crate::dma::engines::xdma::{XdmaEngine, XdmaOptions};
    use crate::dma::{Direction, DmaAllocator, Engine, Transfer};
    with_served(SimId::DEFAULT, true, |socket| {
        let dev = VfioUserDevice::open(socket).unwrap();
        crate::access::set_bus_master(&dev, true).unwrap();
        let DmaPath::Shared(map) = dev.dma_path().unwrap() else { panic!("shared memory") };
        let alloc = SharedAllocator::new(Arc::clone(&map), 64);
        let bar = dev.open_bar(crate::sim::xdma::card::SIM_DMA_BAR, Mapping::Uc, IoMode::Mmap).unwrap();
        let mut eng = XdmaEngine::new(bar, &alloc, XdmaOptions { card_size: 1 << 20, ..Default::default() }).unwrap();
        let buf = alloc.alloc(64 << 10).unwrap();
        let t = Transfer { dir: Direction::C2h, buf_offset: 0, card_addr: 0, len: 64 << 10 };
        eng.prepare(&*buf, &t).unwrap();
        eng.run(std::time::Duration::from_secs(60)).unwrap();
        // The server no longer maps the buffer: the card's writes to it are faults, not writes.
        let bus = buf.segments()[0].bus;
        map.unmap_shared(bus, buf.len() as u64).unwrap();
        eng.prepare(&*buf, &t).unwrap();
        let e = eng.run(std::time::Duration::from_secs(60)).unwrap_err().to_string();
        assert!(!e.contains('\n') && e.contains("XDMA"), "{e}");
        eng.stop().unwrap();
    });
}

/// A device whose interrupts the test raises: config space with an INTx pin and MSI-X (4 vectors),
/// `interrupts` routed through `irq_fds` to eventfds the test keeps (as a kernel would).
/// The eventfds routed on the test device, per irq index.
pub(super) type Routed = Arc<std::sync::Mutex<Vec<(u32, Vec<OwnedFd>)>>>;

pub(super) struct RaisingDevice {
    pub raised: Routed,
    pub calls: Arc<std::sync::Mutex<Vec<String>>>,
}

struct RaisingBackend(Routed, Arc<std::sync::Mutex<Vec<String>>>);

impl IrqBackend for RaisingBackend {
    fn trigger(&self, index: u32, fds: &[BorrowedFd<'_>]) -> Result<()> {
        self.1.lock().unwrap().push(format!("trigger {index} x{}", fds.len()));
        self.0.lock().unwrap().push((index, fds.iter().map(|f| f.try_clone_to_owned().unwrap()).collect()));
        Ok(())
    }
    fn disable(&self, index: u32) -> Result<()> {
        self.1.lock().unwrap().push(format!("disable {index}"));
        self.0.lock().unwrap().retain(|(i, _)| *i != index);
        Ok(())
    }
    fn unmask(&self, index: u32) -> Result<()> {
        self.1.lock().unwrap().push(format!("unmask {index}"));
        Ok(())
    }
    fn via(&self) -> &'static str {
        "test"
    }
    fn device(&self) -> String {
        "the test device".into()
    }
}

impl RaisingDevice {
    pub fn raise(&self, index: u32, vector: usize, times: u64) {
        let r = self.raised.lock().unwrap();
        let (_, fds) = r.iter().find(|(i, _)| *i == index).expect("routed on the device");
        assert_eq!(rustix::io::write(&fds[vector], &times.to_ne_bytes()).unwrap(), 8);
    }
}

impl DeviceAccess for RaisingDevice {
    fn via(&self) -> Via {
        Via::Sim
    }
    fn open_bar(&self, _: u8, _: Mapping, _: IoMode) -> Result<Box<dyn BarRegion>> {
        Err(Error::usage("no BARs"))
    }
    fn config_read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut c = vec![0u8; 256];
        c[0x06] = 0x10; // capability list
        c[0x34] = 0x70;
        c[0x3d] = 1; // INTA
        c[0x70..0x74].copy_from_slice(&[0x11, 0, 3, 0]); // MSI-X, table size 4
        buf.copy_from_slice(&c[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn config_write(&self, _: u64, _: &[u8]) -> Result<()> {
        Ok(())
    }
    fn interrupts(&self, req: IrqRequest) -> Result<Box<dyn Interrupts>> {
        let offered = irq_fds::Offered { intx: 1, msi: 0, msix: 4 };
        let (kind, n) = choose(req, offered, "the test device")?;
        let backend = RaisingBackend(Arc::clone(&self.raised), Arc::clone(&self.calls));
        Ok(Box::new(irq_fds::route(Arc::new(backend), kind, n)?))
    }
}

/// Whatever the served device raises reaches the client's eventfds, vector by vector; INTx unmask
/// travels to the device; a disable or the client's leaving tears the device's interrupts down.
#[test]
fn served_interrupts_are_forwarded_per_vector_and_torn_down_with_the_client() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("irq.sock");
    let listener = bind(&socket).unwrap();
    let stop = AtomicBool::new(false);
    let raised = Arc::new(std::sync::Mutex::new(Vec::new()));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let src = Arc::new(RaisingDevice { raised: Arc::clone(&raised), calls: Arc::clone(&calls) });
    std::thread::scope(|s| {
        let served: Arc<dyn DeviceAccess> = src.clone();
        let server = s.spawn(|| super::server::serve_irqs_from(&listener, SimId::DEFAULT, &stop, served));
        let dev = VfioUserDevice::open(&socket).unwrap();
        assert_eq!(dev.irqs()[..3], [(0, 1), (1, 0), (2, 4)], "from the device's config space");
        // Auto picks MSI-X; two of its four vectors asked for.
        let irq = dev.interrupts(IrqRequest::any(2)).unwrap();
        assert_eq!((irq.kind(), irq.vectors()), (IrqKind::MsiX, 2));
        assert!(irq.describe().contains("vfio-user eventfd"), "{}", irq.describe());
        src.raise(2, 1, 3);
        // Forwarded by the server's thread: the wait returns when it arrives (bounded, not timed).
        let mut got = irq.wait(Duration::from_secs(60)).unwrap();
        while got.total() < 3 {
            let more = irq.wait(Duration::from_secs(60)).unwrap();
            assert!(!more.is_empty(), "forwarded interrupts stopped at {got:?}");
            got = Fired::from_counts(got.counts().iter().zip(more.counts()).map(|(a, b)| a + b).collect());
        }
        assert_eq!(got.counts(), &[0, 3]);
        drop(irq);
        // INTx: routed, raised, unmasked by message.
        let irq = dev.interrupts(IrqRequest::only(IrqKind::Intx, 1)).unwrap();
        src.raise(0, 0, 1);
        assert_eq!(irq.wait(Duration::from_secs(60)).unwrap().total(), 1);
        irq.unmask().unwrap();
        drop(irq);
        drop(dev);
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
    });
    let c = calls.lock().unwrap().clone();
    assert_eq!(c, ["trigger 2 x2", "disable 2", "trigger 0 x1", "unmask 0", "disable 0"]);
    assert!(raised.lock().unwrap().is_empty(), "nothing left routed on the device");
}

/// A connection the server ends with the client's data still unread reads as an end of file on
/// the client's side, not a reset (ECONNRESET), on which QEMU 11's client aborts
/// (lab/findings.md 13).
#[test]
fn a_client_the_server_drops_reads_an_end_of_file_not_a_reset() {
    with_served(SimId::DEFAULT, true, |socket| {
        let sock = std::os::unix::net::UnixStream::connect(socket).unwrap();
        // A header whose size is less than a header's (the session ends on it), then more
        // messages the server never reads.
        let bad = Header { id: 1, command: cmd::VERSION, size: 8, flags: 0, error: 0 };
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&bad.id.to_le_bytes());
        bytes.extend_from_slice(&bad.command.to_le_bytes());
        bytes.extend_from_slice(&bad.size.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&[0x5a; 32 << 10]);
        use std::io::{Read, Write};
        // The server may shut its side while this is still being written (EPIPE): what matters is
        // what the client reads.
        let _ = (&sock).write_all(&bytes);
        sock.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match (&sock).read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) => panic!("the client read {e} where an end of file was due"),
            }
        }
    });
}

/// Commands a client sent before the server ends its connection each get an answer (ENODEV), then
/// the client reads an end of file: no request is left to wait out the client's timeout, and a
/// later send fails at once.
#[test]
fn a_connection_the_server_ends_answers_what_was_sent_then_reads_as_an_end() {
    let (client, server) = std::os::unix::net::UnixStream::pair().unwrap();
    for id in 1..=3u16 {
        let h = Header { id, command: cmd::REGION_READ, size: 0, flags: 0, error: 0 };
        wire::send(&client, h, &Put::default().u64(0).u32(0).u32(4).0, &[], None).unwrap();
    }
    let posted = Header { id: 9, command: cmd::REGION_WRITE, size: 0, flags: wire::FLAG_NO_REPLY, error: 0 };
    wire::send(&client, posted, &Put::default().u64(0).u32(0).u32(4).u32(1).0, &[], None).unwrap();
    super::server::close_cleanly(&server);
    let wait = wire::tests::patient(std::time::Duration::from_secs(5));
    for id in 1..=3u16 {
        let m = wire::recv(&client, &wait).unwrap().expect("an answer");
        assert!(m.header.is_reply() && m.header.id == id, "{:?}", m.header);
        assert_eq!(m.header.flags & wire::FLAG_ERROR, wire::FLAG_ERROR);
        assert_eq!(m.header.error, rustix::io::Errno::NODEV.raw_os_error() as u32);
    }
    assert!(wire::recv(&client, &wait).unwrap().is_none(), "then an end of file (the posted write unanswered)");
    let h = Header { id: 10, command: cmd::REGION_READ, size: 0, flags: 0, error: 0 };
    assert!(wire::send(&client, h, &Put::default().u64(0).u32(0).u32(4).0, &[], None).is_err(), "a later send fails");
}
