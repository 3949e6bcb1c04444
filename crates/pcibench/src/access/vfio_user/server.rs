//! `pcibench serve`: a simulated card as a vfio-user server, so the vfio-user path (region info,
//! sparse mmap, DMA_MAP of the client's memory, region messages) runs across a real process
//! boundary, for pcibench's own client and for QEMU's `vfio-user-pci`. Its memory BARs are sealed
//! memfds the client may map; its register BARs answer messages; its engine's DMA reaches the
//! client's memory, mapped here (sealed memfds) or by DMA_READ/DMA_WRITE messages, registered in
//! the card's host map at the IOVAs the client chose.
//!
//! The card has one owner at a time, as vfio-pci gives a device one (a second open of its group
//! is EBUSY): while a client holds it, another is refused in one line naming the first (its pid,
//! from SO_PEERCRED), so no client can reach another's registers, interrupts or DMA buffers. The
//! card lives as long as the server: what one client writes the next one reads.
//!
//! What a client may cost is bounded: one session and at most `MAX_WAITING` refusals at a time
//! (a connection beyond them is closed at once), a deadline per whole message, `max_dma` bytes
//! and `session::MAX_DMA_MAPS` maps per client; accept(2) running out of descriptors or memory
//! pauses and logs instead of ending the server.

pub use super::card::{Card, ServeOptions, Serving, DEFAULT_MAX_DMA};
use super::guarded::Guarded;
use super::link::{Link, MESSAGE_TIMEOUT};
use super::session::{parse_proposal, Session};
use super::version;
use super::wire::{self, cmd, Put, Wait};
use crate::access::sim::SimDevice;
use crate::access::traced::TracedBar;
use crate::access::{BarRegion, DeviceAccess, IoMode, Mapping};
pub use crate::file::socket::Listening;
use crate::sim::nvram::model::NvramModelConfig;
use crate::sim::qdma::model::QdmaModelConfig;
use crate::sim::SimId;
use crate::trace::Tracer;
use crate::{Error, Result};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the server looks at its stop flag while waiting.
const TICK: Timespec = Timespec { tv_sec: 0, tv_nsec: 200_000_000 };
/// Refusals being sent at once (each reads the refused client's VERSION, within
/// `REFUSE_TIMEOUT`); a connection beyond these is closed without a word. Enough for a bench's
/// worth of clients started together on a busy host (a refusal is a thread and a descriptor for
/// at most REFUSE_TIMEOUT), few enough that a flood of connections costs little.
const MAX_WAITING: usize = 32;
/// How long a refused client has to send its VERSION.
const REFUSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long accept(2) pauses after running out of descriptors or memory.
const ACCEPT_PAUSE: Duration = Duration::from_millis(500);

/// Listen on `socket` (`file::socket::listen`: bound relative to its directory, under sudo as
/// the invoking user; anything already there refused; removed when the result is dropped, if it
/// is still the socket made).
pub fn bind(socket: &Path) -> Result<Listening> {
    let l = crate::file::socket::listen("--socket", socket)?;
    l.set_nonblocking(true).map_err(|e| Error::Refused(format!("cannot listen on {}: {e}", socket.display())))?;
    Ok(l)
}

