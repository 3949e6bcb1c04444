/*
 * pcibench_model.h: the C ABI between `pcibench serve --model PATH.so[:ARGS]` and a device model
 * (C, C++, SystemC, a Verilator build of RTL). The model exports the functions below; pcibench
 * owns what vfio-pci would own (config space, the MSI and MSI-X capabilities, the MSI-X table and
 * PBA, interrupt routing and masking, the client's DMA mappings, reset) and serves the model over
 * vfio-user. docs/models.md says how to wrap a model and what pcibench does for it.
 *
 * Threads: pcibench calls every function of the model from one thread, the model thread, one call
 * at a time (SystemC's kernel and most RTL simulators need that). The model calls back into
 * pcibench only from inside one of those calls, or from a thread of its own that it first
 * declared with `host->thread_declare`. Nothing here needs a lock on the model's side.
 *
 * Versioning: PCIBENCH_MODEL_ABI_VERSION changes whenever any struct or signature here changes
 * meaning; pcibench refuses a model built against another version, with one line saying both.
 */
#ifndef PCIBENCH_MODEL_H
#define PCIBENCH_MODEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCIBENCH_MODEL_ABI_VERSION 1u

/* What a BAR access or a callback returns. */
enum pcibench_status {
    PCIBENCH_OK = 0,
    /* A BAR access the model does not decode (an offset or a width it has no register for):
     * an Unsupported Request. The read completes all-ones, the write is dropped, as a root port
     * completes a request nothing claims. */
    PCIBENCH_UNSUPPORTED = 1,
    /* The model refuses the access (Completer Abort): the client's access fails (EIO). */
    PCIBENCH_ABORT = 2,
    /* Returned to the model by dma_read/dma_write: some of [iova, iova+len) is not in any mapping
     * the client made (DMA_MAP), or Bus Master is off. An IOMMU fault: nothing was copied, a read
     * gets all-ones, and pcibench counts and reports it. */
    PCIBENCH_FAULT = 3,
    /* Returned to the model by a callback it called wrongly (an impossible length, a NULL buffer,
     * a vector it does not have, a thread it did not declare). pcibench reports it, and stops
     * serving once the current call returns: the model is broken. */
    PCIBENCH_INVALID = 4,
};

/* BAR flags (PCI Local Bus 3.0 6.2.5.1). A 64-bit BAR takes the next BAR slot as its upper half,
 * which must then be empty. */
#define PCIBENCH_BAR_IO (1u << 0)       /* I/O space (else memory); at most 256 bytes */
#define PCIBENCH_BAR_64 (1u << 1)       /* a 64-bit memory BAR */
#define PCIBENCH_BAR_PREFETCH (1u << 2) /* prefetchable memory */

struct pcibench_bar {
    uint64_t size; /* 0: no BAR here; else a power of two, at least 16 (memory) or 4 (I/O) */
    uint32_t flags;
    uint32_t reserved; /* 0 */
};

/* What the model is, filled by pcibench_model_describe. pcibench zeroes it and sets struct_size
 * first; the model fills the fields. Pointers stay valid until pcibench_model_destroy. */
struct pcibench_device {
    uint32_t struct_size; /* set by pcibench: sizeof(struct pcibench_device) */
    uint16_t vendor_id, device_id;
    uint16_t subsystem_vendor_id, subsystem_id;
    uint32_t class_code; /* base class << 16 | subclass << 8 | programming interface */
    uint8_t revision;
    uint8_t intx;       /* 1: the function has INTA# (raised and lowered as a level) */
    uint8_t link_gen;   /* PCI Express link the capability reports: 1..6 (2.5..64 GT/s); */
    uint8_t link_width; /*   1..32 lanes; both 0: a conventional PCI function (no PCIe capability) */
    struct pcibench_bar bars[6];
    uint32_t msi_vectors;  /* 0 (no MSI capability), 1, 2, 4, 8, 16 or 32 */
    uint32_t msix_vectors; /* 0 (no MSI-X capability) .. 2048 */
    uint32_t msix_bar;     /* the memory BAR holding the MSI-X table and PBA (pcibench answers */
    uint32_t msix_table_offset; /* accesses to them; the model never sees them); 8-byte aligned */
    uint32_t msix_pba_offset;
    /* Capabilities of the model's own (vendor-specific, power management, ...): config_len raw
     * bytes placed at config space offset config_offset (0xb0 or above, DWORD-aligned, ending by
     * 0x100), a list linked by their next pointers (0 ends it); pcibench links its own
     * capabilities to the first. Read-only to the client. config_len 0: none. */
    const uint8_t *config;
    uint32_t config_offset;
    uint32_t config_len;
    const char *name; /* a short name for logs and `pcibench info` (NUL-terminated) */
};

