//! Every register offset, field and bit of the QDMA config BAR (PG302) the driver reads or
//! writes, with the vendor symbol that defines it (Xilinx/dma_ip_drivers, QDMA/linux-kernel/
//! driver/libqdma/qdma_access/). The conformance table `docs/engines/qdma.md` has one row per
//! constant here. Prefixes name the IP whose vendor header defines a layout where they differ:
//! `S3_` the QDMA soft IP 3.x (`qdma_soft_reg.h`, also the CPM4 bit positions where
//! `qdma_cpm4_reg.h` agrees), `C4_` Versal CPM4 (`qdma_cpm4_reg.h`, `qdma_cpm4_access.c`),
//! `EQ_` EQDMA 4.0/5.0 and Versal CPM5, which share them (`eqdma_soft_reg.h`,
//! `eqdma_cpm5_reg.h`), `C5_` CPM5 alone (`eqdma_cpm5_access.c`). Unprefixed: the same on all.

use crate::access::BarRegion;
use crate::direction::Direction;
use crate::mmio::Width;
use crate::Result;
use std::time::Duration;

// Identity and capabilities (QDMA_TRQ_SEL_GLBL1 0x0, QDMA_TRQ_SEL_GLBL2 0x100).
pub(crate) const R_ID: u64 = 0x000;
pub(crate) const ID_MAGIC: u32 = 0x1fd3;
pub(crate) const ID_SHIFT: u32 = 16;
pub(crate) const R_BARLITE_EXT: u64 = 0x10c;
/// Each PF's user BAR map in GLBL2_PF_BARLITE_EXT: 6 bits per function.
pub(crate) const BARLITE_BITS: u32 = 6;
pub(crate) const R_CHANNEL_MDMA: u64 = 0x118;
pub(crate) const MDMA_MM_H2C: u32 = 1 << 0;
pub(crate) const MDMA_MM_C2H: u32 = 1 << 8;
pub(crate) const MDMA_ST_H2C: u32 = 1 << 16;
pub(crate) const MDMA_ST_C2H: u32 = 1 << 17;
pub(crate) const R_QDMA_CAP: u64 = 0x120;
pub(crate) const QDMA_CAP_MULTIQ_MAX: u32 = 0xfff;
/// CPM5 has 4096 queues, one more than the 12-bit field holds: it reads 0xfff for them.
pub(crate) const C5_QUEUES_AT_MAX: u32 = 4096;
pub(crate) const R_FUNC_RET: u64 = 0x12c;
pub(crate) const FUNC_RET_FUNC: u32 = 0xff;
pub(crate) const R_MISC_CAP: u64 = 0x134;
pub(crate) const MISC_DEVICE_SHIFT: u32 = 28;
pub(crate) const MISC_RELEASE_SHIFT: u32 = 24;
pub(crate) const MISC_IP_SHIFT: u32 = 20;
pub(crate) const MISC_RTL_SHIFT: u32 = 16;
pub(crate) const MISC_FIELD: u32 = 0xf;
/// Device type [31:28]: soft IP, Versal CPM4, Versal CPM5 (`qdma_fetch_version_details`).
pub(crate) const DEVICE_SOFT: u32 = 0;
pub(crate) const DEVICE_CPM4: u32 = 1;
pub(crate) const DEVICE_CPM5: u32 = 2;
/// IP type [23:20] on a soft device: QDMA 3.x, EQDMA 4.0, EQDMA 5.0.
pub(crate) const IP_QDMA3: u32 = 0;
pub(crate) const IP_EQDMA4: u32 = 1;
pub(crate) const IP_EQDMA5: u32 = 2;
/// IP type [23:20] on a Versal device: the hard IP, or the soft IP in the fabric.
pub(crate) const IP_VERSAL_HARD: u32 = 0;
pub(crate) const IP_VERSAL_SOFT: u32 = 1;

// Performance settings (`perf.rs`): registers the vendor writes at init on EQDMA 5.0
// (`eqdma_set_perf_opt`, SET_1 to SET_4 where they are not stream or interrupt settings) and CPM5 (`eqdma_cpm5_set_perf_opt`), and the values it writes, built
// from the header fields as its FIELD_SETs build them (CPM5 without 10-bit tags, the vendor's
// default build).
pub(crate) const R_CFG_BLK_MISC_CTL: u64 = 0x4c;
pub(crate) const EQ_R_RRQ_BRG_THROT: u64 = 0x158;
pub(crate) const EQ_R_RRQ_PCIE_THROT: u64 = 0x15c;
pub(crate) const EQ_R_RRQ_AXIMM_THROT: u64 = 0x160;
pub(crate) const R_GLBL_DSC_CFG: u64 = 0x250;
/// GLBL_DSC_CFG [2:0] `wb_acc_int`: the writeback (and interrupt) interval code (PG302
/// "Internal Mode Writeback and Interrupts"; `GLBL_DSC_CFG_WB_ACC_INT_MASK`). The vendor sets it
/// (5) on EQDMA 5.0 and CPM5 only; elsewhere it is what the previous driver left, so each DMA
/// row records it (issue 50 item 9).
pub(crate) const DSC_CFG_WB_ACC_INT: u32 = 0x7;
pub(crate) const EQ_R_H2C_REQ_THROT_PCIE: u64 = 0xe24;
pub(crate) const EQ_R_H2C_REQ_THROT_AXIMM: u64 = 0xe2c;
pub(crate) const EQ_R_H2C_MM_DATA_THROTTLE: u64 = 0x12ec;
pub(crate) const EQ5_GLBL_DSC_CFG: u32 = 0x0050_2015;
pub(crate) const EQ5_CFG_BLK_MISC_CTL: u32 = 0x0001_0009;
pub(crate) const EQ5_RRQ_PCIE_THROT: u32 = 0x0604_5000;
pub(crate) const EQ5_RRQ_AXIMM_THROT: u32 = 0;
pub(crate) const EQ5_RRQ_BRG_THROT: u32 = 0x8604_5000;
/// `eqdma_set_perf_opt` SET_4: the H2C request and data throttles (`EQDMA_H2C_REQ_THROT_*`,
/// `EQDMA_H2C_MM_DATA_TH*`).
pub(crate) const EQ5_H2C_REQ_THROT_PCIE: u32 = 0x8604_6000;
pub(crate) const EQ5_H2C_REQ_THROT_AXIMM: u32 = 0x8204_4000;
pub(crate) const EQ5_H2C_MM_DATA_THROTTLE: u32 = 0x0001_5000;
pub(crate) const C5_GLBL_DSC_CFG: u32 = 0x0000_0015;
pub(crate) const C5_CFG_BLK_MISC_CTL: u32 = 0x0001_001f;
pub(crate) const C5_H2C_REQ_THROT_PCIE: u32 = 0x8604_e000;
pub(crate) const C5_H2C_REQ_THROT_AXIMM: u32 = 0x0601_0000;
pub(crate) const C5_H2C_MM_DATA_THROTTLE: u32 = 0x0001_e000;