/// Serve a fresh `card` on `listener` until `stop` is set (or, with `once`, the first client
/// leaves). `log` gets one line per event (a client connected, left, was refused, sent garbage).
pub fn serve(
    listener: &UnixListener,
    card: SimId,
    opts: ServeOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> Result<()> {
    serve_on(listener, (build(card, &opts)?, Serving::Card(card)), opts, stop, log, Taps::default())
}

/// `serve` of a device the caller built: a user's model (`pcibench serve --model`).
pub fn serve_device(
    listener: &UnixListener,
    dev: SimDevice,
    serving: Serving,
    opts: ServeOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
) -> Result<()> {
    serve_on(listener, (dev, serving), opts, stop, log, Taps::default())
}

/// `serve`, with every access a client makes to the card's BARs and config space written to `trace`
/// (`pcibench serve --trace`): what a driver in a guest did, register by register, beside what its
/// source says it does.
pub fn serve_traced(
    listener: &UnixListener,
    card: SimId,
    opts: ServeOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
    trace: Tracer,
) -> Result<()> {
    serve_on(
        listener,
        (build(card, &opts)?, Serving::Card(card)),
        opts,
        stop,
        log,
        Taps { irqs: None, trace: Some(trace) },
    )
}

/// The card to serve: `card` as built by default, a QDMA card built as the variant `opts` names, or
/// an NVRAM card with the memory (and as the conventional PCI function) it names.
fn build(card: SimId, opts: &ServeOptions) -> Result<SimDevice> {
    let spec = card.spec();
    let nvram = opts.nvram_size.is_some() || opts.nvram_conventional;
    let built = match (card.name(), opts.qdma_misc_cap, nvram) {
        (_, None, false) => return SimDevice::open(card),
        ("sim-qdma", Some(misc_cap), false) => {
            crate::sim::qdma::card::build(QdmaModelConfig { misc_cap, ..Default::default() })?.0
        }
        ("sim-qdma-st", Some(misc_cap), false) => {
            crate::sim::qdma::stream_card::build(QdmaModelConfig { misc_cap, ..Default::default() })?.0
        }
        ("sim-nvram", None, true) => {
            let d = NvramModelConfig::default();
            let card_size = opts.nvram_size.unwrap_or(d.card_size);
            crate::sim::nvram::card::build(NvramModelConfig {
                card_size,
                conventional_pci: opts.nvram_conventional,
                ..d
            })?
            .0
        }
        (other, qdma, _) => {
            let (flag, cards) = if qdma.is_some() {
                ("a QDMA variant (--qdma-ip)", "sim-qdma and sim-qdma-st")
            } else {
                ("a memory size or conventional PCI (--nvram-size, --conventional-pci)", "sim-nvram")
            };
            return Err(Error::usage(format!("{other}: {flag} applies to {cards} only")));
        }
    };
    Ok(SimDevice::from_card(spec.name(), &spec.info(), built))
}

/// Log the card's model violations beyond the first `*logged` (each once, as it appears).
fn log_violations(dev: &SimDevice, logged: &mut usize, log: &(dyn Fn(&str) + Sync)) {
    let all = dev.violations();
    for v in all.iter().skip(*logged) {
        log(&format!("model violation: {v}"));
    }
    *logged = all.len().max(*logged);
}

/// `serve`, with the interrupts taken from `irqs` instead of the card (a test's device whose
/// interrupts it raises itself).
#[cfg(test)]
pub(super) fn serve_irqs_from(
    listener: &UnixListener,
    card: SimId,
    stop: &AtomicBool,
    irqs: Arc<dyn DeviceAccess>,
) -> Result<()> {
    let taps = Taps { irqs: Some(irqs), trace: None };
    serve_on(listener, (SimDevice::open(card)?, Serving::Card(card)), ServeOptions::default(), stop, &|_| {}, taps)
}

/// Who a client is, from SO_PEERCRED.
fn peer(s: &UnixStream) -> String {
    match rustix::net::sockopt::socket_peercred(s) {
        Ok(c) => format!("pid {}, uid {}", c.pid.as_raw_nonzero(), c.uid.as_raw()),
        Err(_) => "pid unknown".into(),
    }
}

/// What a server may have besides its card: interrupts from elsewhere (a test's), a trace.
#[derive(Default)]
struct Taps {
    irqs: Option<Arc<dyn DeviceAccess>>,
    trace: Option<Tracer>,
}

fn serve_on(
    listener: &UnixListener,
    (dev, serving): (SimDevice, Serving),
    opts: ServeOptions,
    stop: &AtomicBool,
    log: &(dyn Fn(&str) + Sync),
    Taps { irqs, trace }: Taps,
) -> Result<()> {
    // Every BAR the device has (opening one it lacks is an error, so those are skipped), each
    // traced where the server traces.
    let bars: Vec<(u8, Box<dyn BarRegion>)> = (0..6)
        .filter_map(|i| dev.open_bar(i, Mapping::Uc, IoMode::Mmap).ok().map(|b| (i, b)))
        .map(|(i, bar)| {
            let bar: Box<dyn BarRegion> = match &trace {
                Some(t) => Box::new(TracedBar::new(bar, t.clone())),
                None => bar,
            };
            (i, bar)
        })
        .collect();
    let guarded = Guarded::of(&dev);
    let served = Card { serving, dev, bars, opts, irqs, guarded };
    // The sessions' own stop: the server's, or the end of the serve loop.
    let ending = Arc::new(AtomicBool::new(false));
    let waiting = AtomicUsize::new(0);
    let mut violations = 0;
    let result = std::thread::scope(|scope| {
        // The holder: who it is, its session's thread, and its connection (to see it hang up).
        let mut owner: Option<(String, std::thread::ScopedJoinHandle<'_, ()>, std::os::fd::OwnedFd)> = None;
        let mut served_one = false;
        let mut pause_logged = false;
        let result = loop {
            log_violations(&served.dev, &mut violations, log);
            if stop.load(Ordering::Relaxed) {
                break Ok(());
            }
            if owner.as_ref().is_some_and(|(_, t, _)| t.is_finished()) {
                if let Some((_, t, _)) = owner.take() {
                    let _ = t.join();
                }
                if opts.once && served_one {
                    break Ok(());
                }
            }
            // No `?` inside the scope: its threads end only once `ending` is set below.
            match readable(listener.as_fd()) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => break Err(e),
            }
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) => match Errno::from_io_error(&e) {
                    Some(Errno::AGAIN | Errno::INTR | Errno::CONNABORTED | Errno::PROTO) => continue,
                    // Out of descriptors or memory: the clients already served go on; new ones
                    // wait in the backlog until some are freed.
                    Some(Errno::MFILE | Errno::NFILE | Errno::NOMEM | Errno::NOBUFS) => {
                        if !pause_logged {
                            log(&format!("cannot accept a client ({e}): pausing until resources are freed"));
                            pause_logged = true;
                        }
                        std::thread::sleep(ACCEPT_PAUSE);
                        continue;
                    }
                    _ => break Err(Error::Device(format!("accepting a vfio-user client failed: {e}"))),
                },
            };
            pause_logged = false;
            let who = peer(&stream);
            if owner.as_ref().is_some_and(|(_, t, conn)| t.is_finished() || hung_up(conn)) {
                // The holder has closed its end (a command that just finished): its session is
                // ending, and the card is free once its teardown is done.
                if let Some((_, t, _)) = owner.take() {
                    let _ = t.join();
                }
                if opts.once {
                    break Ok(());
                }
            }
            if let Some((holder, _, _)) = &owner {
                // One owner: the newcomer is told who holds the card, and closed.
                if waiting.load(Ordering::Relaxed) >= MAX_WAITING {
                    log(&format!("closed a client ({who}) at once: {MAX_WAITING} refusals already in progress"));
                    continue;
                }
                waiting.fetch_add(1, Ordering::Relaxed);
                let (named, waiting) = (holder.clone(), &waiting);
                let spawned =
                    std::thread::Builder::new().name("vfio-user refuse".into()).spawn_scoped(scope, move || {
                        refuse(&stream, &named);
                        close_cleanly(&stream);
                        waiting.fetch_sub(1, Ordering::Relaxed);
                    });
                match spawned {
                    Ok(_) => log(&format!("refused a client ({who}): the card is held by a client ({holder})")),
                    Err(_) => {
                        waiting.fetch_sub(1, Ordering::Relaxed);
                        log(&format!("closed a client ({who}) at once: no thread to refuse it"));
                    }
                }
                continue;
            }
            log(&format!("a client connected ({who})"));
            let conn = match stream.as_fd().try_clone_to_owned() {
                Ok(c) => c,
                Err(e) => {
                    log(&format!("a client ({who}) was dropped: {e}"));
                    continue;
                }
            };
            let (served, ending, who2) = (&served, Arc::clone(&ending), who.clone());
            let spawned = std::thread::Builder::new()
                .name("vfio-user session".into())
                .spawn_scoped(scope, move || log(&session(served, stream, ending, &who2, log)));
            match spawned {
                Ok(t) => {
                    owner = Some((who, t, conn));
                    served_one = true;
                }
                Err(e) => log(&format!("a client ({who}) was dropped: no thread to serve it ({e})")),
            }
        };
        // The session ends at its next tick; its teardown runs before the scope returns.
        ending.store(true, Ordering::Relaxed);
        result
    });
    log_violations(&served.dev, &mut violations, log);
    if let Some(t) = &trace {
        if let Err(e) = t.finish(if result.is_ok() { "ok" } else { "error" }, None) {
            log(&format!("the trace is incomplete: {e}"));
        }
    }
    result
}

