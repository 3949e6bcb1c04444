/* The PIO loops of the seeds, timed the way pcibench times its copy routines, for scripts/bench-peers.
 *
 * Seed 000 (fpga_sio's time_memmapped_libpciaccess) copies a whole BAR with memcpy() each way; seed 002
 * (vfio_test.c) reads and writes a BAR one volatile 32-bit word at a time. Here the "BAR" is page-aligned
 * host memory, as the sim card's BARs are (write-back), and so is the host buffer, as pcibench's is.
 *
 * For each loop (vol32, vol64, memcpy) and direction (h2c: host buffer -> BAR, c2h: BAR -> host buffer):
 * one untimed transfer, then a batch size calibrated so a sample lasts at least 100 us (pcibench's rule),
 * then samples until TOTAL bytes have moved; prints the median rate in MB/s (10^6 bytes/s):
 *
 *     h2c vol32 4096 12345.6
 *
 * usage: pio_loops SIZE TOTAL     (bytes; SIZE a multiple of 8)
 * Build: gcc -O2 -o pio_loops pio_loops.c
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One volatile access per word on the BAR side (seed 002's loop); the host side is plain memory. */
static void h2c_vol32(void *bar, const void *host, size_t len)
{
	volatile uint32_t *d = bar;
	const uint32_t *s = host;
	for (size_t i = 0; i < len / 4; i++)
		d[i] = s[i];
}

static void c2h_vol32(void *host, const void *bar, size_t len)
{
	const volatile uint32_t *s = bar;
	uint32_t *d = host;
	for (size_t i = 0; i < len / 4; i++)
		d[i] = s[i];
}

static void h2c_vol64(void *bar, const void *host, size_t len)
{
	volatile uint64_t *d = bar;
	const uint64_t *s = host;
	for (size_t i = 0; i < len / 8; i++)
		d[i] = s[i];
}

static void c2h_vol64(void *host, const void *bar, size_t len)
{
	const volatile uint64_t *s = bar;
	uint64_t *d = host;
	for (size_t i = 0; i < len / 8; i++)
		d[i] = s[i];
}

/* Seed 000: memcpy() to and from the mapping. */
static void h2c_memcpy(void *bar, const void *host, size_t len)
{
	memcpy(bar, host, len);
}

static void c2h_memcpy(void *host, const void *bar, size_t len)
{
	memcpy(host, bar, len);
}

typedef void (*copy_fn)(void *dst, const void *src, size_t len);

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Median MB/s of `fn` copying `len` bytes from `src` to `dst` until `total` bytes have moved. */
static double measure(copy_fn fn, void *dst, const void *src, size_t len, uint64_t total)
{
	fn(dst, src, len);
	uint64_t k = 1;
	for (;;) {
		uint64_t t0 = now_ns();
		for (uint64_t i = 0; i < k; i++) {
			fn(dst, src, len);
			/* Keep the compiler from merging repeated identical memcpy() calls. */
			__asm__ volatile("" : : "r"(dst), "r"(src) : "memory");
		}
		uint64_t took = now_ns() - t0;
		if (took >= 100000 || k >= (1u << 24))
			break;
		uint64_t next = (uint64_t)(150000.0 * k / (double)(took ? took : 1)) + 1;
		k = next > 2 * k ? next : 2 * k;
	}
	uint64_t planned = total / len ? total / len : 1;
	if (k > planned)
		k = planned;
	size_t n = planned / k;
	uint64_t *t = malloc(n * sizeof *t);
	if (!t) {
		perror("malloc");
		exit(1);
	}
	for (size_t s = 0; s < n; s++) {
		uint64_t t0 = now_ns();
		for (uint64_t i = 0; i < k; i++) {
			fn(dst, src, len);
			__asm__ volatile("" : : "r"(dst), "r"(src) : "memory");
		}
		t[s] = now_ns() - t0;
	}
	qsort(t, n, sizeof *t, cmp_u64);
	double median = n % 2 ? (double)t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2.0;
	free(t);
	return (double)len * (double)k / median * 1e3;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s SIZE TOTAL\n", argv[0]);
		return 2;
	}
	size_t len = strtoull(argv[1], NULL, 0);
	uint64_t total = strtoull(argv[2], NULL, 0);
	if (len == 0 || len % 8 || total < len) {
		fprintf(stderr, "pio_loops: SIZE must be a non-zero multiple of 8 and TOTAL at least SIZE\n");
		return 2;
	}
	size_t rounded = (len + 4095) & ~(size_t)4095;
	unsigned char *bar = aligned_alloc(4096, rounded), *host = aligned_alloc(4096, rounded);
	if (!bar || !host) {
		perror("aligned_alloc");
		return 1;
	}
	for (size_t i = 0; i < len; i++) {
		host[i] = (unsigned char)(i * 131 + 7);
		bar[i] = (unsigned char)(i * 17 + 3);
	}
	static const struct {
		const char *name;
		copy_fn h2c, c2h;
	} loops[] = {
		{ "vol32", h2c_vol32, c2h_vol32 },
		{ "vol64", h2c_vol64, c2h_vol64 },
		{ "memcpy", h2c_memcpy, c2h_memcpy },
	};
	for (size_t l = 0; l < sizeof loops / sizeof loops[0]; l++) {
		printf("h2c %s %zu %.1f\n", loops[l].name, len, measure(loops[l].h2c, bar, host, len, total));
		printf("c2h %s %zu %.1f\n", loops[l].name, len, measure(loops[l].c2h, host, bar, len, total));
	}
	/* The data really moved: after the last c2h memcpy the host holds what the BAR holds. */
	if (memcmp(host, bar, len) != 0) {
		fprintf(stderr, "pio_loops: the last read does not match the BAR\n");
		return 1;
	}
	free(bar);
	free(host);
	return 0;
}
