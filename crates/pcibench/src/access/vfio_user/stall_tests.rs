//! A client that behaves as QEMU's does with guest memory it cannot share (lab/findings.md 9 and
//! 15): its register writes are posted, and it answers the server's DMA_READ/DMA_WRITE only while
//! no access of its own waits for a reply (QEMU's vCPU holds the lock its main loop needs). A
//! served card must still move data for it: its engines move data on the session's clock thread
//! (`clock.rs`), never inside the access.

use super::server::{bind, serve, ServeOptions};
use super::version::DmaLayout;
use super::wire::{self, cmd, Header, Message, Put, FLAG_NO_REPLY};
use super::CONFIG_REGION;
use crate::sim::SimId;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The client's memory, at `BASE` in its IOVA space, reached by the server by message only.
const BASE: u64 = 0x10_0000;
const LEN: usize = 1 << 20;

struct QemuLike {
    sock: UnixStream,
    id: u16,
    ram: Vec<u8>,
    /// The server's DMA messages that came while an access waited: answered after its reply.
    held: Vec<Message>,
    /// DMA messages answered.
    answered: u64,
    /// The most data one DMA message asked for or carried.
    largest: u64,
}

impl QemuLike {
    fn send(&mut self, command: u16, payload: &[u8], flags: u32) -> u16 {
        self.id = self.id.wrapping_add(1);
        let h = Header { id: self.id, command, size: 0, flags, error: 0 };
        wire::send(&self.sock, h, payload, &[], None).unwrap();
        self.id
    }

    fn recv(&self, until: Option<Instant>) -> Option<Message> {
        let wait = wire::Wait { idle: until, whole: Duration::from_secs(30), stop: &|| false };
        match wire::recv(&self.sock, &wait) {
            Err(wire::WireError::Timeout) => None,
            r => Some(r.unwrap().expect("the server closed the connection")),
        }
    }

    /// A command that wants a reply, as a vCPU sends it: nothing else is answered until it comes.
    fn access(&mut self, command: u16, payload: &[u8]) -> Message {
        let id = self.send(command, payload, 0);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let m = self.recv(Some(deadline)).expect("no reply within 20 s: the server waited on the client");
            if m.header.is_reply() && m.header.id == id {
                self.answer_held();
                return m;
            }
            assert!(!m.header.is_reply(), "a reply to nothing asked: {:?}", m.header);
            self.held.push(m);
        }
    }

    /// The main loop's turn: the server's DMA messages, answered.
    fn answer(&mut self, m: Message) {
        let layout = DmaLayout::Spec;
        let (address, count) = layout.parse(&m.payload).unwrap();
        let at = (address - BASE) as usize;
        self.largest = self.largest.max(count);
        let payload = match m.header.command {
            cmd::DMA_READ => layout.with_data(address, &self.ram[at..at + count as usize]),
            cmd::DMA_WRITE => {
                let data = &m.payload[layout.data_at()..];
                self.ram[at..at + data.len()].copy_from_slice(data);
                layout.preamble(address, count).0
            }
            c => panic!("the server sent {}", cmd::name(c)),
        };
        wire::send(&self.sock, m.header.reply(), &payload, &[], None).unwrap();
        self.answered += 1;
    }

    fn answer_held(&mut self) {
        for m in std::mem::take(&mut self.held) {
            self.answer(m);
        }
    }

    /// The main loop between accesses: whatever the server sent within `for_`, answered.
    fn idle(&mut self, for_: Duration) {
        let until = Instant::now() + for_;
        while let Some(m) = self.recv(Some(until)) {
            self.answer(m);
        }
    }

    fn read32(&mut self, region: u32, offset: u64) -> u32 {
        let m = self.access(cmd::REGION_READ, &Put::default().u64(offset).u32(region).u32(4).0);
        u32::from_le_bytes(m.payload[16..20].try_into().unwrap())
    }

    /// A posted write (QEMU's default for BARs: no reply).
    fn write32(&mut self, region: u32, offset: u64, v: u32) {
        self.send(cmd::REGION_WRITE, &Put::default().u64(offset).u32(region).u32(4).u32(v).0, FLAG_NO_REPLY);
    }
}