/// Said when a register access waited on the client's answer to the card's own DMA message.
const STALLED: &str = "a register access waited over a second for the client to answer the card's DMA_READ/DMA_WRITE \
(its memory was mapped without a descriptor): QEMU's vfio-user client answers those only while no vCPU waits on \
the device, so give QEMU shared guest memory (-object memory-backend-memfd,id=mem,size=SIZE,share=on -machine \
memory-backend=mem) and the card reaches it by mapping";

/// One client's session on `card`, to its end: the line the log gets.
fn session(card: &Card, stream: UnixStream, ending: Arc<AtomicBool>, who: &str, log: &(dyn Fn(&str) + Sync)) -> String {
    let link = Arc::new(Link::new(stream, ending));
    let mut s = Session::new(card, Arc::clone(&link), log, who);
    let why = s.run();
    let irq = s.routed.as_ref().map(|r| (r.describe(), r.lost.load(Ordering::Relaxed)));
    // The client's interrupts are torn down, its memory unreachable from now on.
    let (counts, mut notes, dma) = (s.counts, std::mem::take(&mut s.notes), s.dma_messages());
    drop(s);
    close_cleanly(&link.sock);
    // A session that ended badly after a stall: first among the notes, it is why the client went
    // (lab/findings.md 15). A slow answer that came is no news.
    if link.stalled.load(Ordering::Relaxed) && !matches!(why, Ok(()) | Err(wire::WireError::Stopped)) {
        notes.insert(0, STALLED.into());
    }
    let mut line = match why {
        Ok(()) | Err(wire::WireError::Stopped) => format!("a client disconnected ({who})"),
        Err(wire::WireError::Timeout) => format!(
            "a client was dropped ({who}): a message did not go through whole within {} s (the client sent part of \
             one and no more, or stopped reading the server's)",
            MESSAGE_TIMEOUT.as_secs()
        ),
        Err(e) => format!("a client was dropped ({who}): {e}"),
    };
    line += &format!(
        ": {} commands, {} posted (No_reply: handled, not answered), {} refused",
        counts.commands, counts.posted, counts.refused
    );
    if dma > 0 {
        line += &format!(", {dma} DMA_READ/DMA_WRITE sent");
    }
    if let Some((kind, lost)) = irq {
        line += &format!(", interrupts {kind} torn down ({lost} had no eventfd to go to)");
    }
    for n in notes.iter().take(4) {
        line += &format!("; {n}");
    }
    line
}

