//! Every XDMA register, field and bit the driver reads or writes (PG195 "Register Space" and
//! "Descriptors"; the vendor's own driver, Xilinx dma_ip_drivers `XDMA/linux-kernel/xdma/libxdma.h`
//! and `libxdma.c`, where it and PG195 differ). `docs/engines/xdma.md` has one row per constant
//! with its vendor source and the model test that exercises it; `tests/conformance.rs` keeps the
//! two in step.

/// Xilinx's PCI vendor id: XDMA is looked for only on its devices (and simulated cards), where
/// reading the identifier registers cannot trigger anything else's side effects.
pub const XILINX_VENDOR: u16 = 0x10ee;
/// The smallest BAR that can hold the XDMA register targets up to SGDMA common.
pub const MIN_DMA_BAR_LEN: u64 = 0x8000;

// Targets: BAR offset bits 15:12 (channel in 11:8, register in 7:0).
pub(crate) const T_H2C: u32 = 0;
pub(crate) const T_C2H: u32 = 1;
pub(crate) const T_IRQ: u32 = 2;
pub(crate) const T_CONFIG: u32 = 3;
/// H2C SGDMA; C2H SGDMA is the next target.
pub(crate) const T_SGDMA: u32 = 4;

// Identifiers (+0x00 of every target): [31:20] 0x1fc, [19:16] target, [11:8] channel, [7:0] version.
pub(crate) const ID_SUBSYSTEM: u32 = 0x1fc0_0000;
pub(crate) const ID_SUBSYSTEM_MASK: u32 = 0xfff0_0000;
/// What `is_dma_bar` compares: subsystem and target.
pub(crate) const ID_TARGET_MASK: u32 = 0xffff_0000;
/// libxdma.h IRQ_BLOCK_ID and CONFIG_BLOCK_ID.
pub(crate) const IRQ_BLOCK_ID: u32 = 0x1fc2_0000;
pub(crate) const CONFIG_BLOCK_ID: u32 = 0x1fc3_0000;
/// Identifier bit 15: the channel is AXI4-Stream, not memory-mapped.
pub(crate) const ID_STREAM: u32 = 1 << 15;
pub(crate) const ID_VERSION_MASK: u32 = 0xff;

// Channel registers (libxdma.h struct engine_regs).
pub(crate) const CH_ID: u32 = 0x00;
pub(crate) const CH_CONTROL: u32 = 0x04;
pub(crate) const CH_CONTROL_W1C: u32 = 0x0c;
pub(crate) const CH_STATUS: u32 = 0x40;
pub(crate) const CH_STATUS_RC: u32 = 0x44;
pub(crate) const CH_COMPLETED: u32 = 0x48;
/// Alignments: [23:16] address alignment, [15:8] length granularity, [7:0] address bits.
pub(crate) const CH_ALIGNMENTS: u32 = 0x4c;
pub(crate) const CH_WB_LO: u32 = 0x88;
pub(crate) const CH_WB_HI: u32 = 0x8c;
/// Interrupt enable mask: which status events raise the channel's interrupt.
pub(crate) const CH_IE_MASK: u32 = 0x90;
/// The interrupt enable mask's write-1-to-set and write-1-to-clear aliases.
pub(crate) const CH_IE_MASK_W1S: u32 = 0x94;
pub(crate) const CH_IE_MASK_W1C: u32 = 0x98;

// Performance monitor (PG195 "H2C Channel Performance Monitor Control (0xC0)" and the cycle and
// data counts after it; libxdma.h struct engine_regs perf_ctrl, perf_cyc_lo/hi, perf_dat_lo/hi).
pub(crate) const CH_PERF_CTRL: u32 = 0xc0;
pub(crate) const CH_PERF_CYC_LO: u32 = 0xc4;
pub(crate) const CH_PERF_CYC_HI: u32 = 0xc8;
pub(crate) const CH_PERF_DAT_LO: u32 = 0xcc;
pub(crate) const CH_PERF_DAT_HI: u32 = 0xd0;
/// PG195 control bit 0 Auto: count from the channel's run bit rising (which clears the counts)
/// to the completion of the descriptor with the stop bit. libxdma.h names bit 0 XDMA_PERF_RUN
/// and bit 2 XDMA_PERF_AUTO, the other way round; it writes both at once (enable_perf), as here.
pub(crate) const PERF_AUTO: u32 = 1 << 0;
/// PG195 control bit 1 Clear (write only): clear the counts now (libxdma.h XDMA_PERF_CLEAR).
pub(crate) const PERF_CLEAR: u32 = 1 << 1;
/// PG195 control bit 2 Run: arm the counters; 0 halts them.
pub(crate) const PERF_RUN: u32 = 1 << 2;
/// High words: count bits [41:32] in [9:0], and bit 16 "maxed" when the count saturated.
pub(crate) const PERF_HI_COUNT: u32 = 0x3ff;
pub(crate) const PERF_HI_MAXED: u32 = 1 << 16;