// The global ring-size table (QDMA_TRQ_SEL_GLBL 0x200).
pub(crate) const R_RNG_SZ: u64 = 0x204;
pub(crate) const RNG_SZ_COUNT: usize = 16;
pub(crate) const RNG_SZ_MASK: u32 = 0xffff;
/// The vendor driver's default global ring-size table, the same in every IP's
/// `*_set_default_global_csr`; each entry counts the status writeback slot too.
pub const VENDOR_RING_SIZES: [u32; RNG_SZ_COUNT] =
    [2049, 65, 129, 193, 257, 385, 513, 769, 1025, 1537, 3073, 4097, 6145, 8193, 12289, 16385];

// Error registers: offsets are the same on every IP, their bits are not.
pub(crate) const R_GLBL_ERR_STAT: u64 = 0x248;
pub(crate) const R_GLBL_ERR_MASK: u64 = 0x24c;
pub(crate) const R_DSC_ERR_STS: u64 = 0x254;
pub(crate) const R_DSC_ERR_MSK: u64 = 0x258;
pub(crate) const R_DSC_ERR_LOG0: u64 = 0x25c;
pub(crate) const R_DSC_ERR_LOG1: u64 = 0x260;
pub(crate) const R_TRQ_ERR_STS: u64 = 0x264;
pub(crate) const R_TRQ_ERR_MSK: u64 = 0x268;
pub(crate) const R_TRQ_ERR_LOG: u64 = 0x26c;

// GLBL_ERR_STAT / GLBL_ERR_MASK: the leaf aggregators.
pub(crate) const GLBL_RAM_SBE: u32 = 1 << 0;
pub(crate) const GLBL_RAM_DBE: u32 = 1 << 1;
pub(crate) const GLBL_DSC: u32 = 1 << 2;
pub(crate) const GLBL_TRQ: u32 = 1 << 3;
pub(crate) const GLBL_C2H_ST: u32 = 1 << 8;
/// Soft 3.x defines only bits 0-3, 8 and 11: no MM engine bits (`qdma_soft_reg.h`).
pub(crate) const S3_GLBL_H2C_ST: u32 = 1 << 11;
/// MM engine bits: CPM4, EQDMA and CPM5 only.
pub(crate) const GLBL_H2C_MM0: u32 = 1 << 4;
pub(crate) const GLBL_H2C_MM1: u32 = 1 << 5;
pub(crate) const GLBL_C2H_MM0: u32 = 1 << 6;
pub(crate) const GLBL_C2H_MM1: u32 = 1 << 7;
pub(crate) const C4_GLBL_IND_CTXT_CMD: u32 = 1 << 9;
pub(crate) const C4_GLBL_BRIDGE: u32 = 1 << 10;
pub(crate) const EQ_GLBL_IND_CTXT_CMD: u32 = 0x3f << 9;
pub(crate) const EQ_GLBL_BRIDGE: u32 = 1 << 15;
pub(crate) const EQ_GLBL_H2C_ST: u32 = 1 << 16;
pub(crate) const EQ_GLBL_FABRIC: u32 = 1 << 17;