/// End a client's connection so that it reads an end of file, not a reset, and no request of its
/// is left waiting for its timeout. Linux resets a UNIX stream whose closing end left data unread
/// (net/unix/af_unix.c unix_release_sock: ECONNRESET to the peer), and QEMU 11's client aborts on
/// that read error (hw/vfio-user/proxy.c vfio_user_recv_hdr sets an error its channel already set:
/// error_setv's assertion; lab/findings.md 13); and at EOF QEMU does not fail a request already
/// sent, whose vCPU then waits out `x-msg-timeout`. So: receiving is shut first (a message the
/// client sends from now on fails at once with EPIPE: unix_stream_sendmsg checks the peer's
/// RCV_SHUTDOWN), the commands already queued are answered (ENODEV: the card is going), then
/// sending is shut (the client reads EOF), and the close leaves nothing unread. A server killed
/// outright cannot do this, and QEMU 11 may then abort.
pub(super) fn close_cleanly(s: &UnixStream) {
    let _ = s.shutdown(std::net::Shutdown::Read);
    let stop = || false;
    // Bounded: the queue holds only what came before the shutdown; a message begun but not
    // whole reads as an end, which ends the loop.
    for _ in 0..4096 {
        // Reading is shut, so an empty queue reads as an end at once: the idle limit is never
        // waited out (an idle limit of now would not even look).
        let wait = Wait {
            idle: Some(Instant::now() + Duration::from_millis(50)),
            whole: Duration::from_millis(200),
            stop: &stop,
        };
        match wire::recv(s, &wait) {
            Ok(Some(m)) if !m.header.is_reply() && !m.header.no_reply() => {
                let deadline = Some(Instant::now() + Duration::from_millis(200));
                if wire::send(s, m.header.error_reply(Errno::NODEV.raw_os_error()), &[], &[], deadline).is_err() {
                    break;
                }
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut buf = [0u8; 4096];
    for _ in 0..65536 {
        // Descriptors the client sent along are closed with the data (MSG_CTRUNC).
        match rustix::net::recv(s, &mut buf, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => return,
            Ok(_) | Err(Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

/// Tell a client that arrived while the card is held who holds it: its VERSION answered with
/// EBUSY, or, for a pcibench client (which proposed the `pcibench` key), with the holder named in
/// the reply's `pcibench.busy`; then the connection is closed.
fn refuse(s: &UnixStream, holder: &str) {
    let wait = Wait { idle: Some(Instant::now() + REFUSE_TIMEOUT), whole: REFUSE_TIMEOUT, stop: &|| false };
    let Ok(Some(m)) = wire::recv(s, &wait) else { return };
    if m.header.command != cmd::VERSION || m.header.no_reply() {
        return;
    }
    let deadline = Some(Instant::now() + MESSAGE_TIMEOUT.min(REFUSE_TIMEOUT));
    let proposed = m.payload.get(4..).map(parse_proposal);
    match proposed {
        Some(Ok(p)) if p.get("pcibench").is_some() => {
            let pid = holder.strip_prefix("pid ").and_then(|r| r.split(',').next()).and_then(|p| p.parse::<u64>().ok());
            let minor = u16::from_le_bytes([m.payload[2], m.payload[3]]);
            let (minor, reply) =
                version::server_reply(minor, &p, serde_json::json!({ "busy": { "pid": pid, "holder": holder } }));
            let mut text = reply.to_string().into_bytes();
            text.push(0);
            let payload = Put::default().u16(version::MAJOR).u16(minor).bytes(&text).0;
            let _ = wire::send(s, m.header.reply(), &payload, &[], deadline);
        }
        _ => {
            let _ = wire::send(s, m.header.error_reply(Errno::BUSY.raw_os_error()), &[], &[], deadline);
        }
    }
}

/// Whether the peer of connection `fd` has closed its end (POLLRDHUP or POLLHUP, now).
fn hung_up(fd: &std::os::fd::OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::RDHUP)];
    matches!(poll(&mut fds, Some(&Timespec { tv_sec: 0, tv_nsec: 0 })), Ok(n) if n > 0)
        && fds[0].revents().intersects(PollFlags::RDHUP | PollFlags::HUP)
}

/// Wait up to one tick for `fd` to be readable.
fn readable(fd: std::os::fd::BorrowedFd<'_>) -> Result<bool> {
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    match poll(&mut fds, Some(&TICK)) {
        Ok(n) => Ok(n > 0),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(Error::Device(format!("waiting for a vfio-user client failed: {e}"))),
    }
}