// SGDMA registers (libxdma.h struct engine_sgdma_regs).
pub(crate) const SG_ADDR_LO: u32 = 0x80;
pub(crate) const SG_ADDR_HI: u32 = 0x84;
pub(crate) const SG_ADJACENT: u32 = 0x88;

// IRQ block (libxdma.h struct interrupt_regs): channel interrupt enable and its aliases, the
// request and pending registers, the channel vector numbers (four 5-bit fields a word).
/// The user interrupt enable mask and its W1S/W1C aliases (`user_int_enable`, `_w1s`, `_w1c`):
/// libxdma clears every bit at open (`user_interrupts_disable(xdev, ~0)`).
pub(crate) const IRQ_USER_ENABLE: u32 = 0x04;
pub(crate) const IRQ_USER_ENABLE_W1S: u32 = 0x08;
pub(crate) const IRQ_USER_ENABLE_W1C: u32 = 0x0c;
pub(crate) const IRQ_CHANNEL_ENABLE: u32 = 0x10;
pub(crate) const IRQ_CHANNEL_ENABLE_W1S: u32 = 0x14;
pub(crate) const IRQ_CHANNEL_ENABLE_W1C: u32 = 0x18;
pub(crate) const IRQ_USER_REQUEST: u32 = 0x40;
pub(crate) const IRQ_CHANNEL_REQUEST: u32 = 0x44;
pub(crate) const IRQ_CHANNEL_PENDING: u32 = 0x4c;
/// The user vector numbers (`user_msi_vector`, four 32-bit words of four 5-bit fields at
/// 0x80-0x8C): libxdma programs them only for INTx on pins B-D (`irq_legacy_setup`).
pub(crate) const IRQ_USER_VECTOR: u32 = 0x80;
pub(crate) const IRQ_CHANNEL_VECTOR: u32 = 0xa0;

// Config block: PCIe max payload and max read request codes (128 << code), data path width.
pub(crate) const CFG_MAX_PAYLOAD: u32 = 0x08;
pub(crate) const CFG_MAX_READ: u32 = 0x0c;
pub(crate) const CFG_DATA_WIDTH: u32 = 0x18;

// Channel control bits (libxdma.h XDMA_CTRL_*).
pub(crate) const RUN: u32 = 1 << 0;
pub(crate) const IE_DESC_STOPPED: u32 = 1 << 1;
pub(crate) const IE_DESC_COMPLETED: u32 = 1 << 2;
pub(crate) const IE_ALIGN_MISMATCH: u32 = 1 << 3;
pub(crate) const IE_MAGIC_STOPPED: u32 = 1 << 4;
/// PG195 ie_invalid_length: neither libxdma.h nor Linux's xdma-regs.h has a macro for it, and
/// neither driver sets it.
pub(crate) const IE_INVALID_LENGTH: u32 = 1 << 5;
pub(crate) const IE_READ_ERROR: u32 = 0x1f << 9;
/// PG195 ie_write_error: libxdma.h has no macro for it and libxdma never sets it; AMD's in-kernel
/// driver does (xdma-regs.h `CHAN_CTRL_IE_WRITE_ERROR` in `CHAN_CTRL_START`, on every channel),
/// though PG195 marks C2H control bits 18:14 reserved.
pub(crate) const IE_WRITE_ERROR: u32 = 0x1f << 14;
pub(crate) const IE_DESC_ERROR: u32 = 0x1f << 19;
pub(crate) const POLL_WB: u32 = 1 << 26;
/// The error enables the vendor's poll mode sets in control and in the interrupt enable mask
/// (libxdma.c engine_init_regs, engine_start_mode_config).
pub(crate) const IE_VENDOR_ERRORS: u32 = IE_ALIGN_MISMATCH | IE_MAGIC_STOPPED | IE_READ_ERROR | IE_DESC_ERROR;
/// What `submit` writes to control: run, poll-mode writeback and the error enables. PG195's
/// enables log a status bit and stop the engine on that error; we add invalid_length and
/// write_error to the vendor's set so those errors stop the run with their reason instead of
/// passing unnoticed (they raise no interrupt: the interrupt mask leaves them out). Bits 1-2
/// (descriptor stopped/completed) stay clear as in the vendor's poll mode: PG195 pairs
/// ie_descriptor_completed with pollmode_wb_enable, libxdma.c does not, and the writeback comes
/// without it.
pub(crate) const CONTROL_POLL: u32 = RUN | IE_VENDOR_ERRORS | IE_INVALID_LENGTH | IE_WRITE_ERROR | POLL_WB;
// Poll mode never asks for descriptor-stopped or -completed events, in control or in the mask.
const _: () = assert!((CONTROL_POLL | IE_MASK_POLL) & (IE_DESC_STOPPED | IE_DESC_COMPLETED) == 0);
/// Interrupt enable mask in poll mode: libxdma.c engine_init_regs writes the error enables only.
pub(crate) const IE_MASK_POLL: u32 = IE_VENDOR_ERRORS;
/// What a submit writes to control in interrupt mode: libxdma.c engine_start_mode_config without
/// poll mode (descriptor stopped and completed logged, no writeback), with the two error enables
/// `CONTROL_POLL` adds.
pub(crate) const CONTROL_IRQ: u32 =
    RUN | IE_VENDOR_ERRORS | IE_INVALID_LENGTH | IE_WRITE_ERROR | IE_DESC_STOPPED | IE_DESC_COMPLETED;