/// An XDMA descriptor (PG195 Table 5): magic, `control` (Stop 0x1, Completed 0x2, EOP 0x10), one
/// block.
fn descriptor(control: u32, len: u32, src: u64, dst: u64) -> [u8; 32] {
    let mut d = [0u8; 32];
    let words = [0xad4b_0000 | control, len, src as u32, (src >> 32) as u32, dst as u32, (dst >> 32) as u32, 0, 0];
    for (i, w) in words.iter().enumerate() {
        d[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    d
}

/// Start the XDMA channel at `chan` (0x0000 H2C, 0x1000 C2H) on the chain at `desc`.
fn start(c: &mut QemuLike, bar: u32, chan: u64, desc: u64) {
    let sg = chan + 0x4000;
    c.write32(bar, sg + 0x80, desc as u32);
    c.write32(bar, sg + 0x84, 0);
    c.write32(bar, sg + 0x88, 0);
    c.write32(bar, chan + 0x04, 1);
}

/// Poll the channel at `chan` as a driver does until it is idle, then clear run. Its final status
/// and completed descriptor count.
fn wait_idle(c: &mut QemuLike, bar: u32, chan: u64) -> (u32, u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = c.read32(bar, chan + 0x40);
        if status & 1 == 0 {
            let completed = c.read32(bar, chan + 0x48);
            c.write32(bar, chan + 0x04, 0);
            return (status, completed);
        }
        assert!(Instant::now() < deadline, "the engine stayed busy: status {status:#x}");
        c.idle(Duration::from_micros(200));
    }
}

fn run_channel(c: &mut QemuLike, bar: u32, chan: u64, desc: u64) -> (u32, u32) {
    start(c, bar, chan, desc);
    wait_idle(c, bar, chan)
}

/// Serve `card` on a thread and hand `f` a QEMU-like client with its memory mapped by message and
/// Bus Master on; the server's log must not name a stall.
fn with_qemu_like(card: SimId, f: impl FnOnce(&mut QemuLike)) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let listener = bind(&socket).unwrap();
    let stop = AtomicBool::new(false);
    let lines = Mutex::new(Vec::<String>::new());
    let log = |l: &str| lines.lock().unwrap().push(l.to_string());
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&listener, card, ServeOptions::default(), &stop, &log));
        let _stop = super::tests::StopOnDrop(&stop);
        let sock = UnixStream::connect(&socket).unwrap();
        let mut c = QemuLike { sock, id: 0x100, ram: vec![0; LEN], held: Vec::new(), answered: 0, largest: 0 };
        let caps = b"{\"capabilities\":{\"max_msg_fds\":16,\"max_data_xfer_size\":1048576}}\0";
        c.access(cmd::VERSION, &Put::default().u16(0).u16(0).bytes(caps).0);
        // Guest RAM without a descriptor (QEMU's when it is not a shared memfd): reached by message.
        c.access(cmd::DMA_MAP, &Put::default().u32(32).u32(3).u64(0).u64(BASE).u64(LEN as u64).0);
        // Bus master on (config space: a write QEMU waits for).
        c.access(cmd::REGION_WRITE, &Put::default().u64(4).u32(CONFIG_REGION).u32(4).u32(0x6).0);
        f(&mut c);
        drop(c);
        for _ in 0..600 {
            if lines.lock().unwrap().iter().any(|l| l.starts_with("a client")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
    });
    let lines = lines.into_inner().unwrap();
    assert!(!lines.iter().any(|l| l.contains("waited over a second")), "{lines:?}");
}

fn pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

