/*
 * QEMU's educational PCI device, edu (1234:11e8), as a pcibench model, written from its documented
 * register map (QEMU docs/specs/edu.rst): identification, liveness, factorial, interrupt raise and
 * acknowledge, and a DMA engine between host memory and a 4 KiB buffer at device address 0x40000,
 * signalling INTx or MSI (one vector). Served by `pcibench serve --model edu.so[:ARGS]`, it is
 * driven by pcibench's edu engine as QEMU's own edu is in the lab.
 *
 * ARGS, comma-separated:
 *   dma_bits=N   the DMA address mask's width (the spec's dma_mask; 28 bits by default)
 *   dma_ns=N     how long a DMA takes, in pcibench's time (default 10000; QEMU's takes 100 ms)
 *   fact_ns=N    how long a factorial takes (default 1000)
 *   bug=iova     (a test) DMA 1 MiB past the address programmed: outside the client's mappings
 *
 * Time comes from pcibench_model_advance: a started DMA completes when dma_ns have passed.
 */
#include "pcibench_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EDU_ID 0x010000edu
#define BUF_ADDR 0x40000u
#define BUF_SIZE 4096u
#define STATUS_COMPUTING 0x01u
#define STATUS_IRQ_FACT 0x80u
#define CMD_START 0x1u
#define CMD_TO_RAM 0x2u
#define CMD_IRQ 0x4u
#define IRQ_FACT 0x001u
#define IRQ_DMA 0x100u

struct edu {
    const struct pcibench_host *host;
    uint64_t dma_mask, dma_ns, fact_ns, bug_offset;
    uint32_t liveness, fact, status, irq_status;
    uint64_t src, dst, count, cmd;
    uint64_t dma_left, fact_left; /* ns until the running DMA / factorial completes */
    uint8_t buf[BUF_SIZE];
};

static void say(struct edu *e, const char *fmt, unsigned long long a, unsigned long long b)
{
    char line[200];
    snprintf(line, sizeof line, fmt, a, b);
    e->host->log(e->host->ctx, line);
}

/* The spec: the value written to 0x60 is ORed into the interrupt status and raises the
 * interrupt; pcibench sends it as MSI or asserts INTx, as the client enabled. */
static void raise_irq(struct edu *e, uint32_t val)
{
    e->irq_status |= val;
    if (e->irq_status)
        e->host->raise_irq(e->host->ctx, 0);
}

static void lower_irq(struct edu *e, uint32_t val)
{
    e->irq_status &= ~val;
    if (!e->irq_status)
        e->host->lower_irq(e->host->ctx, 0);
}

static void dma_done(struct edu *e)
{
    uint64_t card = (e->cmd & CMD_TO_RAM) ? e->src : e->dst;
    uint64_t host = ((e->cmd & CMD_TO_RAM) ? e->dst : e->src) & e->dma_mask;
    if (card < BUF_ADDR || e->count > BUF_SIZE || card - BUF_ADDR > BUF_SIZE - e->count) {
        say(e, "edu: DMA of %llu bytes at device address %#llx is outside the 4 KiB buffer: not done",
            (unsigned long long)e->count, (unsigned long long)card);
    } else {
        uint8_t *at = e->buf + (card - BUF_ADDR);
        host += e->bug_offset;
        /* A fault leaves the buffer or host memory as the IOMMU left it; pcibench reports it. */
        if (e->cmd & CMD_TO_RAM)
            e->host->dma_write(e->host->ctx, host, at, e->count);
        else
            e->host->dma_read(e->host->ctx, host, at, e->count);
    }
    e->cmd &= ~(uint64_t)CMD_START;
    if (e->cmd & CMD_IRQ)
        raise_irq(e, IRQ_DMA);
}

static void fact_done(struct edu *e)
{
    uint32_t n = e->fact, r = 1;
    while (n > 0)
        r *= n--;
    e->fact = r;
    e->status &= ~STATUS_COMPUTING;
    if (e->status & STATUS_IRQ_FACT)
        raise_irq(e, IRQ_FACT);
}

uint32_t pcibench_model_abi_version(void)
{
    return PCIBENCH_MODEL_ABI_VERSION;
}

static int arg(const char *args, const char *key, uint64_t *out)
{
    size_t n = strlen(key);
    for (const char *p = args; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, key, n) == 0 && p[n] == '=') {
            char *end;
            *out = strtoull(p + n + 1, &end, 0);
            return (*end == '\0' || *end == ',') ? 1 : -1;
        }
    }
    return 0;
}