/// Interrupt enable mask in interrupt mode: libxdma.c engine_init_regs without poll mode (the
/// errors, descriptor stopped and completed), plus the two errors `CONTROL_IRQ` logs beyond the
/// vendor's, so a run they stop ends by interrupt too rather than by the watchdog.
pub(crate) const IE_MASK_IRQ: u32 =
    IE_VENDOR_ERRORS | IE_INVALID_LENGTH | IE_WRITE_ERROR | IE_DESC_STOPPED | IE_DESC_COMPLETED;

// Channel status bits (libxdma.h XDMA_STAT_*).
pub(crate) const ST_BUSY: u32 = 1 << 0;
/// Every error a status register logs: align, magic, invalid length, read, write, descriptor.
/// libxdma.h's masks (`XDMA_STAT_COMMON_ERR_MASK`, `_DESC_ERR_MASK`, `_H2C_ERR_MASK`,
/// `_C2H_ERR_MASK`) give 0x00F8FE38; bits 16-18 (H2C write errors, PG195) are in Linux
/// xdma-regs.h `XDMA_CHAN_ERROR_MASK` (`CHAN_CTRL_IE_WRITE_ERROR`, 18:14).
pub(crate) const ST_ERRORS: u32 = 0x00ff_fe38;

// Poll-mode writeback word: [31] error, [23:0] completed descriptors since run was set.
pub(crate) const WB_ERROR: u32 = 1 << 31;
pub(crate) const WB_COUNT: u32 = 0x00ff_ffff;

// Alignments the vendor assumes when the register reads 0 (libxdma.c engine_alignments).
pub(crate) const DEFAULT_ADDR_ALIGN: u32 = 1;
pub(crate) const DEFAULT_LEN_GRANULARITY: u32 = 1;
pub(crate) const DEFAULT_ADDR_BITS: u32 = 64;

// Descriptors (libxdma.h struct xdma_desc): 32 bytes, 32-byte aligned; +0x00 [31:16] magic,
// [13:8] Nxt_adj, [7:0] control; +0x04 length; +0x08 source; +0x10 destination; +0x18 next.
pub(crate) const DESC_BYTES: u64 = 32;
pub(crate) const DESC_MAGIC: u32 = 0xad4b;
pub(crate) const DESC_STOP: u32 = 1 << 0;
pub(crate) const DESC_COMPLETED: u32 = 1 << 1;
pub(crate) const DESC_EOP: u32 = 1 << 4;
/// Longest piece per descriptor: the 28-bit length (XDMA_DESC_BLEN_MAX) rounded down to 4 KiB,
/// so a split never breaks the alignment the transfer started with.
pub(crate) const MAX_DESC_LEN: u64 = 0x0fff_f000;
/// Most descriptors in one adjacent block (Nxt_adj is 6 bits; XDMA_MAX_ADJ_BLOCK_SIZE).
pub(crate) const MAX_BLOCK: usize = 64;
/// Adjacent blocks never cross this boundary (PG195 "Descriptors").
pub(crate) const BLOCK_BOUNDARY: u64 = 4096;

/// Offset of register `r` of `target`, channel `ch`.
pub(crate) fn reg(target: u32, ch: u8, r: u32) -> u64 {
    (target << 12 | (ch as u32) << 8 | r) as u64
}

// AXI4-Stream channels (identifier bit 15), driven by `stream.rs`.
/// Most host bytes per C2H stream descriptor, counted from the packet's start: a page, as
/// libxdma's `char_sgdma` read maps the user's buffer page by page (a multiple of `C2H_GRANULE`).
pub const C2H_BUF: u64 = 4096;
/// Every C2H stream descriptor's length is a multiple of this (PG195 and PG344 "Length
/// Granularity", footnote 1); packets are any length, so a packet's last buffer is rounded up.
pub const C2H_GRANULE: u64 = 64;
/// A C2H stream writeback record: 32 bytes, status at +0, length at +4 (libxdma.h `struct
/// xdma_result`); the C2H descriptor's source address points at it (libxdma.c transfer_build).
pub(crate) const RESULT_BYTES: u64 = 32;
/// Status bits 31:16 of a record the engine wrote (libxdma.h `C2H_WB`; PG195 "C2H Stream Writeback").
pub(crate) const RESULT_MAGIC: u32 = 0x52b4;
/// Status bit 0: this buffer holds the packet's last byte (libxdma.h `RX_STATUS_EOP`).
pub(crate) const RESULT_EOP: u32 = 1 << 0;