#[test]
fn a_card_moves_data_for_a_client_that_answers_dma_only_between_its_accesses() {
    with_qemu_like(SimId::DEFAULT, |c| {
        let bar = u32::from(crate::sim::xdma::card::SIM_DMA_BAR);
        let data = pattern();
        c.ram[0x1000..0x2000].copy_from_slice(&data);
        c.ram[0..32].copy_from_slice(&descriptor(0x3, 4096, BASE + 0x1000, 0x8000));
        c.ram[32..64].copy_from_slice(&descriptor(0x3, 4096, 0x8000, BASE + 0x3000));
        let h2c = run_channel(c, bar, 0x0000, BASE);
        let c2h = run_channel(c, bar, 0x1000, BASE + 32);
        // Idle, no error bit (PG195 status: only Descriptor Stopped and Completed may be set), and
        // the one descriptor completed.
        for (status, completed) in [h2c, c2h] {
            assert_eq!((status & !0x6, completed), (0, 1), "status {status:#x}, completed {completed}");
        }
        c.idle(Duration::from_millis(20));
        assert!(c.ram[0x3000..0x4000] == data[..], "the data came back through the card's memory");
        assert!(c.answered >= 4, "descriptors and data moved by message: {}", c.answered);
    });
}

/// QEMU 11.1 offers 1 MiB per message but cuts a DMA_READ reply larger than its socket's send
/// buffer short (lab/findings.md 15): a 384 KiB descriptor moves in messages of 64 KiB at most.
#[test]
fn a_cards_dma_messages_carry_at_most_64_kib_whatever_the_client_allows() {
    with_qemu_like(SimId::DEFAULT, |c| {
        let bar = u32::from(crate::sim::xdma::card::SIM_DMA_BAR);
        const N: usize = 384 << 10;
        let data: Vec<u8> = (0..N).map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[2]).collect();
        c.ram[0x1000..0x1000 + N].copy_from_slice(&data);
        c.ram[0..32].copy_from_slice(&descriptor(0x3, N as u32, BASE + 0x1000, 0));
        c.ram[32..64].copy_from_slice(&descriptor(0x3, N as u32, 0, BASE + 0x80000));
        let h2c = run_channel(c, bar, 0x0000, BASE);
        let c2h = run_channel(c, bar, 0x1000, BASE + 32);
        for (status, completed) in [h2c, c2h] {
            assert_eq!((status & !0x6, completed), (0, 1), "status {status:#x}, completed {completed}");
        }
        c.idle(Duration::from_millis(20));
        assert!(c.ram[0x80000..0x80000 + N] == data[..], "the data came back through the card's memory");
        assert!(c.largest <= 64 << 10, "one DMA message carried {} bytes", c.largest);
        assert!(c.answered >= 2 * (N as u64 >> 16), "{} DMA messages for 2 x {N} bytes", c.answered);
    });
}

/// The AXI4-Stream card: C2H started first, then H2C, whose packet the loopback hands to C2H.
#[test]
fn a_stream_card_moves_data_for_a_client_that_answers_dma_only_between_its_accesses() {
    with_qemu_like(SimId::from_name("sim-xdma-st").unwrap(), |c| {
        let bar = u32::from(crate::sim::xdma::card::SIM_DMA_BAR);
        let data = pattern();
        c.ram[0x1000..0x2000].copy_from_slice(&data);
        // Stop, Completed and End of packet (libxdma.h XDMA_DESC_EOP); a C2H descriptor's source
        // is where its writeback record goes (libxdma.c xdma_init_c2h_wb... as the model takes it).
        c.ram[0..32].copy_from_slice(&descriptor(0x13, 4096, BASE + 0x1000, 0));
        c.ram[32..64].copy_from_slice(&descriptor(0x13, 4096, BASE + 0x5000, BASE + 0x3000));
        start(c, bar, 0x1000, BASE + 32);
        start(c, bar, 0x0000, BASE);
        let h2c = wait_idle(c, bar, 0x0000);
        let c2h = wait_idle(c, bar, 0x1000);
        for (status, completed) in [h2c, c2h] {
            assert_eq!((status & !0x6, completed), (0, 1), "status {status:#x}, completed {completed}");
        }
        c.idle(Duration::from_millis(20));
        assert!(c.ram[0x3000..0x4000] == data[..], "the packet came back through the loopback");
    });
}