// GLBL_DSC_ERR_STS / _MSK. Soft 3.x (and CPM4) from bit 0; EQDMA and CPM5 moved the low bits up.
pub(crate) const S3_DSC_POISON: u32 = 1 << 0;
pub(crate) const S3_DSC_UR_CA: u32 = 1 << 1;
pub(crate) const S3_DSC_PARAM: u32 = 1 << 2;
pub(crate) const S3_DSC_ADDR: u32 = 1 << 3;
pub(crate) const S3_DSC_TAG: u32 = 1 << 4;
pub(crate) const S3_DSC_FLR: u32 = 1 << 5;
pub(crate) const S3_DSC_ALL: u32 = 0x01f9_023f;
pub(crate) const EQ_DSC_POISON: u32 = 1 << 1;
pub(crate) const EQ_DSC_UR_CA: u32 = 1 << 2;
pub(crate) const EQ_DSC_BCNT: u32 = 1 << 3;
pub(crate) const EQ_DSC_PARAM: u32 = 1 << 4;
pub(crate) const EQ_DSC_ADDR: u32 = 1 << 5;
pub(crate) const EQ_DSC_TAG: u32 = 1 << 6;
pub(crate) const EQ_DSC_FLR: u32 = 1 << 8;
pub(crate) const EQ_DSC_PORT_ID: u32 = 1 << 25;
pub(crate) const EQ_DSC_ALL: u32 = 0x01f9_037e;
pub(crate) const DSC_TIMEOUT: u32 = 1 << 9;
pub(crate) const DSC_DAT_POISON: u32 = 1 << 16;
pub(crate) const DSC_FLR_CANCEL: u32 = 1 << 19;
/// "DMA engine error": on soft 3.x the vendor's only report of a failed MM data transfer.
pub(crate) const DSC_DMA: u32 = 1 << 20;
pub(crate) const DSC_DSC: u32 = 1 << 21;
pub(crate) const DSC_RQ_CANCEL: u32 = 1 << 22;
pub(crate) const DSC_DBE: u32 = 1 << 23;
pub(crate) const DSC_SBE: u32 = 1 << 24;

// GLBL_DSC_ERR_LOG0 / LOG1: no field layout for soft 3.x (read as raw words there).
pub(crate) const C4_LOG0_VALID: u32 = 1 << 31;
pub(crate) const C4_LOG0_QID_SHIFT: u32 = 17;
pub(crate) const C4_LOG0_QID: u32 = 0xfff;
pub(crate) const C4_LOG0_SEL: u32 = 1 << 16;
pub(crate) const C4_LOG0_CIDX: u32 = 0xffff;
pub(crate) const EQ_LOG0_VALID: u32 = 1 << 31;
pub(crate) const EQ_LOG0_SEL: u32 = 1 << 30;
pub(crate) const EQ_LOG0_QID: u32 = 0x1fff;
pub(crate) const EQ_LOG1_CIDX_SHIFT: u32 = 12;
pub(crate) const EQ_LOG1_CIDX: u32 = 0xffff;
pub(crate) const LOG1_SUB_TYPE_SHIFT: u32 = 5;
pub(crate) const LOG1_SUB_TYPE: u32 = 0xf;
pub(crate) const LOG1_ERR_TYPE: u32 = 0x1f;

// GLBL_TRQ_ERR_STS / _MSK / _LOG: register-access errors (a doorbell outside the FMAP).
pub(crate) const S3_TRQ_UNMAPPED: u32 = 1 << 0;
pub(crate) const S3_TRQ_QID_RANGE: u32 = 1 << 1;
pub(crate) const S3_TRQ_VF_ACCESS: u32 = 1 << 2;
pub(crate) const S3_TRQ_TIMEOUT: u32 = 1 << 3;
pub(crate) const S3_TRQ_ALL: u32 = 0xf;
pub(crate) const EQ_TRQ_CSR_UNMAPPED: u32 = 1 << 0;
pub(crate) const EQ_TRQ_VF_ACCESS: u32 = 1 << 1;
pub(crate) const EQ_TRQ_CSR_TIMEOUT: u32 = 1 << 3;
pub(crate) const EQ_TRQ_QSPC_UNMAPPED: u32 = 1 << 4;
pub(crate) const EQ_TRQ_QID_RANGE: u32 = 1 << 5;
pub(crate) const EQ_TRQ_QSPC_TIMEOUT: u32 = 1 << 7;
pub(crate) const EQ_TRQ_ALL: u32 = 0xb3;
pub(crate) const C4_TRQ_LOG_FUNC_SHIFT: u32 = 16;
pub(crate) const C4_TRQ_LOG_FUNC: u32 = 0xff;
pub(crate) const C4_TRQ_LOG_ADDR: u32 = 0xffff;
pub(crate) const EQ_TRQ_LOG_FUNC_SHIFT: u32 = 17;
pub(crate) const EQ_TRQ_LOG_FUNC: u32 = 0x3ff;
pub(crate) const EQ_TRQ_LOG_ADDR: u32 = 0x1ffff;

// Indirect context access (QDMA_TRQ_SEL_IND 0x800).
pub(crate) const R_IND_DATA: u64 = 0x804;
pub(crate) const R_IND_MASK: u64 = 0x824;
pub(crate) const R_IND_CMD: u64 = 0x844;
pub(crate) const IND_WORDS: u64 = 8;
pub(crate) const IND_CMD_BUSY: u32 = 1 << 0;
pub(crate) const IND_CMD_SEL_SHIFT: u32 = 1;
pub(crate) const IND_CMD_OP_SHIFT: u32 = 5;
pub(crate) const IND_CMD_QID_SHIFT: u32 = 7;
/// The command's queue id field: 12 bits (`union qdma_ind_ctxt_cmd`), 13 on EQDMA and CPM5.
pub(crate) const IND_QID_BITS: u32 = 12;
pub(crate) const EQ_IND_QID_BITS: u32 = 13;
pub(crate) const OP_CLR: u32 = 0;
pub(crate) const OP_WR: u32 = 1;
pub(crate) const OP_RD: u32 = 2;
pub(crate) const OP_INV: u32 = 3;
pub(crate) const SEL_SW_C2H: u32 = 0;
pub(crate) const SEL_SW_H2C: u32 = 1;
pub(crate) const SEL_HW_C2H: u32 = 2;
pub(crate) const SEL_HW_H2C: u32 = 3;
pub(crate) const SEL_CR_C2H: u32 = 4;
pub(crate) const SEL_CR_H2C: u32 = 5;
pub(crate) const SEL_FMAP: u32 = 12;
/// The vendor polls busy every 10 µs for up to 500 ms (`QDMA_REG_POLL_DFLT_*`).
pub(crate) const IND_POLL_INTERVAL: Duration = Duration::from_micros(10);
pub(crate) const IND_BUSY_TIMEOUT: Duration = Duration::from_millis(500);
/// How long stopping a queue waits for its descriptors in flight (`q_stop_wait` in
/// `qdma_queue_stop`, up to `QDMA_Q_PEND_LIST_COMPLETION_TIMEOUT`).
pub(crate) const DRAIN_TIMEOUT: Duration = Duration::from_millis(1000);

