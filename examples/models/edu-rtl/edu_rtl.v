// An edu-compatible PCI function in RTL (QEMU docs/specs/edu.rst's register map), written here
// for pcibench's Verilator example: the register block in BAR0 (identification, liveness,
// factorial, interrupt status/raise/acknowledge, DMA source/destination/count/command), a DMA
// engine moving data between host memory and a 4 KiB buffer at device address 0x40000 through a
// bus-master port, one interrupt request line, and 16 KiB of RAM behind BAR2 for PIO.
//
// Host side (the wrapper drives it from pcibench's BAR accesses): one request at a time on
// req_*, answered by a one-cycle rsp_valid (rsp_error: nothing decodes it, an Unsupported
// Request). Bus master: the engine holds dma_valid with one beat (1-8 bytes, never crossing an
// 8-byte boundary of host memory) until dma_ready; a read beat's data comes with dma_ready.
// irq is a level: high while the interrupt status is not 0; busy: the DMA or the factorial runs.
module edu_rtl (
    input  wire        clk,
    input  wire        rst,
    input  wire        req_valid,
    input  wire        req_write,
    input  wire [2:0]  req_bar,
    input  wire [19:0] req_addr,
    input  wire [3:0]  req_size,
    input  wire [63:0] req_wdata,
    output reg         rsp_valid,
    output reg         rsp_error,
    output reg  [63:0] rsp_rdata,
    output reg         dma_valid,
    output reg         dma_write,
    output reg  [63:0] dma_addr,
    output reg  [3:0]  dma_len,
    output reg  [63:0] dma_wdata,
    input  wire        dma_ready,
    input  wire [63:0] dma_rdata,
    input  wire [63:0] dma_mask,
    output wire        irq,
    output wire        busy
);
    localparam [31:0] IDENT = 32'h010000ed;
    localparam [63:0] BUF_ADDR = 64'h40000;
    localparam [63:0] BUF_SIZE = 64'd4096;

    reg [31:0] liveness, fact, status, irq_status;
    reg [63:0] src, dst, count, cmd;
    reg [7:0]  dmabuf [0:4095];
    reg [63:0] ram [0:2047];

    // The DMA engine: bytes done so far, and whether the programmed range is the buffer's.
    reg [63:0] done;
    wire       to_ram = cmd[1];
    wire [63:0] card = to_ram ? src : dst;
    wire [63:0] host = ((to_ram ? dst : src) & dma_mask) + done;
    wire       in_range = card >= BUF_ADDR && count <= BUF_SIZE && card - BUF_ADDR <= BUF_SIZE - count;
    wire [11:0] at = card[11:0] + done[11:0];
    wire [63:0] left = count - done;
    wire [3:0]  room = 4'd8 - {1'b0, host[2:0]};
    wire [3:0]  beat = left < {60'd0, room} ? left[3:0] : room;

    // The factorial: one multiplication a cycle, into fact_acc, counting fact_n down.
    reg [31:0] fact_n, fact_acc;

    assign irq = irq_status != 0;
    // An engine at work: the simulation must be clocked even with no host request.
    assign busy = cmd[0] || status[0];

    wire in_dma_regs = req_addr >= 20'h80;
    wire size_ok = in_dma_regs ? (req_size == 4 || req_size == 8) : req_size == 4;
    wire [63:0] wval = req_size == 4 ? {32'd0, req_wdata[31:0]} : req_wdata;
    wire [10:0] word = req_addr[13:3];
    wire [5:0]  shift = {req_addr[2:0], 3'b000};

    integer i;

    // What finishes this cycle, and the interrupt status bits set and cleared by the host and
    // the engines together, so that none is lost when two land in one cycle.
    wire host_write = req_valid && !rsp_valid && req_write && req_bar == 3'd0 && size_ok;
    wire fact_finish = status[0] && fact_n == 0;
    wire dma_finish = cmd[0] && (!in_range || done == count);
    wire [31:0] irq_set = (host_write && req_addr == 20'h60 ? wval[31:0] : 32'd0)
                        | (fact_finish && status[7] ? 32'h1 : 32'd0)
                        | (dma_finish && cmd[2] ? 32'h100 : 32'd0);
    wire [31:0] irq_clr = host_write && req_addr == 20'h64 ? wval[31:0] : 32'd0;

    always @(posedge clk) begin
        rsp_valid <= 0;
        rsp_error <= 0;
        if (rst) begin
            liveness <= 0; fact <= 0; status <= 0; irq_status <= 0;
            src <= 0; dst <= 0; count <= 0; cmd <= 0; done <= 0;
            dma_valid <= 0; dma_write <= 0; dma_addr <= 0; dma_len <= 0; dma_wdata <= 0;
            fact_n <= 0; fact_acc <= 0; rsp_rdata <= 0;
        end else begin
            // One host request, answered in the cycle after it is seen.
            if (req_valid && !rsp_valid) begin
                rsp_valid <= 1;
                rsp_rdata <= 64'hffff_ffff_ffff_ffff;
                if (req_bar == 3'd2) begin
                    if (req_write) begin
                        for (i = 0; i < 8; i = i + 1)
                            if (i < {28'd0, req_size}) ram[word][shift + 6'(8 * i) +: 8] <= req_wdata[8 * i +: 8];
                    end else begin
                        rsp_rdata <= ram[word] >> shift;
                    end
                end else if (req_bar != 3'd0 || !size_ok) begin
                    rsp_error <= 1;
                end else if (req_write) begin
                    case (req_addr)
                        20'h04: liveness <= ~wval[31:0];
                        20'h08: if (!status[0]) begin
                            fact <= wval[31:0]; fact_n <= wval[31:0]; fact_acc <= 1; status[0] <= 1;
                        end
                        20'h20: status[7] <= wval[7];
                        20'h60, 20'h64: ;  // irq_set, irq_clr
                        20'h80: if (!cmd[0]) src <= wval;
                        20'h88: if (!cmd[0]) dst <= wval;
                        20'h90: if (!cmd[0]) count <= wval;
                        20'h98: if (!cmd[0] && wval[0]) begin cmd <= wval; done <= 0; end
                        default: rsp_error <= 1;
                    endcase
                end else begin
                    case (req_addr)
                        20'h00: rsp_rdata <= {32'd0, IDENT};
                        20'h04: rsp_rdata <= {32'd0, liveness};
                        20'h08: rsp_rdata <= {32'd0, fact};
                        20'h20: rsp_rdata <= {32'd0, status};
                        20'h24: rsp_rdata <= {32'd0, irq_status};
                        20'h80: rsp_rdata <= req_size == 4 ? {32'd0, src[31:0]} : src;
                        20'h88: rsp_rdata <= req_size == 4 ? {32'd0, dst[31:0]} : dst;
                        20'h90: rsp_rdata <= req_size == 4 ? {32'd0, count[31:0]} : count;
                        20'h98: rsp_rdata <= req_size == 4 ? {32'd0, cmd[31:0]} : cmd;
                        default: rsp_error <= 1;
                    endcase
                end
            end

            // The factorial, a multiplication a cycle; its interrupt when asked for.
            if (status[0]) begin
                if (fact_finish) begin
                    fact <= fact_acc;
                    status[0] <= 0;
                end else begin
                    fact_acc <= fact_acc * fact_n;
                    fact_n <= fact_n - 1;
                end
            end

            // The DMA engine: one beat in flight; the last one clears Start and raises 0x100.
            if (cmd[0]) begin
                if (dma_finish) begin
                    cmd[0] <= 0;
                    dma_valid <= 0;
                end else if (!dma_valid) begin
                    dma_valid <= 1;
                    dma_write <= to_ram;
                    dma_addr <= host;
                    dma_len <= beat;
                    for (i = 0; i < 8; i = i + 1)
                        dma_wdata[8 * i +: 8] <= dmabuf[at + 12'(i)];
                end else if (dma_ready) begin
                    dma_valid <= 0;
                    if (!to_ram)
                        for (i = 0; i < 8; i = i + 1)
                            if (i < {28'd0, dma_len}) dmabuf[at + 12'(i)] <= dma_rdata[8 * i +: 8];
                    done <= done + {60'd0, dma_len};
                end
            end
            irq_status <= (irq_status & ~irq_clr) | irq_set;
        end
    end
endmodule