/// When the card moves data where it is looked at (no clock thread could be started, or a user's
/// model that reaches client memory inside an access), a client that cannot answer meanwhile is
/// a stall serve's log names, with what to give QEMU instead.
#[test]
fn without_its_clock_thread_an_access_left_waiting_on_the_cards_dma_message_is_named_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let listener = bind(&socket).unwrap();
    let stop = AtomicBool::new(false);
    let lines = Mutex::new(Vec::<String>::new());
    let log = |l: &str| lines.lock().unwrap().push(l.to_string());
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            serve(&listener, SimId::DEFAULT, ServeOptions { no_clock: true, ..Default::default() }, &stop, &log)
        });
        let _stop = super::tests::StopOnDrop(&stop);
        let sock = UnixStream::connect(&socket).unwrap();
        let mut id = 0x100u16;
        let mut send = |command: u16, payload: &[u8]| {
            id += 1;
            let h = Header { id, command, size: 0, flags: 0, error: 0 };
            wire::send(&sock, h, payload, &[], None).unwrap();
        };
        let recv = || wire::recv(&sock, &wire::tests::patient(Duration::from_secs(60))).unwrap().expect("a message");
        let caps = b"{\"capabilities\":{\"max_msg_fds\":16,\"max_data_xfer_size\":1048576}}\0";
        send(cmd::VERSION, &Put::default().u16(0).u16(0).bytes(caps).0);
        assert!(recv().header.is_reply());
        // Guest RAM without a descriptor (QEMU's when it is not a shared memfd): reached by message.
        send(cmd::DMA_MAP, &Put::default().u32(32).u32(3).u64(0).u64(0x10_0000).u64(1 << 20).0);
        assert!(recv().header.is_reply());
        // Bus master on, then the XDMA H2C channel 0 (SGDMA at 0x4000, the channel at 0x0000)
        // given a descriptor in that RAM and started; then its status polled, as a driver does.
        let write = |offset: u64, index: u32, v: u32| Put::default().u64(offset).u32(index).u32(4).u32(v).0;
        let bar = u32::from(crate::sim::xdma::card::SIM_DMA_BAR);
        for (offset, index, v) in
            [(4, CONFIG_REGION, 0x6), (0x4080, bar, 0x10_0000), (0x4084, bar, 0), (0x4088, bar, 0)]
        {
            send(cmd::REGION_WRITE, &write(offset, index, v));
            assert!(recv().header.is_reply());
        }
        send(cmd::REGION_WRITE, &write(0x04, bar, 1));
        let mut polls = 0;
        let dma = loop {
            let m = recv();
            if !m.header.is_reply() {
                break m;
            }
            polls += 1;
            assert!(polls < 100_000, "the engine never reached for its descriptor");
            send(cmd::REGION_READ, &Put::default().u64(0x40).u32(bar).u32(4).0);
        };
        assert_eq!(dma.header.command, cmd::DMA_READ, "the descriptor fetched by message");
        // As QEMU's vCPU does: no answer while the access waits; then gone (QEMU times out at 5 s).
        std::thread::sleep(Duration::from_millis(1500));
        drop(sock);
        let ended = || lines.lock().unwrap().iter().any(|l| l.starts_with("a client was dropped"));
        for _ in 0..600 {
            if ended() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap().unwrap();
    });
    let lines = lines.into_inner().unwrap();
    let end = lines.iter().find(|l| l.starts_with("a client was dropped")).unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        end.contains("; a register access waited over a second for the client to answer the card's DMA_READ/DMA_WRITE")
            && end.contains("share=on"),
        "{end}"
    );
}
