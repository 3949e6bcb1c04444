//! Smoke test of the real access paths, run inside the QEMU lab guests (lab/README.md):
//!
//!   vfio_smoke edu [ADDR]       edu through VFIO (type1 on q35-iommu, no-IOMMU on pc): ID register,
//!                               liveness, syscall I/O, WC refusal, DMA both ways verified, MSI
//!   vfio_smoke ivshmem [ADDR]   ivshmem BAR2 through sysfs, uncached and write-combining
//!   vfio_smoke hold ADDR SECS   open a device and keep it open (to show EBUSY to a second process)
//!   vfio_smoke open ADDR        just open the device on its default path (to show access errors)
//!   vfio_smoke alloc ADDR SIZE  open it and allocate one DMA buffer of SIZE (memlock, segments)
//!
//! Every step prints one line; the exit status is 1 on the first failure, with the error.

use pcibench::access::vfio::VfioDevice;
use pcibench::access::{open_device, DeviceAccess, IoMode, Mapping};
use pcibench::dma::engines::edu::{EduEngine, EDU_MAX_TRANSFER};
use pcibench::dma::{BufferSource, Direction, Engine, Transfer};
use pcibench::host::Host;
use pcibench::mmio::Width;
use pcibench::pci::{self, DeviceInfo, IdFilter, PciAddress};
use pcibench::{Error, Result};
use std::time::{Duration, Instant};

fn find(host: &Host, arg: Option<&String>, vendor: u16, device: u16) -> Result<DeviceInfo> {
    if let Some(a) = arg {
        let addr: PciAddress = a.parse()?;
        return pci::sysfs::read_device(host, &addr);
    }
    let f = IdFilter { vendor: Some(vendor), device: Some(device) };
    pci::list(host, Some(f), None)?
        .into_iter()
        .find(|d| !d.simulated)
        .ok_or_else(|| Error::NoDevice(format!("{vendor:04x}:{device:04x}")))
}

fn check(what: &str, ok: bool, detail: String) -> Result<()> {
    if ok {
        println!("ok: {what}: {detail}");
        Ok(())
    } else {
        Err(Error::Verify(format!("{what}: {detail}")))
    }
}

