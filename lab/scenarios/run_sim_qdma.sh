# The QDMA driver on the sim-qdma card inside a guest (TCG, a real kernel's /proc/meminfo): info
# names the QDMA, the queue matrix (1,2,4,8 queues x 64 B..1 MiB) and both directions at once
# verify every row (a mismatch would exit 1), random packets in a window sized to the guest's
# memory verify, the suite picks QDMA by its config BAR, and bad input is one line, exit 2.
# machines: pc virt-smmuv3
# timeout: 300
. /lab/lib.sh
expect_out 'QDMA soft IP \(3\.x\), Vivado 2019\.2' pcibench info sim-qdma
expect_out '### Sequential throughput \(GB/s\): C2H' pcibench dma sim-qdma --engine qdma --queues 1,2,4,8 --size 64..1M --total 2M
expect_out '^\| 1048576 \|' pcibench dma sim-qdma --engine qdma --queues 1,2,4,8 --size 64K..1M --dir bidir --total 4M --format seed
expect_out 'random window [0-9]+ MiB \(1 GiB would take more than half' pcibench dma sim-qdma --pattern random --queues 1,2,4,8 --size 64..4K --total 1M
expect_out 'Test pattern pass \(16 rows verified\)' pcibench dma sim-qdma --pattern random --window 16M --dir all --queues 1,8 --size 64,4K --total 1M --format seed
expect_out '^== DMA' pcibench run sim-qdma --total 2M
expect_err '^pcibench: --ring-size 1000 is not in the card.s global ring-size table' pcibench dma sim-qdma --ring-size 1000
expect_err '^pcibench: --queues 4096 is more than function 0 has' pcibench dma sim-qdma --queues 4096
expect_err '^pcibench: --window 1 GiB needs 2 GiB of host buffers' pcibench dma sim-qdma --pattern random --window 1G
expect_err '^pcibench: sim \(10ee:7024\) has no qdma engine' pcibench dma sim --engine qdma
