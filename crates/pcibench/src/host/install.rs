//! How pcibench is installed for users: the root-owned copy with a file capability that every hint
//! names (`doctor`, the no-IOMMU EPERM hint, the set-id refusal).

/// The safe way to let users run pcibench with CAP_SYS_RAWIO: a root-owned copy in a root-owned
/// directory (nobody else can rewrite it; the kernel keeps a file capability across a write
/// through a shared mapping by the file's owner), with the capability on that copy.
pub fn install_line(exe: &std::path::Path) -> String {
    format!(
        "sudo install -o root -g root -m 0755 {} /usr/local/bin/pcibench && sudo setcap cap_sys_rawio=ep /usr/local/bin/pcibench",
        exe.display()
    )
}

/// This executable's path, for hints ("/path/to/pcibench" when it cannot be told).
pub fn exe_path() -> std::path::PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(&p).ok().or(Some(p)))
        .unwrap_or_else(|| std::path::PathBuf::from("/path/to/pcibench"))
}