/// A pattern that differs per run and per byte position.
fn pattern(seed: u64, buf: &mut [u8]) {
    let mut x = seed | 1;
    for b in buf {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

fn edu(host: &Host, arg: Option<&String>) -> Result<()> {
    let info = find(host, arg, 0x1234, 0x11e8)?;
    let addr: PciAddress = info.address.parse()?;
    println!("edu at {addr}, driver {}", info.driver.as_deref().unwrap_or("none"));
    {
        let dev = open_device(host, &info, None)?;
        println!("ok: open_device chose --via {}", dev.via());
    }
    let dev = VfioDevice::open(host, &addr, None)?;
    println!(
        "ok: VFIO group {} ({}), {} regions, reset {}",
        dev.group().number(),
        dev.group().node().display(),
        dev.device().num_regions(),
        if dev.device().can_reset() { "available" } else { "not offered" }
    );
    if let Some(i) = dev.container().iommu_info() {
        let r: Vec<String> = i.usable_ranges().iter().map(|r| format!("{:#x}-{:#x}", r.start, r.end)).collect();
        println!("ok: type1 IOMMU page sizes {:#x}, IOVA ranges {}", i.pgsizes.unwrap_or(0), r.join(" "));
    }
    let r0 = dev.device().region(0)?;
    println!(
        "ok: BAR0 region: size {:#x}, offset {:#x}, flags {:#x}, sparse {:?}",
        r0.size, r0.offset, r0.flags, r0.sparse
    );

    let mut ids = [0u8; 4];
    dev.config_read(0, &mut ids)?;
    let ids = u32::from_le_bytes(ids);
    check("config space through VFIO region 7", ids == 0x11e8_1234, format!("{ids:#010x}"))?;
    let bar = dev.open_bar(0, Mapping::Uc, IoMode::Mmap)?;
    let id = bar.read(0, Width::B32)?;
    check("ID register (mmap)", id == 0x0100_00ed, format!("{id:#010x}"))?;
    bar.write(4, Width::B32, 0x1234_5678)?;
    let live = bar.read(4, Width::B32)?;
    check("liveness (mmap)", live == !0x1234_5678u32 as u64, format!("wrote 0x12345678, read {live:#010x}"))?;

    let sys = dev.open_bar(0, Mapping::Uc, IoMode::Syscall)?;
    check("syscall region has no pointer", sys.ptr().is_none(), "ptr() is None".into())?;
    let id = sys.read(0, Width::B32)?;
    check("ID register (pread)", id == 0x0100_00ed, format!("{id:#010x}"))?;
    sys.write(4, Width::B32, 0xa5a5_0f0f)?;
    let live = sys.read(4, Width::B32)?;
    check("liveness (pwrite/pread)", live == !0xa5a5_0f0fu32 as u64, format!("read {live:#010x}"))?;
    let n = 4096;
    let t0 = Instant::now();
    let mut scratch = vec![0u8; n];
    sys.read_bulk(0, &mut scratch, Width::B32)?;
    let sys_us = t0.elapsed().as_secs_f64() * 1e6 / (n / 4) as f64;
    let t0 = Instant::now();
    bar.read_bulk(0, &mut scratch, Width::B32)?;
    let mm_us = t0.elapsed().as_secs_f64() * 1e6 / (n / 4) as f64;
    println!("ok: 32-bit reads of BAR0: {sys_us:.2} us each by pread, {mm_us:.2} us each by mmap (TCG guest)");

    match dev.open_bar(0, Mapping::Wc, IoMode::Mmap) {
        Err(e @ Error::Unsupported(_)) => println!("ok: WC refused: {e}"),
        Err(e) => return Err(e),
        Ok(_) => return Err(Error::Verify("VFIO granted a WC mapping".into())),
    }

    let bits = 32;
    let alloc = dev.dma_allocator(&BufferSource::Hugepage, bits)?;
    let cmd = dev.device().command()?;
    check("bus master enabled", cmd & 0x4 != 0, format!("command register {cmd:#06x}"))?;
    let buf = alloc.alloc(2 * 4096)?;
    println!(
        "ok: DMA buffer: {} bytes, {}, {:?} addressing, segments {:x?}",
        buf.len(),
        buf.describe(),
        buf.addressing(),
        buf.segments()
    );
    let mut engine = EduEngine::new(dev.open_bar(0, Mapping::Uc, IoMode::Mmap)?, bits)?;
    let len = EDU_MAX_TRANSFER as usize;
    // SAFETY: the buffer is 8 KiB of mapped memory owned by `buf`; no other reference exists and
    // the device only touches it during `run`, when this slice is not in use.
    let host_mem = unsafe { std::slice::from_raw_parts_mut(buf.as_ptr(), buf.len()) };
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7);
    pattern(seed, &mut host_mem[..len]);
    host_mem[4096..].fill(0);
    let expect = host_mem[..len].to_vec();

    let h2c = Transfer { dir: Direction::H2c, buf_offset: 0, card_addr: 0, len: len as u64 };
    engine.prepare(buf.as_ref(), &h2c)?;
    let t0 = Instant::now();
    engine.run(Duration::from_secs(10))?;
    let h2c_ms = t0.elapsed().as_secs_f64() * 1e3;
    let c2h = Transfer { dir: Direction::C2h, buf_offset: 4096, card_addr: 0, len: len as u64 };
    engine.prepare(buf.as_ref(), &c2h)?;
    let t0 = Instant::now();
    engine.run(Duration::from_secs(10))?;
    let c2h_ms = t0.elapsed().as_secs_f64() * 1e3;
    let got = &host_mem[4096..4096 + len];
    let bad = got.iter().zip(&expect).position(|(a, b)| a != b);
    check(
        "edu DMA h2c then c2h",
        bad.is_none(),
        match bad {
            None => format!("{len} bytes verified (h2c {h2c_ms:.0} ms, c2h {c2h_ms:.0} ms)"),
            Some(i) => format!("first mismatch at {i:#x}: expected {:#04x}, found {:#04x}", expect[i], got[i]),
        },
    )?;
    match engine.prepare(buf.as_ref(), &Transfer { len: 4096, ..h2c }) {
        Err(e) => println!("ok: a 4096-byte edu transfer is refused: {e}"),
        Ok(()) => return Err(Error::Verify("a 4096-byte edu transfer was accepted".into())),
    }
    drop(engine);
    drop(buf);

    // MSI: edu raises its interrupt when 0x60 is written (hw/misc/edu.c edu_raise_irq).
    let msi = dev.enable_msi()?;
    bar.write(0x60, Width::B32, 0x1)?;
    let n = msi.wait(Duration::from_secs(5))?;
    let status = bar.read(0x24, Width::B32)?;
    bar.write(0x64, Width::B32, status)?;
    check("MSI through an eventfd", n >= 1, format!("{n} interrupt(s), irq status {status:#x} acknowledged"))?;
    drop(msi);
    drop(sys);
    drop(bar);
    match dev.reset() {
        Ok(()) => println!("ok: VFIO_DEVICE_RESET done"),
        Err(e) => println!("ok: reset not available: {e}"),
    }
    Ok(())
}

fn ivshmem(host: &Host, arg: Option<&String>) -> Result<()> {
    let info = find(host, arg, 0x1af4, 0x1110)?;
    println!("ivshmem at {}, driver {}", info.address, info.driver.as_deref().unwrap_or("none"));
    let dev = open_device(host, &info, None)?;
    println!("ok: open_device chose --via {}", dev.via());
    let mut ids = [0u8; 4];
    dev.config_read(0, &mut ids)?;
    let ids = u32::from_le_bytes(ids);
    check("config space through sysfs", ids == 0x1110_1af4, format!("{ids:#010x}"))?;
    match dev.open_bar(0, Mapping::Wc, IoMode::Mmap) {
        Err(e @ Error::Unsupported(_)) => println!("ok: BAR0 WC refused: {e}"),
        Err(e) => return Err(e),
        Ok(_) => return Err(Error::Verify("BAR0 (non-prefetchable) was mapped WC".into())),
    }
    match dev.open_bar(2, Mapping::Uc, IoMode::Syscall) {
        Err(e) => println!("ok: syscall I/O refused on sysfs: {e}"),
        Ok(_) => return Err(Error::Verify("sysfs gave syscall I/O on a memory BAR".into())),
    }
    let uc = dev.open_bar(2, Mapping::Uc, IoMode::Mmap)?;
    let wc = dev.open_bar(2, Mapping::Wc, IoMode::Mmap)?;
    println!("ok: BAR2 mapped uc and wc, {} bytes", uc.len());
    let first = uc.read(0, Width::B32)?;
    println!("ok: BAR2 +0 reads {first:#010x} (host_setup wrote 0x600df00d)");
    // Words written through WC read back through UC and the other way round.
    for (i, v) in [0x1122_3344_5566_7788u64, 0x99aa_bbcc_ddee_ff00].iter().enumerate() {
        wc.write(0x200 + 8 * i as u64, Width::B64, *v)?;
    }
    let _ = wc.read(0x200, Width::B64)?; // a read drains the WC buffers
    let a = uc.read(0x200, Width::B64)?;
    check("WC write, UC read", a == 0x1122_3344_5566_7788, format!("{a:#018x}"))?;
    uc.write(0x300, Width::B32, 0xcafe_babe)?;
    let b = wc.read(0x300, Width::B32)?;
    check("UC write, WC read", b == 0xcafe_babe, format!("{b:#010x}"))?;
    let n = 256 * 1024;
    let mut data = vec![0u8; n];
    pattern(42, &mut data);
    for (name, r) in [("uc", &uc), ("wc", &wc)] {
        let t0 = Instant::now();
        r.write_bulk(0x1000, &data, Width::B64)?;
        let w = t0.elapsed().as_secs_f64();
        let mut back = vec![0u8; n];
        let t0 = Instant::now();
        r.read_bulk(0x1000, &mut back, Width::B64)?;
        let rd = t0.elapsed().as_secs_f64();
        check(
            &format!("{name} 256 KiB write+read verified"),
            back == data,
            format!(
                "write {:.1} MB/s, read {:.1} MB/s (64-bit volatile, TCG guest)",
                n as f64 / w / 1e6,
                n as f64 / rd / 1e6
            ),
        )?;
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let host = Host::from_env();
    let r = match args.get(1).map(String::as_str) {
        Some("edu") => edu(&host, args.get(2)),
        Some("ivshmem") => ivshmem(&host, args.get(2)),
        Some("open") | Some("hold") | Some("alloc") if args.len() > 2 => (|| {
            let addr: PciAddress = args[2].parse()?;
            let info = pci::sysfs::read_device(&host, &addr)?;
            let dev: Box<dyn DeviceAccess> = open_device(&host, &info, None)?;
            println!("ok: opened {addr} via {}", dev.via());
            if args[1] == "alloc" {
                let size = pcibench::units::parse_size(args.get(3).map(String::as_str).unwrap_or("4K"))?;
                let alloc = dev.dma_allocator(&BufferSource::Heap, 64)?;
                let buf = alloc.alloc(size as usize)?;
                let segs = buf.segments();
                println!(
                    "ok: {} bytes, {}, {} segment(s), largest {} bytes, first {:x?}",
                    buf.len(),
                    buf.describe(),
                    segs.len(),
                    segs.iter().map(|s| s.len).max().unwrap_or(0),
                    segs.first()
                );
            }
            if args[1] == "hold" {
                let secs = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
                std::thread::sleep(Duration::from_secs(secs));
            }
            Ok(())
        })(),
        _ => Err(Error::usage("usage: vfio_smoke edu|ivshmem [ADDR] | open ADDR | hold ADDR SECS | alloc ADDR SIZE")),
    };
    if let Err(e) = r {
        eprintln!("vfio_smoke: {e}");
        std::process::exit(1);
    }
}
