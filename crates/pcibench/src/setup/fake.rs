//! The fake kernel of the unit tests that change a device through `System` (`reset`, `link`):
//! each test's double says what its writes and commands do; the rest is one inert host (files
//! root's, mode 0600; ownership changes accepted; no waiting; never the host's own commands).

use super::System;
use crate::Result;
use std::path::Path;
use std::time::Duration;

/// A test's fake kernel: what it does with writes and commands. `System` comes with it.
pub(crate) trait FakeKernel: Send + Sync {
    fn write(&self, path: &Path, data: &str) -> std::io::Result<()>;
    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()>;
    fn run(&self, program: &str, args: &[&str]) -> Result<()>;
}

impl<K: FakeKernel> System for K {
    fn write(&self, path: &Path, data: &str) -> std::io::Result<()> {
        FakeKernel::write(self, path, data)
    }
    fn write_at(&self, path: &Path, offset: u64, data: &[u8]) -> std::io::Result<()> {
        FakeKernel::write_at(self, path, offset, data)
    }
    fn run(&self, program: &str, args: &[&str]) -> Result<()> {
        FakeKernel::run(self, program, args)
    }
    fn owner(&self, _: &Path) -> std::io::Result<(u32, u32, u32)> {
        Ok((0, 0, 0o600))
    }
    fn chown(&self, _: &Path, _: u32, _: u32) -> std::io::Result<()> {
        Ok(())
    }
    fn chmod(&self, _: &Path, _: u32) -> std::io::Result<()> {
        Ok(())
    }
    fn sleep(&self, _: Duration) {}
    /// A fixture root's module state is not the kernel's: setup runs no modprobe for it.
    fn reaches_host(&self) -> bool {
        false
    }
}
