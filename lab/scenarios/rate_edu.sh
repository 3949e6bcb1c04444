# pcibench latency --dma --rate on edu through VFIO (type1 on q35-iommu, no-IOMMU on pc): transfers submitted
# open loop on a schedule against the real kernel. edu runs one transfer at a time and completes it on its 100 ms
# timer, so it cannot post ahead: at 5 a second (one due every 200 ms) the schedule is kept, none is late and each
# latency is edu's own; at 20 a second (every 50 ms, past the 10 a second edu keeps) each transfer waits for the one
# before, its latency from its due time growing by 50 ms a transfer, and those waits are the card's (not counted
# late: the host posted each as soon as edu was free). The host side checks the JSON: the schedule kept to within
# a quarter interval, late posts counted where a post lagged, the waits charged from due time.
# machines: pc q35-iommu
# timeout: 120
. /lab/lib.sh
e=$(find_dev 1234:11e8)
trap 'unbind "$e"' EXIT
bind_vfio "$e"
echo 8 >/proc/sys/vm/nr_hugepages
emit edu_rate pcibench latency "$e" --samples 10 --dma --rate 5,20 --size 64 --dir h2c --dma-samples 6 --dma-bits 32 --allow-dma --json
# The table: one line per offered rate, the loop's own cost, and the engine named as bounded by its closed loop.
expect_out '^c2h +64 B +1 +5\.00 /s .* [0-9]+ +0  ok' pcibench latency "$e" --samples 10 --dma --rate 5 --size 64 --dir c2h --dma-samples 3 --dma-bits 32 --allow-dma
expect_out 'each transfer waited for the one before' pcibench latency "$e" --samples 10 --dma --rate 5 --size 64 --dir h2c --dma-samples 2 --dma-bits 32 --allow-dma
# What an open loop cannot do on edu is refused in one line (exit 2).
expect_rc 2 '--rate reaps completions by polling' pcibench latency "$e" --dma --irq --rate 5 --dma-bits 32 --allow-dma
expect_rc 2 '--queues applies to engines with queues' pcibench dma "$e" --rate 5 --queues 2 --dma-bits 32 --allow-dma
