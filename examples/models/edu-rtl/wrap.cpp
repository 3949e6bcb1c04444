// edu_rtl.v under Verilator, wrapped to pcibench_model.h: a BAR access is a request on the
// design's host port, clocked until it answers; the design's bus-master beats become dma_read
// and dma_write callbacks; its interrupt line's edges become raise_irq and lower_irq. Time is
// the design's clock: while its engines are busy, advance runs it as fast as the simulator goes.
//
// ARGS: dma_bits=N, the DMA address mask's width (edu's dma_mask; 28 bits by default).
#include "Vedu_rtl.h"
#include "pcibench_model.h"
#include "verilated.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// Cycles simulated by every instance, for the benchmark (benches/model.rs).
static std::atomic<uint64_t> all_cycles{0};
extern "C" uint64_t edu_rtl_cycles(void) { return all_cycles.load(); }

namespace {

// A register access the design never answers in this many cycles is the design's bug.
constexpr int ANSWER_WITHIN = 1000;
// Cycles one advance runs at most, so pcibench's next access waits little.
constexpr int BURST = 1024;

struct Model {
    const pcibench_host *host;
    VerilatedContext ctx;
    Vedu_rtl top{&ctx};
    bool irq = false;

    // One clock cycle, then the bus-master beat the design holds, if any (answered once, with
    // dma_ready high for the next cycle).
    void tick() {
        top.clk = 0;
        top.eval();
        top.clk = 1;
        top.eval();
        all_cycles.fetch_add(1, std::memory_order_relaxed);
        if (top.dma_valid && !top.dma_ready) {
            uint8_t data[8];
            if (top.dma_write) {
                uint64_t w = top.dma_wdata;
                std::memcpy(data, &w, sizeof data);
                host->dma_write(host->ctx, top.dma_addr, data, top.dma_len);
            } else {
                // A fault leaves all-ones in data, as pcibench fills it.
                host->dma_read(host->ctx, top.dma_addr, data, top.dma_len);
                uint64_t r = 0;
                std::memcpy(&r, data, top.dma_len);
                top.dma_rdata = r;
            }
            top.dma_ready = 1;
        } else {
            top.dma_ready = 0;
        }
        if (top.irq != irq) {
            irq = top.irq;
            if (irq)
                host->raise_irq(host->ctx, 0);
            else
                host->lower_irq(host->ctx, 0);
        }
    }

    void reset() {
        top.rst = 1;
        for (int i = 0; i < 4; i++)
            tick();
        top.rst = 0;
        tick();
    }

    // One request on the host port: PCIBENCH_OK with the answer, or UNSUPPORTED.
    int access(bool write, uint32_t bar, uint64_t offset, uint32_t width, uint64_t *value) {
        top.req_valid = 1;
        top.req_write = write;
        top.req_bar = bar;
        top.req_addr = offset & 0xfffff;
        top.req_size = width;
        top.req_wdata = write ? *value : 0;
        for (int i = 0; i < ANSWER_WITHIN; i++) {
            tick();
            if (top.rsp_valid) {
                top.req_valid = 0;
                if (!write)
                    *value = top.rsp_rdata;
                return top.rsp_error ? PCIBENCH_UNSUPPORTED : PCIBENCH_OK;
            }
        }
        top.req_valid = 0;
        char line[120];
        std::snprintf(line, sizeof line, "edu_rtl: no answer to BAR%u+%#llx within %d cycles", bar,
                      (unsigned long long)offset, ANSWER_WITHIN);
        host->log(host->ctx, line);
        return PCIBENCH_ABORT;
    }

    bool busy() const { return top.busy; }
};

} // namespace

extern "C" {

uint32_t pcibench_model_abi_version(void) { return PCIBENCH_MODEL_ABI_VERSION; }

void *pcibench_model_create(const char *args, const pcibench_host *host, char *error, size_t error_len) {
    unsigned bits = 28;
    if (const char *a = std::strstr(args, "dma_bits=")) {
        bits = std::strtoul(a + 9, nullptr, 0);
        if (bits < 1 || bits > 64) {
            std::snprintf(error, error_len, "edu_rtl: dma_bits=%u: give 1 to 64", bits);
            return nullptr;
        }
    }
    Model *m = new Model;
    m->host = host;
    m->top.dma_mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    m->reset();
    return m;
}

int pcibench_model_describe(void *, pcibench_device *d) {
    d->vendor_id = 0x1234; // edu's ids: pcibench's edu engine drives it
    d->device_id = 0x11e8;
    d->subsystem_vendor_id = 0x1234;
    d->subsystem_id = 0x0001;
    d->class_code = 0xff0000;
    d->revision = 0x10;
    // Behind a PCIe hard IP, as an FPGA design is: a PCI Express endpoint, Gen2 x4.
    d->link_gen = 2;
    d->link_width = 4;
    d->intx = 1;
    d->bars[0].size = 1 << 20; // the registers, as edu
    d->bars[2].size = 16 << 10; // RAM for PIO
    d->msi_vectors = 1;
    d->name = "edu-rtl (Verilog under Verilator)";
    return PCIBENCH_OK;
}

int pcibench_model_bar_read(void *m, uint32_t bar, uint64_t offset, uint32_t width, uint64_t *value) {
    return static_cast<Model *>(m)->access(false, bar, offset, width, value);
}

int pcibench_model_bar_write(void *m, uint32_t bar, uint64_t offset, uint32_t width, uint64_t value) {
    return static_cast<Model *>(m)->access(true, bar, offset, width, &value);
}

uint64_t pcibench_model_advance(void *p, uint64_t) {
    Model *m = static_cast<Model *>(p);
    for (int i = 0; i < BURST && m->busy(); i++)
        m->tick();
    return m->busy() ? 0 : PCIBENCH_IDLE;
}

void pcibench_model_reset(void *m) { static_cast<Model *>(m)->reset(); }

void pcibench_model_destroy(void *p) {
    Model *m = static_cast<Model *>(p);
    m->top.final();
    delete m;
}

} // extern "C"
