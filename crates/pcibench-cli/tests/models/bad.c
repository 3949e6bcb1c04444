/*
 * Models that break the rules of pcibench_model.h, one rule each (built with -DBAD_...), for
 * tests/models.rs: each must give its one line and exit status.
 *   BAD_NO_RESET   does not export pcibench_model_reset
 *   BAD_ABI        built for another ABI version
 *   BAD_DESCRIBE   a BAR of 3000 bytes (not a power of two)
 *   BAD_REFUSE     create fails, saying why
 *   BAD_LENGTH     a write to BAR0+0x10 calls dma_read with an impossible length
 *   BAD_CRASH      a write to BAR0+0x10 dereferences NULL
 *   BAD_THREAD     a write to BAR0+0x10 calls raise_irq from a thread it did not declare
 *   BAD_HANG       a write to BAR0+0x10 never returns
 * Otherwise (bad-plain.so, which breaks nothing): a 4 KiB BAR0 of 64-bit scratch registers, MSI-X with 4 vectors
 * (table at BAR0+0x800, PBA at +0xc00, pcibench's), and MSI; a write of N to +0x18 raises vector N, to +0x20
 * lowers it.
 */
#include "pcibench_model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bad {
    const struct pcibench_host *host;
    uint64_t regs[512];
};

uint32_t pcibench_model_abi_version(void)
{
#ifdef BAD_ABI
    return PCIBENCH_MODEL_ABI_VERSION + 98;
#else
    return PCIBENCH_MODEL_ABI_VERSION;
#endif
}

void *pcibench_model_create(const char *args, const struct pcibench_host *host, char *error, size_t error_len)
{
    (void)args;
#ifdef BAD_REFUSE
    snprintf(error, error_len, "no license for this model");
    (void)host;
    return NULL;
#else
    (void)error, (void)error_len;
    struct bad *b = calloc(1, sizeof *b);
    if (b)
        b->host = host;
    return b;
#endif
}

int pcibench_model_describe(void *model, struct pcibench_device *d)
{
    (void)model;
    d->vendor_id = 0x1af4;
    d->device_id = 0x10f0;
    d->class_code = 0xff0000;
    d->bars[0].size = 4096;
#ifdef BAD_DESCRIBE
    d->bars[0].size = 3000;
#endif
    d->msi_vectors = 1;
    d->msix_vectors = 4;
    d->msix_bar = 0;
    d->msix_table_offset = 0x800;
    d->msix_pba_offset = 0xc00;
    return PCIBENCH_OK;
}

int pcibench_model_bar_read(void *model, uint32_t bar, uint64_t offset, uint32_t width, uint64_t *value)
{
    struct bad *b = model;
    if (bar != 0 || width != 8)
        return PCIBENCH_UNSUPPORTED;
    *value = b->regs[offset / 8];
    return PCIBENCH_OK;
}

#ifdef BAD_THREAD
static void *stray(void *arg)
{
    struct bad *b = arg;
    b->host->raise_irq(b->host->ctx, 0);
    return NULL;
}
#endif

int pcibench_model_bar_write(void *model, uint32_t bar, uint64_t offset, uint32_t width, uint64_t value)
{
    struct bad *b = model;
    if (bar != 0 || width != 8)
        return PCIBENCH_UNSUPPORTED;
    b->regs[offset / 8] = value;
    if (offset == 0x18)
        b->host->raise_irq(b->host->ctx, (uint32_t)value);
    if (offset == 0x20)
        b->host->lower_irq(b->host->ctx, (uint32_t)value);
    if (offset == 0x10) {
#ifdef BAD_LENGTH
        uint8_t buf[16];
        b->host->dma_read(b->host->ctx, value, buf, 1ull << 40);
#endif
#ifdef BAD_CRASH
        volatile int *nowhere = NULL;
        *nowhere = (int)value;
#endif
#ifdef BAD_HANG
        for (volatile int forever = 1; forever;)
            ;
#endif
#ifdef BAD_THREAD
        pthread_t t;
        pthread_create(&t, NULL, stray, b);
        pthread_join(t, NULL);
#endif
    }
    return PCIBENCH_OK;
}

#ifndef BAD_NO_RESET
void pcibench_model_reset(void *model)
{
    memset(((struct bad *)model)->regs, 0, sizeof ((struct bad *)model)->regs);
}
#endif

void pcibench_model_destroy(void *model)
{
    free(model);
}