// FMAP context (select 12): first queue in word 0, queue count in word 1.
pub(crate) const FMAP_QBASE: u32 = 0x7ff;
pub(crate) const FMAP_QMAX: u32 = 0xfff;
pub(crate) const C5_FMAP_QBASE: u32 = 0xfff;
pub(crate) const C5_FMAP_QMAX: u32 = 0x1fff;

// CPM4 puts these elsewhere; named only to say why a CPM4 is refused.
pub(crate) const C4_R_FMAP: u64 = 0x400;
pub(crate) const C4_R_IND_CMD: u64 = 0x824;
pub(crate) const C4_R_DOORBELLS: u64 = 0x6400;

// Software context (`QDMA_SW_CTXT_W*`, EQDMA `SW_IND_CTXT_DATA_W*`).
pub(crate) const SW_W0_PIDX: u32 = 0xffff;
pub(crate) const SW_W0_IRQ_ARM: u32 = 1 << 16;
pub(crate) const SW_W0_FUNC_SHIFT: u32 = 17;
/// [24:17] on soft 3.x, [28:17] on EQDMA/CPM5: a PF's function number fits both.
pub(crate) const SW_W0_FUNC: u32 = 0xff;
pub(crate) const SW_W1_QEN: u32 = 1 << 0;
pub(crate) const SW_W1_FCRD_EN: u32 = 1 << 1;
pub(crate) const SW_W1_WBI_CHK: u32 = 1 << 2;
pub(crate) const SW_W1_WBI_INTVL: u32 = 1 << 3;
pub(crate) const SW_W1_FETCH_MAX_SHIFT: u32 = 5;
/// [7:5] on soft 3.x, [8:5] on EQDMA/CPM5; the vendor writes 7 (`FETCH_MAX_NUM`) on all.
pub(crate) const SW_W1_FETCH_MAX: u32 = 0x7;
pub(crate) const FETCH_MAX_NUM: u8 = 7;
pub(crate) const SW_W1_RNG_SZ_SHIFT: u32 = 12;
pub(crate) const SW_W1_RNG_SZ: u32 = 0xf;
pub(crate) const SW_W1_DSC_SZ_SHIFT: u32 = 16;
pub(crate) const SW_W1_DSC_SZ: u32 = 0x3;
pub(crate) const DESC_SZ_32B: u8 = 2;
pub(crate) const SW_W1_BYPASS: u32 = 1 << 18;
pub(crate) const SW_W1_MM_CHN: u32 = 1 << 19;
pub(crate) const SW_W1_WBK_EN: u32 = 1 << 20;
pub(crate) const SW_W1_IRQ_EN: u32 = 1 << 21;
pub(crate) const SW_W1_ERR_SHIFT: u32 = 26;
pub(crate) const SW_W1_ERR: u32 = 0x3;
pub(crate) const SW_W1_ERR_WB_SENT: u32 = 1 << 28;
pub(crate) const SW_W1_MRKR_DIS: u32 = 1 << 30;
pub(crate) const SW_W1_IS_MM: u32 = 1 << 31;
/// Word 4: the queue's interrupt vector [10:0] (direct mode: an MSI-X vector of the function)
/// and interrupt aggregation [11] (`QDMA_SW_CTXT_W4_VEC_MASK`, `QDMA_SW_CTXT_W4_INTR_AGGR_MASK`).
pub(crate) const SW_W4_VEC: u32 = 0x7ff;
pub(crate) const SW_W4_INTR_AGGR: u32 = 1 << 11;

