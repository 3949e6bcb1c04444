//! The sim card's XDMA model driven as Linux's own XDMA driver drives it (`drivers/dma/xilinx/xdma.c`,
//! `xdma-regs.h`, Linux 6.12), register by register, from what that source writes (issue 49). The lab's
//! `vendor_xdma` scenario runs the driver itself against the served card and found no disagreement; this pins
//! down, without the lab, the ways its use differs from libxdma's, which the model's other tests follow.

use super::tests::{bus, bytes, desc, dev_with, pattern, r, w};
use crate::access::{DeviceAccess, IrqKind, IrqRequest};
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::DmaAllocator;
use crate::sim::xdma::model::XdmaModelConfig;

/// `CHAN_IM_ALL`: descriptor error, read error, idle stopped, magic stopped, completed, stopped.
const IM_ALL: u32 = 1 << 19 | 1 << 9 | 1 << 6 | 1 << 4 | 1 << 2 | 1 << 1;
/// `CHAN_CTRL_START`: run, the stopped and completed enables, and every error enable (0x00fffe1f).
const START: u32 = 1 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 4 | 0x1f << 9 | 0x1f << 14 | 0x1f << 19;
/// A next pointer no descriptor inside a block carries in Linux's chains (dma_pool memory never written there).
const GARBAGE: u64 = 0xdead_0000_0bad_0000;

/// One run as `xdma_xfer_start` starts it: run cleared, the first block's address and adjacent count, START.
fn start(bar: &dyn crate::access::BarRegion, base: u64, first: u64, adj: u32) {
    w(bar, base + 0x0c, 1);
    w(bar, base + 0x4080, first as u32);
    w(bar, base + 0x4084, (first >> 32) as u32);
    w(bar, base + 0x4088, adj);
    w(bar, base + 0x04, START);
}

/// `xdma_link_sg_desc_blocks`' chain: blocks of 32 descriptors 1 KiB apart (its dma_pool: 1 KiB blocks, 32-byte
/// aligned, never across 4 KiB), every descriptor Nxt_adj 0 and its next pointer unwritten, but each block's last
/// (Nxt_adj: the next block's count − 1, next: the next block), the chain's last STOPPED | COMPLETED.
#[test]
fn linux_xdma_chains_blocks_by_their_last_descriptor_and_completes_by_one_unmasked_msix_each_run() {
    let (dev, bar) = dev_with(XdmaModelConfig { stepped: true, ..Default::default() });
    let bar = &*bar;
    let irq = dev.interrupts(IrqRequest::only(IrqKind::MsiX, 2)).unwrap();
    // xdma_channel_init (both channels), then xdma_irq_init: H2C 0 on vector 0, C2H 0 on 1, every channel on.
    for ch in [0, 0x1000] {
        w(bar, ch + 0x0c, 1 << 25);
        w(bar, ch + 0x90, IM_ALL);
    }
    w(bar, 0x20a0, 0x100);
    w(bar, 0x2014, u32::MAX);
    let alloc = SimAllocator::new(dev.host_map().clone());
    let (blocks, data, back) = (alloc.alloc(8192).unwrap(), alloc.alloc(4000).unwrap(), alloc.alloc(4000).unwrap());
    pattern(49, bytes(&*data));
    // 40 descriptors of 100 bytes: block 0 (32) at +0, block 1 (8) at +0x400.
    for i in 0..40u64 {
        let (blk, k) = (i / 32, i % 32);
        let (ctrl, adj, next) = match i {
            31 => (0, 7, bus(&*blocks, 0x400)),
            39 => (0x3, 0, GARBAGE),
            _ => (0, 0, GARBAGE),
        };
        let d = desc(ctrl, adj, 100, bus(&*data, i * 100), 0x1000 + i * 100, next);
        let at = (blk * 0x400 + k * 32) as usize;
        bytes(&*blocks)[at..at + 32].copy_from_slice(&d);
    }
    let sent = || dev.xdma_model().irq().sent();
    start(bar, 0, bus(&*blocks, 0), 31);
    assert_eq!(sent()[..2], [1, 0], "one interrupt, H2C's vector");
    // xdma_channel_isr: the status read-cleared (stopped and completed, no error), then the completed count.
    assert_eq!(
        r(bar, 0x44) & !0x1,
        0x6,
        "{}",
        dev.xdma_model().last_fault(crate::dma::Direction::H2c, 0).unwrap_or_default()
    );
    assert_eq!(r(bar, 0x48), 40, "every descriptor of both blocks");
    let mut card = vec![0u8; 4000];
    dev.xdma_model().card_read(0x1000, &mut card).unwrap();
    assert!(card[..] == bytes(&*data)[..4000], "the card holds the chain's bytes, in order");
    // Back in one descriptor on C2H 0: its own vector, once.
    bytes(&*blocks)[0x800..0x820].copy_from_slice(&desc(0x3, 0, 4000, 0x1000, bus(&*back, 0), GARBAGE));
    start(bar, 0x1000, bus(&*blocks, 0x800), 0);
    assert_eq!(sent()[..2], [1, 1]);
    assert_eq!((r(bar, 0x1044) & !0x1, r(bar, 0x1048)), (0x6, 1));
    assert!(bytes(&*back)[..4000] == bytes(&*data)[..4000]);
    // The interrupt enable mask is never touched per interrupt (libxdma masks and unmasks it; xdma.c does not):
    // the status read ended the request, and the next run's completion raises the vector again.
    start(bar, 0, bus(&*blocks, 0), 31);
    assert_eq!(sent()[..2], [2, 1], "a new interrupt for the next run");
    assert_eq!(r(bar, 0x48), 40, "the count restarts with each run");
    r(bar, 0x44);
    // xdma_irq_fini.
    w(bar, 0x2018, u32::MAX);
    assert_eq!(r(bar, 0x2010), 0);
    drop(irq);
    let v = dev.xdma_model().violations();
    assert!(v.is_empty(), "{v:?}");
}
