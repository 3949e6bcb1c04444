//! A register access whose model moves data by message, against a client that cannot answer it
//! meanwhile: QEMU's client answers DMA_READ/DMA_WRITE only while no vCPU waits on the device, and
//! its vCPU waits on that very access (lab/findings.md 9 and 15). serve's log then says why the
//! client went, and what to give QEMU instead.

use super::server::{bind, serve, ServeOptions};
use super::wire::{self, cmd, Header, Put};
use super::CONFIG_REGION;
use crate::sim::SimId;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

#[test]
fn a_register_access_left_waiting_on_the_cards_dma_message_is_named_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let listener = bind(&socket).unwrap();
    let stop = AtomicBool::new(false);
    let lines = Mutex::new(Vec::<String>::new());
    let log = |l: &str| lines.lock().unwrap().push(l.to_string());
    std::thread::scope(|s| {
        let server = s.spawn(|| serve(&listener, SimId::DEFAULT, ServeOptions::default(), &stop, &log));
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