// Interrupt (aggregation) context, select 8 (`QDMA_CTXT_SEL_INT_COAL`; soft 3.x
// `QDMA_INTR_CTXT_W*`, three words; EQDMA/CPM5 `INTR_CTXT_DATA_W*`, four, the function in word 3).
// The ring base is 4 KiB aligned: address bits [28:12] in word 0 [31:15], [60:29] in word 1,
// [63:61] in word 2 [2:0] (`QDMA_INTR_CTXT_BADDR_GET_*_MASK`).
pub(crate) const SEL_INT_COAL: u32 = 8;
pub(crate) const IC_W0_VALID: u32 = 1 << 0;
pub(crate) const IC_W0_VEC_SHIFT: u32 = 1;
pub(crate) const IC_W0_VEC: u32 = 0x7ff;
pub(crate) const IC_W0_INT_ST: u32 = 1 << 13;
pub(crate) const IC_W0_COLOR: u32 = 1 << 14;
pub(crate) const IC_W0_BADDR_SHIFT: u32 = 15;
pub(crate) const IC_BADDR_LOW_BIT: u32 = 12;
pub(crate) const IC_BADDR_MID_BIT: u32 = 29;
pub(crate) const IC_BADDR_HIGH_BIT: u32 = 61;
pub(crate) const IC_W2_BADDR_H: u32 = 0x7;
pub(crate) const IC_W2_PAGE_SIZE_SHIFT: u32 = 3;
pub(crate) const IC_W2_PAGE_SIZE: u32 = 0x7;
pub(crate) const IC_W2_PIDX_SHIFT: u32 = 6;
pub(crate) const IC_W2_PIDX: u32 = 0xfff;
pub(crate) const EQ_IC_W3_FUNC_SHIFT: u32 = 18;
pub(crate) const EQ_IC_W3_FUNC: u32 = 0xfff;
/// An interrupt ring entry: 8 bytes (`union qdma_intr_ring`, `qdma_intr_ring_generic`), 512 to
/// a 4 KiB page; libqdma's ring is one page (`QDMA_INTR_COAL_RING_SIZE`, page size code 0).
pub(crate) const IE_BYTES: u64 = 8;
pub(crate) const IE_PER_PAGE: u32 = 512;
/// Entry fields: queue [62:39] (absolute), type [38] (0 H2C, 1 C2H), the ring's colour [63].
pub(crate) const IE_QID_SHIFT: u32 = 39;
pub(crate) const IE_QID: u64 = 0xff_ffff;
pub(crate) const IE_TYPE_C2H: u64 = 1 << 38;
pub(crate) const IE_COLOR: u64 = 1 << 63;
// The error interrupt (`QDMA_OFFSET_GLBL_ERR_INT` 0xB04): function [7:0] on soft 3.x ([11:0]
// on EQDMA/CPM5), vector [22:12], arm [24] (`QDMA_GLBL_ERR_*_MASK`, `GLBL_ERR_INT_*_MASK`).
// EQDMA's en_coal [23] would route it through an interrupt ring; libqdma never sets it.
pub(crate) const R_GLBL_ERR_INT: u64 = 0xb04;
pub(crate) const ERR_INT_FUNC: u32 = 0xff;
pub(crate) const ERR_INT_VEC_SHIFT: u32 = 12;
pub(crate) const ERR_INT_VEC: u32 = 0x7ff;
pub(crate) const ERR_INT_ARM: u32 = 1 << 24;

// Hardware context (`QDMA_HW_CTXT_W*`).
pub(crate) const HW_W0_CIDX: u32 = 0xffff;
pub(crate) const HW_W0_CRD_USE_SHIFT: u32 = 16;
pub(crate) const HW_W1_DSC_PND: u32 = 1 << 8;
/// "Queue invalid, no descriptor pending": nothing of this queue is in flight.
pub(crate) const HW_W1_IDL_STP_B: u32 = 1 << 9;
pub(crate) const HW_W1_EVT_PND: u32 = 1 << 10;
pub(crate) const HW_W1_FETCH_PND_SHIFT: u32 = 11;
pub(crate) const HW_W1_FETCH_PND: u32 = 0xf;

// MM descriptor (`struct qdma_mm_desc`) and the status writeback (`struct qdma_desc_cmpl_status`).
pub(crate) const DESC_BYTES: u64 = 32;
pub(crate) const DESC_LEN: u64 = 0x0fff_ffff;
pub(crate) const DESC_DV: u64 = 1 << 28;
pub(crate) const DESC_SOP: u64 = 1 << 29;
pub(crate) const DESC_EOP: u64 = 1 << 30;
/// Longest descriptor: the 28-bit length (`QDMA_DESC_BLEN_MAX`) rounded down to 4 KiB.
pub(crate) const MAX_DESC_LEN: u64 = 0x0fff_f000;
/// EQDMA 5.0 moves less per descriptor (`SOFT_EQDMA_DESC_BLEN_MAX`).
pub(crate) const EQ5_MAX_DESC_LEN: u64 = 1 << 15;
pub(crate) const STATUS_CIDX_SHIFT: u32 = 16;

// PF queue doorbells (QDMA_TRQ_SEL_QUEUE_PF 0x18000), per function-relative queue.
pub(crate) const R_PF_DOORBELLS: u64 = 0x18000;
pub(crate) const DB_STEP: u64 = 0x10;
pub(crate) const DB_H2C_PIDX: u64 = 0x4;
pub(crate) const DB_C2H_PIDX: u64 = 0x8;
pub(crate) const DB_PIDX: u32 = 0xffff;
/// The PIDX update's interrupt arm [16] (`QDMA_DMA_SEL_IRQ_EN_MASK`): the queue may raise its
/// interrupt at the next status writeback (libqdma re-arms with every update in interrupt mode).
pub(crate) const DB_IRQ_ARM: u32 = 1 << 16;
/// The interrupt ring's consumer index update (`QDMA_OFFSET_DMAP_SEL_INT_CIDX`, +0x0 of a queue's
/// doorbells): the software CIDX [15:0] and the ring index [23:16] (`QDMA_DMA_SEL_INT_SW_CIDX_MASK`,
/// `QDMA_DMA_SEL_INT_RING_IDX_MASK`); libqdma writes it at the last queue it serviced.
pub(crate) const DB_INT_CIDX: u64 = 0x0;
pub(crate) const INT_CIDX_SW: u32 = 0xffff;
pub(crate) const INT_CIDX_RING_SHIFT: u32 = 16;
pub(crate) const INT_CIDX_RING: u32 = 0xff;
/// The smallest config BAR that reaches the first queue's doorbells.
pub const MIN_CONFIG_BAR_LEN: u64 = R_PF_DOORBELLS + DB_STEP;

