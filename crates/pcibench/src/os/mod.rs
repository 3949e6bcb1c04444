//! Operating-system primitives with no knowledge of PCI: memory mappings and volatile access,
//! page size, the SIGBUS handler of the MMIO fault guard, locked-memory limits, the physical
//! addresses of pages, address-space bookkeeping,
//! privilege (running with more than the caller: what to refuse, when to drop capabilities) and
//! replacing a file atomically.
//! Everything above (access paths, DMA buffers, the sim card) builds on these.

pub mod cpu;
pub mod fault;
pub mod memlock;
pub mod mmap;
pub mod numa;
pub mod pagemap;
pub mod privilege;
pub mod space;