void *pcibench_model_create(const char *args, const struct pcibench_host *host, char *error, size_t error_len)
{
    uint64_t bits = 28, bug = 0;
    struct edu *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(error, error_len, "edu: out of memory");
        return NULL;
    }
    e->host = host;
    e->dma_ns = 10000;
    e->fact_ns = 1000;
    if (arg(args, "dma_bits", &bits) < 0 || bits < 1 || bits > 64 || arg(args, "dma_ns", &e->dma_ns) < 0 ||
        arg(args, "fact_ns", &e->fact_ns) < 0) {
        snprintf(error, error_len, "edu: bad arguments '%s': dma_bits=1..64, dma_ns=N, fact_ns=N", args);
        free(e);
        return NULL;
    }
    if (strstr(args, "bug=iova"))
        bug = 1 << 20;
    e->dma_mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    e->bug_offset = bug;
    return e;
}

int pcibench_model_describe(void *model, struct pcibench_device *d)
{
    (void)model;
    d->vendor_id = 0x1234;
    d->device_id = 0x11e8;
    d->subsystem_vendor_id = 0x1af4; /* as QEMU's PCI devices report */
    d->subsystem_id = 0x1100;
    d->class_code = 0xff0000; /* unassigned class (PCI_CLASS_OTHERS) */
    d->revision = 0x10;
    d->intx = 1;
    d->bars[0].size = 1 << 20; /* 1 MiB of 32-bit memory */
    d->msi_vectors = 1;
    d->name = "edu (C model, docs/specs/edu.rst)";
    return PCIBENCH_OK;
}

int pcibench_model_bar_read(void *model, uint32_t bar, uint64_t offset, uint32_t width, uint64_t *value)
{
    struct edu *e = model;
    /* The spec: 4-byte accesses below 0x80, 4 or 8 from there. */
    if (bar != 0 || (offset < 0x80 ? width != 4 : width != 4 && width != 8))
        return PCIBENCH_UNSUPPORTED;
    switch (offset) {
    case 0x00: *value = EDU_ID; break;
    case 0x04: *value = e->liveness; break;
    case 0x08: *value = e->fact; break;
    case 0x20: *value = e->status; break;
    case 0x24: *value = e->irq_status; break;
    case 0x80: *value = e->src; break;
    case 0x88: *value = e->dst; break;
    case 0x90: *value = e->count; break;
    case 0x98: *value = e->cmd; break;
    default: return PCIBENCH_UNSUPPORTED;
    }
    if (width == 4)
        *value &= 0xffffffffu;
    return PCIBENCH_OK;
}

int pcibench_model_bar_write(void *model, uint32_t bar, uint64_t offset, uint32_t width, uint64_t value)
{
    struct edu *e = model;
    if (bar != 0 || (offset < 0x80 ? width != 4 : width != 4 && width != 8))
        return PCIBENCH_UNSUPPORTED;
    /* The DMA registers keep their values while a transfer runs. */
    if (offset >= 0x80 && (e->cmd & CMD_START))
        return PCIBENCH_OK;
    switch (offset) {
    case 0x04: e->liveness = ~(uint32_t)value; break;
    case 0x08:
        if (!(e->status & STATUS_COMPUTING)) {
            e->fact = (uint32_t)value;
            e->status |= STATUS_COMPUTING;
            e->fact_left = e->fact_ns;
        }
        break;
    case 0x20: e->status = (e->status & STATUS_COMPUTING) | ((uint32_t)value & STATUS_IRQ_FACT); break;
    case 0x60: raise_irq(e, (uint32_t)value); break;
    case 0x64: lower_irq(e, (uint32_t)value); break;
    case 0x80: e->src = value; break;
    case 0x88: e->dst = value; break;
    case 0x90: e->count = value; break;
    case 0x98:
        if (value & CMD_START) {
            e->cmd = value;
            e->dma_left = e->dma_ns;
        }
        break;
    default: return PCIBENCH_UNSUPPORTED;
    }
    /* Work that takes no time is done before the access returns. */
    if ((e->cmd & CMD_START) && e->dma_left == 0)
        dma_done(e);
    if ((e->status & STATUS_COMPUTING) && e->fact_left == 0)
        fact_done(e);
    return PCIBENCH_OK;
}

uint64_t pcibench_model_advance(void *model, uint64_t ns)
{
    struct edu *e = model;
    uint64_t next = PCIBENCH_IDLE;
    if (e->cmd & CMD_START) {
        e->dma_left = ns >= e->dma_left ? 0 : e->dma_left - ns;
        if (e->dma_left == 0)
            dma_done(e);
        else
            next = e->dma_left;
    }
    if (e->status & STATUS_COMPUTING) {
        e->fact_left = ns >= e->fact_left ? 0 : e->fact_left - ns;
        if (e->fact_left == 0)
            fact_done(e);
        else if (e->fact_left < next)
            next = e->fact_left;
    }
    return next;
}

void pcibench_model_reset(void *model)
{
    struct edu *e = model;
    e->liveness = e->fact = e->status = 0;
    e->src = e->dst = e->count = e->cmd = 0;
    e->dma_left = e->fact_left = 0;
    lower_irq(e, ~0u);
}

void pcibench_model_destroy(void *model)
{
    free(model);
}
