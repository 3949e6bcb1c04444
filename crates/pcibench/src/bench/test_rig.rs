//! Test rigs the runners' tests share (test-only): a simulated card with its engine opened as a
//! measuring command opens it, an engine that makes the card fall off the bus mid-run, and the
//! sampling loop's inputs.

use super::sample::clock::Clock;
use super::sample::sampler::{Progress, Sampling};
use crate::access::sim::SimDevice;
use crate::device::{Device, Target};
use crate::direction::Direction;
use crate::dma::buffers::sim::SimAllocator;
use crate::dma::engines::{self, EngineOptions};
use crate::dma::{DmaBuffer, Engine, Transfer};
use crate::pci::DeviceInfo;
use crate::sim::SimId;
use crate::Result;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A simulated card and the engine the registry finds on it, opened on the card's own host
/// memory: what `dma` and `latency` drive.
pub struct SimRig {
    pub dev: SimDevice,
    pub device: Device,
    pub alloc: SimAllocator,
    pub engine: Box<dyn Engine>,
}

impl SimRig {
    /// The built-in card `name` ("sim", "sim-qdma", ...) with its engine opened as `opts` asks.
    pub fn open(name: &str, opts: &EngineOptions) -> SimRig {
        let id = SimId::from_name(name).unwrap();
        SimRig::on(SimDevice::open(id).unwrap(), id.spec().info(), opts)
    }

    /// A card the test built itself (`SimDevice::from_card`), described by `info`.
    pub fn on(dev: SimDevice, info: DeviceInfo, opts: &EngineOptions) -> SimRig {
        let (driver, found) = engines::resolve(None, &info, &dev).unwrap();
        let alloc = SimAllocator::new(dev.host_map().clone());
        let engine = driver.open(&found, &info, &dev, &alloc, opts).unwrap().engine;
        SimRig { dev, device: Device::new(Target::SIM, info), alloc, engine }
    }
}

/// The sampling loop's inputs with the timer's cost measured on `clock` and no link-health check.
pub fn sampling<'a>(clock: &'a dyn Clock, stop: &'a AtomicBool, progress: &'a mut dyn Progress) -> Sampling<'a> {
    Sampling::new(clock, stop, progress, None)
}

/// A card's engine, with the card falling off the bus when the second C2H transfer (or batch) is
/// prepared: the first reads back the H2C row to verify it, so the H2C row is measured whole
/// before the card goes.
pub struct FallsOff<'a> {
    pub inner: &'a mut dyn Engine,
    pub dev: &'a SimDevice,
    pub c2h: u32,
    pub stops: u32,
}

impl<'a> FallsOff<'a> {
    pub fn new(inner: &'a mut dyn Engine, dev: &'a SimDevice) -> FallsOff<'a> {
        FallsOff { inner, dev, c2h: 0, stops: 0 }
    }
}

impl Engine for FallsOff<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn card_size(&self) -> u64 {
        self.inner.card_size()
    }
    fn max_transfer(&self) -> u64 {
        self.inner.max_transfer()
    }
    fn prepare(&mut self, buf: &dyn DmaBuffer, t: &Transfer) -> Result<()> {
        if t.dir == Direction::C2h {
            self.c2h += 1;
            if self.c2h == 2 {
                self.dev.fall_off_bus();
            }
        }
        self.inner.prepare(buf, t)
    }
    fn run(&mut self, timeout: Duration) -> Result<()> {
        self.inner.run(timeout)
    }
    fn stop(&mut self) -> Result<String> {
        self.stops += 1;
        self.inner.stop()
    }
}
