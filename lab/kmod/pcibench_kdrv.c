// SPDX-License-Identifier: GPL-2.0
/*
 * pcibench_kdrv: the PCI side of AMD's in-kernel XDMA and QDMA dmaengine drivers, for the pcibench lab.
 *
 * Linux carries AMD's drivers for both IPs as platform drivers (drivers/dma/xilinx/xdma.c, "xdma";
 * drivers/dma/amd/qdma/, "amd-qdma") that a PCI driver feeds with the card's register BAR and its MSI-X
 * vectors (drivers/media/pci/mgb4/mgb4_core.c init_xdma is the in-tree example). This module is that PCI
 * driver for pcibench's simulated cards served to a guest: it enables the function and MSI-X, registers the
 * vendor driver's platform device, takes its channels through the dmaengine slave API and runs a
 * dmatest-style suite both ways (drivers/dma/dmatest.c: source and destination filled with known patterns,
 * the bytes written compared, the bytes before and after the transfer in the destination checked untouched),
 * one line per transfer in debugfs: <debugfs>/pcibench_kdrv/<PCI address>/selftest (reading it runs the suite).
 *
 * It has no id table: it binds only to a function named to it (driver_override, or new_id), never to a real
 * card by default. Which IP a function carries is read from its registers: a BAR whose offset 0 reads the QDMA
 * identifier 0x1fd3 (qdma.c qdma_device_verify), or whose IRQ (0x2000) and config (0x3000) blocks read the
 * XDMA identifiers 0x1fc2 and 0x1fc3 (PG195 "Target Identifier").
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/platform_device.h>
#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/scatterlist.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/ktime.h>
#include <linux/platform_data/amd_xdma.h>
#include <linux/platform_data/amd_qdma.h>

#define DRV "pcibench_kdrv"
#define MAX_PAIRS 4
/* Guard bytes on each side of every destination (and source) region, as dmatest keeps around its buffers. */
#define GUARD 64
/* dmatest.c's pattern classes: a byte says whether it was source, copied source, or destination. */
#define PATTERN_SRC 0x80
#define PATTERN_DST 0x00
#define PATTERN_COPY 0x40
#define PATTERN_MASK 0x1f

static unsigned int timeout_ms = 10000;
module_param(timeout_ms, uint, 0644);
MODULE_PARM_DESC(timeout_ms, "how long one transfer may take before it is a failure (ms)");
static unsigned int qdma_pairs = 2;
module_param(qdma_pairs, uint, 0444);
MODULE_PARM_DESC(qdma_pairs, "QDMA: memory-mapped queues per direction the driver takes (max_mm_channels)");
static unsigned int qdma_rings = 2;
module_param(qdma_rings, uint, 0444);
MODULE_PARM_DESC(qdma_rings, "QDMA: interrupt aggregation rings (one MSI-X vector each, after the error vector)");
static unsigned long long card_base = 0x1000;
module_param(card_base, ullong, 0444);
MODULE_PARM_DESC(card_base, "card (AXI) address of the test window");

enum kind { KIND_XDMA, KIND_QDMA };

struct kdrv {
	struct pci_dev *pdev;
	enum kind kind;
	int bar;
	int nvec;
	int pairs;
	struct platform_device *engine;
	struct dma_slave_map map[2 * MAX_PAIRS];
	char names[2 * MAX_PAIRS][8];
	struct dma_chan *chan[2][MAX_PAIRS]; /* [0] H2C (MEM_TO_DEV), [1] C2H */
	unsigned long callbacks[2][MAX_PAIRS];
	unsigned long runs;
	struct dentry *dir;
	struct mutex lock; /* one suite at a time */
};

static struct dentry *root;
static struct xdma_chan_info xdma_h2c = { .dir = DMA_MEM_TO_DEV }, xdma_c2h = { .dir = DMA_DEV_TO_MEM };
static struct qdma_queue_info qdma_h2c = { .dir = DMA_MEM_TO_DEV }, qdma_c2h = { .dir = DMA_DEV_TO_MEM };

static const char *const dir_name[2] = { "h2c", "c2h" };