// MM engine, channel 0 (QDMA_TRQ_SEL_C2H_MM 0x1000, QDMA_TRQ_SEL_H2C_MM 0x1200).
pub(crate) const MM_C2H_BASE: u64 = 0x1000;
pub(crate) const MM_H2C_BASE: u64 = 0x1200;
pub(crate) const MM_CONTROL: u64 = 0x04;
pub(crate) const MM_RUN: u32 = 1 << 0;
pub(crate) const MM_STATUS: u64 = 0x40;
pub(crate) const MM_COMPLETED: u64 = 0x48;
pub(crate) const MM_ERR_ENABLE: u64 = 0x54;
pub(crate) const MM_ERR_CODE: u64 = 0x58;
pub(crate) const MM_ERR_INFO: u64 = 0x5c;
pub(crate) const MM_PERF_CTL: u64 = 0xc0;
pub(crate) const PERF_IMM_CLEAR: u32 = 1 << 1;
pub(crate) const PERF_IMM_START: u32 = 1 << 3;
pub(crate) const MM_PERF_CYCLES: u64 = 0xc4;
pub(crate) const MM_PERF_DATA: u64 = 0xcc;
/// The counters' high words hold 10 bits.
pub(crate) const PERF_HIGH: u32 = 0x3ff;
// MM ERR_CODE / ERR_INFO: soft 3.x names the registers but none of their fields.
pub(crate) const MM_CODE: u32 = 0x1f;
pub(crate) const C4_MM_CODE_VALID: u32 = 1 << 17;
pub(crate) const C4_MM_CODE_RDWR: u32 = 1 << 16;
pub(crate) const C4_MM_INFO_QID_SHIFT: u32 = 17;
pub(crate) const C4_MM_INFO_QID: u32 = 0xfff;
pub(crate) const C4_MM_INFO_CIDX: u32 = 0xffff;
pub(crate) const EQ_MM_CODE_CIDX_SHIFT: u32 = 12;
pub(crate) const EQ_MM_CODE_CIDX: u32 = 0xffff;
pub(crate) const EQ_MM_INFO_VALID: u32 = 1 << 31;
pub(crate) const EQ_MM_INFO_QID: u32 = 0xff_ffff;
// MM error codes: the bit numbers of `*_MM_ERR_CODE_ENABLE_*_MASK`.
pub(crate) const MM_H2C_RD_HDR_POISON: u32 = 1;
pub(crate) const MM_H2C_RD_UR_CA: u32 = 2;
pub(crate) const MM_H2C_RD_HDR_BYTE: u32 = 3;
pub(crate) const MM_H2C_RD_HDR_PARAM: u32 = 4;
pub(crate) const MM_H2C_RD_HDR_ADR: u32 = 5;
pub(crate) const MM_H2C_RD_FLR: u32 = 8;
pub(crate) const MM_H2C_RD_DAT_POISON: u32 = 16;
pub(crate) const MM_H2C_RD_RQ_DIS: u32 = 22;
pub(crate) const MM_H2C_WR_DEC: u32 = 28;
pub(crate) const MM_H2C_WR_SLV: u32 = 29;
pub(crate) const MM_C2H_WR_SLV: u32 = 0;
pub(crate) const MM_C2H_RD_SLV: u32 = 1;
pub(crate) const MM_C2H_WR_FLR: u32 = 28;
pub(crate) const MM_C2H_WR_UR: u32 = 29;
pub(crate) const MM_C2H_WR_UC_RAM: u32 = 30;
pub(crate) const EQ_MM_H2C_ALL: u32 = 0x3041_013e;
pub(crate) const EQ_MM_C2H_ALL: u32 = 0x7000_0003;

// Stream (ST) queues: `st.rs`, `st_ctx.rs`, `st_run.rs`. Context selects of `enum
// ind_ctxt_cmd_sel` (qdma_access_common.h) beyond the MM ones.
pub(crate) const SEL_CMPT: u32 = 6;
pub(crate) const SEL_PFTCH: u32 = 7;
// C2H ST global tables (QDMA_TRQ_SEL_C2H 0xa00), written by every IP's
// `*_set_default_global_csr` when the IP has ST (`dev_cap.st_en`), the same values on all.
pub(crate) const R_C2H_TIMER_CNT: u64 = 0xa00;
pub(crate) const R_C2H_CNT_TH: u64 = 0xa40;
pub(crate) const R_C2H_BUF_SZ: u64 = 0xab0;
pub(crate) const C2H_TABLE_LEN: usize = 16;
pub const VENDOR_C2H_BUF_SIZES: [u32; C2H_TABLE_LEN] =
    [4096, 256, 512, 1024, 2048, 3968, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 8192, 9018, 16384];
pub(crate) const VENDOR_C2H_TIMERS: [u32; C2H_TABLE_LEN] =
    [1, 2, 4, 5, 8, 10, 15, 20, 25, 30, 50, 75, 100, 125, 150, 200];
pub(crate) const VENDOR_C2H_COUNTERS: [u32; C2H_TABLE_LEN] =
    [2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192];
