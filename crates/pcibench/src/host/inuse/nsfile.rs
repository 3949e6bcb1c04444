//! What a namespace file is: its inode, which names the namespace (fs/nsfs.c: a /proc/PID/ns link
//! reads `net:[INODE]`, ns_get_name; a bind mount of one is an nsfs file with that inode). Below
//! `procs`, `namespaces` and `kernel`, which all ask it.

use crate::host::Host;
use std::io::ErrorKind;
use std::path::Path;

/// `net:[4026531840]` (or `mnt:[...]`): the namespace's inode.
pub(crate) fn ns_inode_of(link: &str) -> Option<u64> {
    let (_, rest) = link.trim().split_once(":[")?;
    rest.strip_suffix(']')?.parse().ok()
}

/// The inode of namespace file `p` (a /proc/PID/ns link, or a bind mount under /run/netns). The real
/// host: the link's text, else the file's own inode (nsfs). A fixture: its link's text or first line.
pub(crate) fn ns_inode(host: &Host, p: &Path) -> std::io::Result<u64> {
    let bad = || std::io::Error::new(ErrorKind::InvalidData, format!("{} is not a namespace", p.display()));
    match std::fs::read_link(p) {
        Ok(t) => return ns_inode_of(&t.to_string_lossy()).ok_or_else(bad),
        Err(e) if e.raw_os_error() != Some(rustix::io::Errno::INVAL.raw_os_error()) => return Err(e),
        Err(_) => {}
    }
    if host.is_real() {
        let st = rustix::fs::statx(rustix::fs::CWD, p, rustix::fs::AtFlags::empty(), rustix::fs::StatxFlags::INO)?;
        return Ok(st.stx_ino);
    }
    let text = crate::file::read_string(p, 4096)?;
    ns_inode_of(text.lines().next().unwrap_or("")).ok_or_else(bad)
}