/* A byte of a pattern: its class and five bits that change with the position (more than dmatest's index
 * modulo 32, so a transfer shifted by a multiple of 32 bytes is caught too). */
static u8 pat(u8 class, size_t i, u32 seed)
{
	size_t x = i + seed;

	return class | ((x ^ (x >> 5) ^ (x >> 11) ^ (x >> 17)) & PATTERN_MASK);
}

/* ---- one transfer through the slave API ------------------------------------------------------------- */

struct done {
	struct completion c;
	enum dmaengine_tx_result result;
	unsigned long *count;
};

static void xfer_done(void *param, const struct dmaengine_result *r)
{
	struct done *d = param;

	d->result = r ? r->result : DMA_TRANS_NOERROR;
	(*d->count)++;
	complete(&d->c);
}

/* Move the host segments bufs[i] (lens[i] bytes each) to (h2c) or from the card address `card` as one slave
 * transfer: slave config with the card-side address, prep_slave_sg, submit, issue, the completion callback. */
static int transfer(struct kdrv *k, int d, int pair, u64 card, u8 **bufs, const size_t *lens, int nseg,
		    u64 *ns, char *why, size_t whylen)
{
	struct dma_chan *chan = k->chan[d][pair];
	enum dma_transfer_direction dir = d ? DMA_DEV_TO_MEM : DMA_MEM_TO_DEV;
	enum dma_data_direction ddir = d ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	struct device *dev = &k->pdev->dev;
	struct dma_slave_config cfg = { .direction = dir };
	struct dma_async_tx_descriptor *tx;
	struct scatterlist *sg;
	struct sg_table sgt;
	struct done done;
	dma_cookie_t cookie;
	enum dma_status st;
	ktime_t t0;
	int i, mapped, ret = 0;

	if (sg_alloc_table(&sgt, nseg, GFP_KERNEL)) {
		snprintf(why, whylen, "no memory for a %d-entry scatter list", nseg);
		return -ENOMEM;
	}
	for_each_sg(sgt.sgl, sg, nseg, i)
		sg_set_buf(sg, bufs[i], lens[i]);
	mapped = dma_map_sg(dev, sgt.sgl, nseg, ddir);
	if (!mapped) {
		snprintf(why, whylen, "dma_map_sg failed");
		ret = -EIO;
		goto free;
	}
	if (d)
		cfg.src_addr = card;
	else
		cfg.dst_addr = card;
	cfg.src_addr_width = cfg.dst_addr_width = DMA_SLAVE_BUSWIDTH_4_BYTES;
	ret = dmaengine_slave_config(chan, &cfg);
	if (ret) {
		snprintf(why, whylen, "dmaengine_slave_config: %d", ret);
		goto unmap;
	}
	tx = dmaengine_prep_slave_sg(chan, sgt.sgl, mapped, dir, DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
	if (!tx) {
		snprintf(why, whylen, "dmaengine_prep_slave_sg returned nothing");
		ret = -EIO;
		goto unmap;
	}
	init_completion(&done.c);
	done.result = DMA_TRANS_ABORTED;
	done.count = &k->callbacks[d][pair];
	tx->callback_result = xfer_done;
	tx->callback_param = &done;
	t0 = ktime_get();
	cookie = dmaengine_submit(tx);
	if (dma_submit_error(cookie)) {
		snprintf(why, whylen, "dmaengine_submit: %d", cookie);
		ret = -EIO;
		goto unmap;
	}
	dma_async_issue_pending(chan);
	if (!wait_for_completion_timeout(&done.c, msecs_to_jiffies(timeout_ms))) {
		*ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
		dmaengine_terminate_sync(chan);
		snprintf(why, whylen, "no completion callback within %u ms", timeout_ms);
		ret = -ETIMEDOUT;
		goto unmap;
	}
	*ns = ktime_to_ns(ktime_sub(ktime_get(), t0));
	st = dma_async_is_tx_complete(chan, cookie, NULL, NULL);
	if (st != DMA_COMPLETE || done.result != DMA_TRANS_NOERROR) {
		snprintf(why, whylen, "completed with status %d, result %d", st, done.result);
		ret = -EIO;
	}
unmap:
	dma_unmap_sg(dev, sgt.sgl, nseg, ddir);
free:
	sg_free_table(&sgt);
	return ret;
}

/* ---- a dmatest-style case ----------------------------------------------------------------------------- */

struct tcase {
	size_t len;
	int nseg;
	unsigned int host_off; /* extra offset of each host region past its guard (odd: unaligned) */
	unsigned int card_off; /* card address = card_base + card_off */
	bool uneven;	       /* segments of different lengths */
};

/* 64 B .. 1 MiB, odd sizes and offsets, scatter lists of several segments. */
static const struct tcase cases[] = {
	{ 64, 1, 0, 0, false },		 { 4096, 1, 0, 0, false },	   { 65536, 1, 0, 0, false },
	{ 1 << 20, 1, 0, 0, false },	 { 1, 1, 3, 5, false },		   { 3, 1, 1, 7, false },
	{ 4097, 1, 0, 1, false },	 { 12345, 3, 5, 3, true },	   { 65536, 4, 0, 0, false },
	{ 1 << 20, 16, 0, 0, false },	 { 100000, 7, 2, 0, true },
};

/* The segment lengths of case c (they sum to c->len). */
static void split(const struct tcase *c, size_t *lens)
{
	size_t left = c->len, base = c->len / c->nseg;
	int i;

	for (i = 0; i < c->nseg; i++) {
		size_t l = base;

		if (c->uneven && base > 16)
			l = (i & 1) ? base + 13 : base - 13;
		if (i == c->nseg - 1 || l > left)
			l = left;
		lens[i] = l;
		left -= l;
	}
}

/* Host buffers with a guard of GUARD + off bytes before and GUARD after each region. */
struct segs {
	int n;
	u8 *buf[16];
	u8 *region[16];
	size_t len[16];
	unsigned int off;
};

static void segs_free(struct segs *s)
{
	int i;

	for (i = 0; i < s->n; i++)
		kfree(s->buf[i]);
	s->n = 0;
}

static int segs_alloc(struct segs *s, const size_t *lens, int n, unsigned int off)
{
	int i;

	s->n = 0;
	s->off = off;
	for (i = 0; i < n; i++) {
		s->buf[i] = kmalloc(lens[i] + 2 * GUARD + off, GFP_KERNEL | __GFP_NOWARN);
		if (!s->buf[i]) {
			segs_free(s);
			return -ENOMEM;
		}
		s->n++;
		s->len[i] = lens[i];
		s->region[i] = s->buf[i] + GUARD + off;
	}
	return 0;
}

/* Fill every buffer: guards with `outer`, regions with `inner` (numbered across the segments from 0). */
static void segs_fill(struct segs *s, u8 outer, u8 inner, u32 seed)
{
	size_t j = 0, i, total;
	int k;

	for (k = 0; k < s->n; k++) {
		total = s->len[k] + 2 * GUARD + s->off;
		for (i = 0; i < total; i++)
			s->buf[k][i] = pat(outer, i, seed ^ 0x55);
		for (i = 0; i < s->len[k]; i++, j++)
			s->region[k][i] = pat(inner, j, seed);
	}
}

/* Check the buffers hold what segs_fill put there (regions `inner`); the first difference in words. */
static bool segs_check(struct segs *s, u8 outer, u8 inner, u32 seed, const char *what, char *why, size_t whylen)
{
	size_t j = 0, i, total, start;
	int k;

	for (k = 0; k < s->n; k++) {
		total = s->len[k] + 2 * GUARD + s->off;
		start = GUARD + s->off;
		for (i = 0; i < total; i++) {
			bool in = i >= start && i < start + s->len[k];
			u8 want = in ? pat(inner, j + i - start, seed) : pat(outer, i, seed ^ 0x55);

			if (s->buf[k][i] != want) {
				snprintf(why, whylen, "%s segment %d: byte %s%zd of the region is 0x%02x, not 0x%02x",
					 what, k, in ? "" : (i < start ? "-" : "+"),
					 in ? (ssize_t)(i - start) :
					      (i < start ? (ssize_t)(start - i) : (ssize_t)(i - start - s->len[k])),
					 s->buf[k][i], want);
				return false;
			}
		}
		j += s->len[k];
	}
	return true;
}

/* One case one way. H2C: the card window (GUARD either side) is first filled with the destination pattern,
 * the source segments go to the card, the window comes back in one C2H transfer and is checked: the bytes
 * before and after untouched, the transfer's bytes the copied source; the source unchanged. C2H: the card is
 * filled with the source pattern, read into destination segments whose guards must stay untouched. Returns
 * the timed transfer's nanoseconds, or a negative error with `why` filled. */
static int run_case(struct kdrv *k, const struct tcase *c, int d, int pair, u32 seed, u64 *ns, char *why, size_t wl)
{
	u64 card = card_base + c->card_off, window = card - GUARD, scratch_ns;
	size_t lens[16], wlen = c->len + 2 * GUARD;
	struct segs data = { 0 }, win = { 0 };
	int ret;

	split(c, lens);
	ret = segs_alloc(&data, lens, c->nseg, c->host_off);
	if (!ret)
		ret = segs_alloc(&win, &wlen, 1, 0);
	if (ret) {
		snprintf(why, wl, "no memory for the buffers");
		goto out;
	}
	if (d == 0) {
		/* The window's bytes: DST everywhere (inner DST numbered from the window's start). */
		segs_fill(&win, PATTERN_DST, PATTERN_DST, seed + 1);
		ret = transfer(k, 0, pair, window, win.region, win.len, 1, &scratch_ns, why, wl);
		if (ret)
			goto fill_failed;
		segs_fill(&data, PATTERN_SRC, PATTERN_SRC | PATTERN_COPY, seed);
		ret = transfer(k, 0, pair, card, data.region, data.len, c->nseg, ns, why, wl);
		if (ret)
			goto out;
		memset(win.buf[0], 0xff, wlen + 2 * GUARD);
		ret = transfer(k, 1, pair, window, win.region, win.len, 1, &scratch_ns, why, wl);
		if (ret)
			goto readback_failed;
		{
			size_t i;

			for (i = 0; i < wlen; i++) {
				bool in = i >= GUARD && i < GUARD + c->len;
				u8 want = in ? pat(PATTERN_SRC | PATTERN_COPY, i - GUARD, seed) :
					       pat(PATTERN_DST, i, seed + 1);

				if (win.region[0][i] != want) {
					snprintf(why, wl, "card byte %s%zd of the transfer is 0x%02x, not 0x%02x%s",
						 in ? "" : (i < GUARD ? "-" : "+"),
						 in ? (ssize_t)(i - GUARD) :
						      (i < GUARD ? (ssize_t)(GUARD - i) :
								   (ssize_t)(i - GUARD - c->len)),
						 win.region[0][i], want,
						 in ? "" : " (outside the transfer: overwritten)");
					ret = -EILSEQ;
					goto out;
				}
			}
		}
		if (!segs_check(&data, PATTERN_SRC, PATTERN_SRC | PATTERN_COPY, seed, "source", why, wl))
			ret = -EILSEQ;
	} else {
		struct segs src = { 0 };

		ret = segs_alloc(&src, &c->len, 1, 0);
		if (ret) {
			snprintf(why, wl, "no memory for the buffers");
			goto out;
		}
		segs_fill(&src, PATTERN_SRC, PATTERN_SRC | PATTERN_COPY, seed);
		ret = transfer(k, 0, pair, card, src.region, src.len, 1, &scratch_ns, why, wl);
		segs_free(&src);
		if (ret)
			goto fill_failed;
		segs_fill(&data, PATTERN_DST, PATTERN_DST, seed ^ 0x3c);
		ret = transfer(k, 1, pair, card, data.region, data.len, c->nseg, ns, why, wl);
		if (ret)
			goto out;
		/* The regions hold the copied source, the guards the destination pattern they were given. */
		{
			size_t j = 0, i, total, start;
			int s;

			for (s = 0; s < data.n && !ret; s++) {
				total = data.len[s] + 2 * GUARD + data.off;
				start = GUARD + data.off;
				for (i = 0; i < total; i++) {
					bool in = i >= start && i < start + data.len[s];
					u8 want = in ? pat(PATTERN_SRC | PATTERN_COPY, j + i - start, seed) :
						       pat(PATTERN_DST, i, (seed ^ 0x3c) ^ 0x55);

					if (data.buf[s][i] != want) {
						snprintf(why, wl,
							 "destination segment %d: byte %s%zd is 0x%02x, not 0x%02x%s", s,
							 in ? "" : (i < start ? "-" : "+"),
							 in ? (ssize_t)(i - start) :
							      (i < start ? (ssize_t)(start - i) :
									   (ssize_t)(i - start - data.len[s])),
							 data.buf[s][i], want,
							 in ? "" : " (outside the transfer: overwritten)");
						ret = -EILSEQ;
						break;
					}
				}
				j += data.len[s];
			}
		}
	}
	goto out;
fill_failed:
	strlcat(why, " (filling the card before the test)", wl);
	goto out;
readback_failed:
	strlcat(why, " (reading the card back)", wl);
out:
	segs_free(&data);
	segs_free(&win);
	return ret;
}

static int selftest_show(struct seq_file *m, void *unused)
{
	struct kdrv *k = m->private;
	const char *engine = k->kind == KIND_XDMA ? "xdma" : "qdma";
	unsigned int passed = 0, failed = 0, n = 0;
	char why[160];
	int i, d;

	mutex_lock(&k->lock);
	k->runs++;
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct tcase *c = &cases[i];
		int pair = i % k->pairs;

		for (d = 0; d < 2; d++) {
			u64 ns = 0;
			int ret;

			why[0] = 0;
			ret = run_case(k, c, d, pair, (u32)(k->runs * 1000 + i * 2 + d), &ns, why, sizeof(why));
			n++;
			seq_printf(m, "%s %s%d size=%zu segs=%d host_off=%u card=0x%llx ", engine, dir_name[d], pair,
				   c->len, c->nseg, c->host_off, card_base + c->card_off);
			if (!ret) {
				u64 tenths = ns ? div64_u64((u64)c->len * 10000, ns) : 0;

				passed++;
				seq_printf(m, "pass ns=%llu MB/s=%llu.%llu\n", ns, tenths / 10, tenths % 10);
			} else {
				failed++;
				seq_printf(m, "FAIL %s\n", why);
				dev_err(&k->pdev->dev, "%s %s%d size %zu: %s\n", engine, dir_name[d], pair, c->len, why);
				if (ret == -ETIMEDOUT)
					goto done; /* the engine may be wedged: what follows would say nothing new */
			}
		}
	}
done:
	seq_printf(m, "summary engine=%s tests=%u passed=%u failed=%u planned=%zu\n", engine, n, passed, failed,
		   2 * ARRAY_SIZE(cases));
	for (d = 0; d < 2; d++)
		for (i = 0; i < k->pairs; i++)
			seq_printf(m, "callbacks %s%d=%lu\n", dir_name[d], i, k->callbacks[d][i]);
	mutex_unlock(&k->lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(selftest);

/* ---- probe: find the IP, MSI-X, the vendor's platform device, its channels --------------------------- */

static u32 peek(void __iomem *regs, unsigned long off, unsigned long len)
{
	return off + 4 <= len ? ioread32(regs + off) : 0;
}

/* Which BAR holds the DMA registers, and of which IP; the XDMA channel counts (identifiers 0x1fc0 / 0x1fc1
 * at 0x100 strides: xdma.c xdma_alloc_channels). */
static int find_ip(struct kdrv *k, int *h2c, int *c2h)
{
	struct pci_dev *pdev = k->pdev;
	int bar, i;

	for (bar = 0; bar < PCI_STD_NUM_BARS; bar++) {
		unsigned long len = pci_resource_len(pdev, bar);
		void __iomem *regs;

		if (!(pci_resource_flags(pdev, bar) & IORESOURCE_MEM) || len < 0x4000)
			continue;
		regs = pci_iomap_range(pdev, bar, 0, 0x4000);
		if (!regs)
			continue;
		if (peek(regs, 0, 0x4000) >> 16 == 0x1fd3) {
			k->kind = KIND_QDMA;
		} else if (peek(regs, 0x2000, 0x4000) >> 16 == 0x1fc2 && peek(regs, 0x3000, 0x4000) >> 16 == 0x1fc3) {
			k->kind = KIND_XDMA;
			*h2c = *c2h = 0;
			for (i = 0; i < 4; i++) {
				*h2c += peek(regs, i * 0x100, 0x4000) >> 16 == 0x1fc0;
				*c2h += peek(regs, 0x1000 + i * 0x100, 0x4000) >> 16 == 0x1fc1;
			}
		} else {
			pci_iounmap(pdev, regs);
			continue;
		}
		pci_iounmap(pdev, regs);
		k->bar = bar;
		return 0;
	}
	return -ENODEV;
}

static void add_map(struct kdrv *k, int idx, int d, int pair, void *param)
{
	snprintf(k->names[idx], sizeof(k->names[idx]), "%s%d", dir_name[d], pair);
	k->map[idx].devname = dev_name(&k->pdev->dev);
	k->map[idx].slave = k->names[idx];
	k->map[idx].param = param;
}

static void release_chans(struct kdrv *k)
{
	int d, i;

	for (d = 0; d < 2; d++)
		for (i = 0; i < MAX_PAIRS; i++)
			if (k->chan[d][i]) {
				dma_release_channel(k->chan[d][i]);
				k->chan[d][i] = NULL;
			}
}

static int kdrv_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct device *dev = &pdev->dev;
	struct resource res[2] = { 0 };
	struct kdrv *k;
	int h2c = 0, c2h = 0, ret, i, d;

	k = devm_kzalloc(dev, sizeof(*k), GFP_KERNEL);
	if (!k)
		return -ENOMEM;
	k->pdev = pdev;
	mutex_init(&k->lock);
	pci_set_drvdata(pdev, k);
	ret = pci_enable_device(pdev);
	if (ret)
		return dev_err_probe(dev, ret, "cannot enable the function\n");
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret) {
		dev_err(dev, "no 64-bit DMA mask: %d\n", ret);
		goto disable;
	}
	ret = find_ip(k, &h2c, &c2h);
	if (ret) {
		dev_err(dev, "no BAR carries XDMA or QDMA registers\n");
		goto disable;
	}
	if (k->kind == KIND_XDMA) {
		k->pairs = min(h2c, c2h);
		k->nvec = h2c + c2h; /* one vector per channel, H2C first (xdma.c xdma_irq_init) */
	} else {
		k->pairs = clamp_t(unsigned int, qdma_pairs, 1, MAX_PAIRS);
		k->nvec = 1 + clamp_t(unsigned int, qdma_rings, 1, 8); /* the error vector, then one per ring */
	}
	if (k->pairs < 1) {
		dev_err(dev, "XDMA with %d H2C and %d C2H channels: no pair to test\n", h2c, c2h);
		ret = -ENODEV;
		goto disable;
	}
	ret = pci_alloc_irq_vectors(pdev, k->nvec, k->nvec, PCI_IRQ_MSIX);
	if (ret < 0) {
		dev_err(dev, "cannot allocate %d MSI-X vectors: %d\n", k->nvec, ret);
		goto disable;
	}
	/* The vendor drivers take the vectors as one IRQ range (mgb4_core.c does the same). */
	for (i = 1; i < k->nvec; i++)
		if (pci_irq_vector(pdev, i) != pci_irq_vector(pdev, 0) + i) {
			dev_err(dev, "MSI-X vectors are not consecutive IRQs\n");
			ret = -EINVAL;
			goto vectors;
		}
	res[0].start = pci_resource_start(pdev, k->bar);
	res[0].end = pci_resource_end(pdev, k->bar);
	res[0].flags = IORESOURCE_MEM;
	res[0].parent = &pdev->resource[k->bar];
	res[1].start = pci_irq_vector(pdev, 0);
	res[1].end = res[1].start + k->nvec - 1;
	res[1].flags = IORESOURCE_IRQ;
	for (i = 0; i < k->pairs; i++) {
		add_map(k, 2 * i, 0, i, k->kind == KIND_XDMA ? (void *)&xdma_h2c : (void *)&qdma_h2c);
		add_map(k, 2 * i + 1, 1, i, k->kind == KIND_XDMA ? (void *)&xdma_c2h : (void *)&qdma_c2h);
	}
	if (k->kind == KIND_XDMA) {
		struct xdma_platdata pd = { .max_dma_channels = 4, .device_map_cnt = 2 * k->pairs,
					    .device_map = k->map };

		k->engine = platform_device_register_resndata(dev, "xdma", PLATFORM_DEVID_AUTO, res, 2, &pd,
							      sizeof(pd));
	} else {
		struct qdma_platdata pd = { .max_mm_channels = k->pairs, .irq_index = 0, .device_map = k->map,
					    .dma_dev = dev };

		k->engine = platform_device_register_resndata(dev, "amd-qdma", PLATFORM_DEVID_AUTO, res, 2, &pd,
							      sizeof(pd));
	}
	if (IS_ERR(k->engine)) {
		ret = PTR_ERR(k->engine);
		k->engine = NULL;
		dev_err(dev, "cannot register the vendor driver's platform device: %d\n", ret);
		goto vectors;
	}
	if (!k->engine->dev.driver) {
		dev_err(dev, "the %s driver did not take its platform device (not loaded, or its probe failed)\n",
			k->kind == KIND_XDMA ? "xdma" : "amd-qdma");
		ret = -ENODEV;
		goto engine;
	}
	for (i = 0; i < k->pairs; i++)
		for (d = 0; d < 2; d++) {
			struct dma_chan *c = dma_request_chan(dev, k->names[2 * i + d]);

			if (IS_ERR(c)) {
				ret = PTR_ERR(c);
				dev_err(dev, "cannot take channel %s: %d\n", k->names[2 * i + d], ret);
				goto chans;
			}
			k->chan[d][i] = c;
		}
	k->dir = debugfs_create_dir(pci_name(pdev), root);
	debugfs_create_file("selftest", 0400, k->dir, k, &selftest_fops);
	dev_info(dev, "%s on BAR%d, %d MSI-X vectors, %d channel pair(s) through %s\n",
		 k->kind == KIND_XDMA ? "XDMA" : "QDMA", k->bar, k->nvec, k->pairs, dev_name(&k->engine->dev));
	return 0;

chans:
	release_chans(k);
engine:
	platform_device_unregister(k->engine);
vectors:
	pci_free_irq_vectors(pdev);
disable:
	pci_disable_device(pdev);
	return ret;
}

static void kdrv_remove(struct pci_dev *pdev)
{
	struct kdrv *k = pci_get_drvdata(pdev);

	debugfs_remove_recursive(k->dir);
	release_chans(k);
	platform_device_unregister(k->engine);
	pci_free_irq_vectors(pdev);
	pci_disable_device(pdev);
}

/* No id table: only functions named to this driver (driver_override, new_id) are bound. */
static struct pci_driver kdrv_driver = {
	.name = DRV,
	.probe = kdrv_probe,
	.remove = kdrv_remove,
};

static int __init kdrv_init(void)
{
	int ret;

	root = debugfs_create_dir(DRV, NULL);
	ret = pci_register_driver(&kdrv_driver);
	if (ret)
		debugfs_remove_recursive(root);
	return ret;
}

static void __exit kdrv_exit(void)
{
	pci_unregister_driver(&kdrv_driver);
	debugfs_remove_recursive(root);
}

module_init(kdrv_init);
module_exit(kdrv_exit);
MODULE_DESCRIPTION("pcibench lab: AMD's XDMA and QDMA dmaengine drivers on a served simulated card, dmatest-style");
MODULE_LICENSE("GPL");