// C2H_ERR_STAT / C2H_ERR_MASK (0xaf0 / 0xaf4): the completion-ring errors pcibench names.
pub(crate) const R_C2H_ERR_STAT: u64 = 0xaf0;
pub(crate) const R_C2H_ERR_MASK: u64 = 0xaf4;
pub(crate) const C2H_ERR_CMPT_INV_Q: u32 = 1 << 12;
pub(crate) const C2H_ERR_CMPT_QFULL: u32 = 1 << 13;
pub(crate) const C2H_ERR_CMPT_CIDX: u32 = 1 << 14;
// Software context codes for ST queues (`make_sw_context`): C2H ST 8-byte, H2C ST 16-byte
// descriptors, fetch credits on.
pub(crate) const DESC_SZ_8B: u8 = 0;
pub(crate) const DESC_SZ_16B: u8 = 1;
// Prefetch context (select 7, `QDMA_PFTCH_CTXT_W*`, EQDMA `PREFETCH_CTXT_DATA_W*`: the same
// positions for the fields pcibench writes).
pub(crate) const PF_W0_BYPASS: u32 = 1 << 0;
pub(crate) const PF_W0_BUF_SZ_SHIFT: u32 = 1;
pub(crate) const PF_W0_BUF_SZ: u32 = 0xf;
pub(crate) const PF_W0_ERR: u32 = 1 << 26;
pub(crate) const PF_W0_PFCH_EN: u32 = 1 << 27;
pub(crate) const PF_W1_VALID: u32 = 1 << 13;
// Completion (CMPT) context (select 6, `QDMA_COMPL_CTXT_W*`, EQDMA/CPM5 `CMPL_CTXT_DATA_W*`).
pub(crate) const CM_W0_EN_STAT_DESC: u32 = 1 << 0;
pub(crate) const CM_W0_EN_INT: u32 = 1 << 1;
pub(crate) const CM_W0_TRIG_SHIFT: u32 = 2;
pub(crate) const CM_W0_TRIG: u32 = 0x7;
pub(crate) const CM_W0_FNC_SHIFT: u32 = 5;
/// [12:5] on soft 3.x, [16:5] on EQDMA/CPM5: a PF's function number fits both.
pub(crate) const CM_W0_FNC: u32 = 0xff;
pub(crate) const CM_W0_CNT_IDX_SHIFT: u32 = 17;
pub(crate) const CM_W0_TMR_IDX_SHIFT: u32 = 21;
pub(crate) const CM_W0_IDX: u32 = 0xf;
pub(crate) const CM_W0_COLOR: u32 = 1 << 27;
pub(crate) const CM_W0_RNG_SZ_SHIFT: u32 = 28;
/// Soft 3.x: word 1 [31:6] holds address bits [37:12] (`QDMA_COMPL_CTXT_BADDR_GET_L_MASK`), so
/// the ring must be 4 KiB aligned; EQDMA/CPM5: word 1 [31:0] holds bits [37:6] and word 5
/// [17:14] bits [5:2] (`EQDMA_COMPL_CTXT_BADDR_HIGH_L_MASK`, `_LOW_MASK`).
pub(crate) const S3_CM_W1_BADDR_SHIFT: u32 = 6;
pub(crate) const S3_CM_BADDR_LOW_BIT: u32 = 12;
pub(crate) const EQ_CM_BADDR_LOW_BIT: u32 = 6;
pub(crate) const CM_W2_BADDR_H: u32 = 0x03ff_ffff;
pub(crate) const CM_BADDR_HIGH_BIT: u32 = 38;
pub(crate) const CM_W2_DESC_SZ_SHIFT: u32 = 26;
pub(crate) const CM_W3_CIDX_SHIFT: u32 = 12;
pub(crate) const CM_W3_VALID: u32 = 1 << 28;
pub(crate) const CM_W3_ERR_SHIFT: u32 = 29;
pub(crate) const CM_W4_OVF_CHK_DIS: u32 = 1 << 2;
pub(crate) const EQ_CM_W4_DIR_C2H: u32 = 1 << 18;
/// Word 4: the queue's interrupt vector [14:4], or its interrupt ring's index with aggregation
/// [15] (`QDMA_COMPL_CTXT_W4_INTR_VEC_MASK`, `_INTR_AGGR_MASK`; EQDMA/CPM5 `CMPL_CTXT_DATA_W4_*`:
/// the same bits on every IP).
pub(crate) const CM_W4_VEC_SHIFT: u32 = 4;
pub(crate) const CM_W4_VEC: u32 = 0x7ff;
pub(crate) const CM_W4_INT_AGGR: u32 = 1 << 15;
pub(crate) const EQ_CM_W5_BADDR_LOW_SHIFT: u32 = 14;
/// Trigger mode "every entry" (`TRIG_MODE_ANY`): the qdma driver's default (nl.c).
pub(crate) const TRIG_EVERY: u32 = 1;
/// Trigger modes beside it (`enum tigger_mode_t`; PG302 `QDMA_DMAP_SEL_CMPT_CIDX` [26:24]):
/// User (3), User_Timer (4), Timer_Count (5, libqdma's `TRIG_MODE_COMBO`). User_Count (2) and
/// Disabled (0) pcibench does not set (`trigger.rs` says why).
pub(crate) const TRIG_USER: u32 = 3;
pub(crate) const TRIG_USER_TIMER: u32 = 4;
pub(crate) const TRIG_TIMER_COUNT: u32 = 5;
/// C2H_INT_TIMER_TICK (0xb0c): DMA clock cycles per completion-timer tick, which every IP's
/// `*_set_default_global_csr` writes with ST (soft 3.x and EQDMA `DEFAULT_C2H_INTR_TIMER_TICK`
/// 25; CPM5 `EQDMA_CPM5_DEFAULT_C2H_INTR_TIMER_TICK` 50, in `eqdma_cpm5_set_perf_opt`).
pub(crate) const R_C2H_INT_TIMER_TICK: u64 = 0xb0c;
pub(crate) const VENDOR_C2H_TIMER_TICK: u32 = 25;
pub(crate) const CPM5_C2H_TIMER_TICK: u32 = 50;
/// The completion ring's status descriptor (after the last entry, `struct
/// qdma_c2h_cmpt_cmpl_status`): the producer index the trigger last reported, [15:0].
pub(crate) const CMPT_STS_PIDX: u32 = 0xffff;
/// CMPT entry sizes: code 0-3 is 8, 16, 32, 64 bytes; dma-ctl's default is 8 B.
pub(crate) const CMPT_SZ_8B: u32 = 0;
// H2C ST descriptor (16 bytes, PG302; `struct qdma_h2c_desc`): metadata (cdh_flags, pld_len),
// len, reserved (16 bits each), then the source address; C2H ST descriptor (8 bytes, `struct
// qdma_c2h_desc`): the buffer address only.
pub(crate) const H2C_ST_DESC_BYTES: u64 = 16;
pub(crate) const C2H_ST_DESC_BYTES: u64 = 8;
/// Longest H2C ST packet, one descriptor's `len` [47:32] (PG302 "H2C Stream Descriptor (16B)":
/// 64K-1 bytes in internal mode, where a packet cannot span descriptors).
pub(crate) const H2C_ST_MAX_PACKET: u64 = 0xffff;
// Completion entry, example-design format 0 (qdma_regs.h `S_C2H_CMPT_ENTRY_*`): format bit 0,
// colour 1, error 2, descriptor used 3, packet length [19:4].
pub(crate) const CMPT_COLOR: u32 = 1 << 1;
pub(crate) const CMPT_ERR: u32 = 1 << 2;
pub(crate) const CMPT_DESC_USED: u32 = 1 << 3;
pub(crate) const CMPT_LEN_SHIFT: u32 = 4;
pub(crate) const CMPT_LEN: u32 = 0xffff;
// PF doorbells beyond the producer indexes (`QDMA_OFFSET_DMAP_SEL_CMPT_CIDX`, `_MASK`s).
pub(crate) const DB_CMPT_CIDX: u64 = 0xc;
pub(crate) const DB_CMPT_STAT_EN: u32 = 1 << 27;
/// The CMPT CIDX update's interrupt enable [28] (`QDMA_DMAP_SEL_CMPT_IRQ_EN_MASK`): arms the
/// completion ring's interrupt again (libqdma sets it in interrupt mode).
pub(crate) const DB_CMPT_IRQ_EN: u32 = 1 << 28;
pub(crate) const DB_CMPT_TRIG_SHIFT: u32 = 24;
pub(crate) const DB_CMPT_TMR_SHIFT: u32 = 20;
pub(crate) const DB_CMPT_CNT_SHIFT: u32 = 16;
// The vendor's example design's user BAR (the DPDK testapp's testapp.h, scripts/
// qdma_run_test_pf.sh): C2H generator queue, packet length, control (bit 1 starts), packet
// count; H2C checker control (bit 0 clears) and status (bit 0: every packet matched).
pub(crate) const EX_C2H_QID: u64 = 0x00;
/// C2H_COMPLETION_SIZE (0x50): bit 3 drives `s_axis_c2h_cmpt_ctrl_user_trig` on every
/// completion the generator sends while set (the example design's axi_st_module.sv), [1:0] the
/// entry size (0: 8 bytes, as the completion context says).
pub(crate) const EX_C2H_CMPT_SIZE: u64 = 0x50;
pub(crate) const EX_CMPT_USER_TRIG: u32 = 1 << 3;
pub(crate) const EX_C2H_LEN: u64 = 0x04;
pub(crate) const EX_C2H_CONTROL: u64 = 0x08;
pub(crate) const EX_C2H_START: u32 = 1 << 1;
pub(crate) const EX_H2C_CONTROL: u64 = 0x0c;
pub(crate) const EX_H2C_CLEAR: u32 = 1 << 0;
pub(crate) const EX_H2C_STATUS: u64 = 0x10;
pub(crate) const EX_H2C_MATCH: u32 = 1 << 0;
pub(crate) const EX_C2H_COUNT: u64 = 0x20;
/// One completion covers at most 7 buffers in the example design (DPDK testapp, do_recv_st).
pub(crate) const EX_MAX_BUFFERS: u64 = 7;

/// The MM engine block of `dir`: C2H at 0x1000, H2C at 0x1200.
pub(crate) fn mm(dir: Direction, reg: u64) -> u64 {
    match dir {
        Direction::H2c => MM_H2C_BASE + reg,
        Direction::C2h => MM_C2H_BASE + reg,
    }
}

pub(crate) fn rd(bar: &dyn BarRegion, off: u64) -> Result<u32> {
    Ok(bar.read(off, Width::B32)? as u32)
}

pub(crate) fn wr(bar: &dyn BarRegion, off: u64, v: u32) -> Result<()> {
    bar.write(off, Width::B32, v as u64)
}