/* What pcibench gives the model at create: its callbacks, all taking `ctx` first. */
struct pcibench_host {
    uint32_t abi_version; /* PCIBENCH_MODEL_ABI_VERSION of the pcibench calling */
    void *ctx;
    /* Bus-master DMA of `len` bytes at the client's `iova`, through its DMA_MAP table, as the
     * device's reads and writes of host memory: PCIBENCH_OK, PCIBENCH_FAULT or PCIBENCH_INVALID.
     * The copy is done when the call returns. */
    int (*dma_read)(void *ctx, uint64_t iova, void *buf, uint64_t len);
    int (*dma_write)(void *ctx, uint64_t iova, const void *buf, uint64_t len);
    /* Interrupt request `vector`: raise sends one message on it where the client enabled MSI-X
     * or MSI (held pending while the vector is masked), or asserts INTA# where INTx is in use, as
     * a level until lower; lower deasserts the level (a no-op for messages). */
    int (*raise_irq)(void *ctx, uint32_t vector);
    int (*lower_irq)(void *ctx, uint32_t vector);
    /* One line for pcibench's log (no newline needed). */
    void (*log)(void *ctx, const char *line);
    /* Called on a thread of the model's own before it calls back from there. */
    int (*thread_declare)(void *ctx);
};

/* --- Exported by the model (every one required unless marked optional) --- */

/* PCIBENCH_MODEL_ABI_VERSION as the model was built. */
uint32_t pcibench_model_abi_version(void);

/* A new instance. `args` is what followed the first ':' after PATH.so ("" if nothing); `host`
 * stays valid until destroy. On failure: NULL, with one line in `error` (NUL-terminated). */
void *pcibench_model_create(const char *args, const struct pcibench_host *host, char *error, size_t error_len);

/* Fill `dev`: PCIBENCH_OK, or anything else to refuse (the model says why through host->log). */
int pcibench_model_describe(void *model, struct pcibench_device *dev);

/* One access of `width` bytes (1, 2, 4 or 8; naturally aligned) at `offset` in BAR `bar`.
 * Values are little-endian in the low `width` bytes of the u64. */
int pcibench_model_bar_read(void *model, uint32_t bar, uint64_t offset, uint32_t width, uint64_t *value);
int pcibench_model_bar_write(void *model, uint32_t bar, uint64_t offset, uint32_t width, uint64_t value);

/* Function reset (the client's DEVICE_RESET): the model's registers to their reset values.
 * pcibench keeps the config space and interrupt routing, as vfio-pci restores them. */
void pcibench_model_reset(void *model);

/* Free the instance. No callback may be made from now on. */
void pcibench_model_destroy(void *model);

/* Optional, for timed models: `ns` nanoseconds of pcibench's monotonic clock have passed since the
 * last advance. pcibench calls it before every BAR access and whenever the time the model asked
 * for has passed. Returns how long the model may wait for the next advance: 0 as soon as possible
 * (busy: a simulator running as fast as it can), PCIBENCH_IDLE not until the next access. */
#define PCIBENCH_IDLE UINT64_MAX
uint64_t pcibench_model_advance(void *model, uint64_t ns);

#ifdef __cplusplus
}
#endif

#endif /* PCIBENCH_MODEL_H */
