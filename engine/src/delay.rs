//! `regtrack-openloop delay`: a TCP proxy that holds every chunk it reads for the one-way
//! delay before it forwards it, in both directions, order kept per direction (toxiproxy's
//! latency toxic). Between a load generator and a server it adds a round trip of twice the
//! one-way delay to every request, with no privileges, whatever runs the server.
//!
//! One thread forwards for every connection (an event loop, so the proxy costs the client
//! CPU it shares with the load generator a few syscalls per chunk, not thread switches):
//! each read is a chunk stamped with its due time (read time + delay) in its direction's
//! FIFO; a timerfd at the earliest due time wakes the loop to write what is due, a
//! partial write waits for EPOLLOUT. A closed side is passed on as a half-close after the
//! delay too. A second thread only answers `report` on stdin.
//!
//! Protocol on stdin/stdout: the first stdout line is `{"listen":"HOST:PORT",...}`; each
//! stdin line `report` prints one JSON line with what was forwarded since the last report
//! (and starts a new window): chunks, how late they went out, the proxy's CPU, and
//! whether it fell behind (`behind`). End of stdin ends the proxy.

use crate::sys;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, BufRead, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::io::AsRawFd;
use std::sync::{Arc, Mutex};
use std::thread;

pub const USAGE: &str = "usage: regtrack-openloop delay --upstream HOST:PORT --one-way-us N \
[--listen HOST:PORT (127.0.0.1:0)] [--behind-us U (late p99 that is falling behind; default \
max(200, N/10))]";

/// The most one read takes (a chunk); a bigger burst is several chunks, all due together.
const CHUNK: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub listen: String,
    pub upstream: String,
    pub one_way_ns: u64,
    pub behind_ns: u64,
}

/// `delay`'s arguments (after the word `delay`); a bad one is one line (exit 2).
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut listen = "127.0.0.1:0".to_string();
    let (mut upstream, mut one_way, mut behind) = (None, None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |text: String, name: &str| -> Result<u64, String> {
            text.parse::<u64>()
                .map_err(|_| format!("{name} {text:?}: give whole microseconds"))
        };
        match name.as_str() {
            "--listen" => listen = value()?,
            "--upstream" => upstream = Some(value()?),
            "--one-way-us" => one_way = Some(number(value()?, "--one-way-us")?),
            "--behind-us" => behind = Some(number(value()?, "--behind-us")?),
            other => return Err(format!("delay: unknown argument {other:?}; {USAGE}")),
        }
    }
    let upstream = upstream.ok_or_else(|| format!("delay needs --upstream; {USAGE}"))?;
    let one_way = one_way.ok_or_else(|| format!("delay needs --one-way-us; {USAGE}"))?;
    if one_way == 0 || one_way > 10_000_000 {
        return Err(format!(
            "--one-way-us {one_way}: give 1 to 10000000 (10 s) microseconds"
        ));
    }
    let behind = behind.unwrap_or_else(|| (one_way / 10).max(200));
    Ok(Options {
        listen,
        upstream,
        one_way_ns: one_way * 1000,
        behind_ns: behind * 1000,
    })
}

/// What the writers saw since the last report.
struct Window {
    late: Histogram<u64>,
    chunks: u64,
    bytes: u64,
    connections: u64,
    refused: u64,
    started_ns: u64,
    cpu: (f64, f64),
}

impl Window {
    fn new() -> Window {
        Window {
            late: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            chunks: 0,
            bytes: 0,
            connections: 0,
            refused: 0,
            started_ns: sys::now_ns(),
            cpu: sys::cpu_seconds(),
        }
    }
}

type Shared = Arc<Mutex<Window>>;

#[derive(Serialize)]
struct Late {
    p50: f64,
    p99: f64,
    max: f64,
}

#[derive(Serialize)]
struct Cpu {
    user_s: f64,
    sys_s: f64,
    busy_fraction: f64,
}

/// One report: the window since the last one.
#[derive(Serialize)]
struct Report {
    one_way_us: f64,
    window_s: f64,
    connections: u64,
    refused: u64,
    chunks: u64,
    bytes: u64,
    late_us: Late,
    cpu: Cpu,
    behind: bool,
    behind_reasons: Vec<String>,
}

fn report(window: &Window, options: &Options) -> Report {
    let elapsed = (sys::now_ns().saturating_sub(window.started_ns)) as f64 / 1e9;
    let (user, system) = sys::cpu_seconds();
    let (user, system) = (user - window.cpu.0, system - window.cpu.1);
    let us = |ns: u64| ns as f64 / 1000.0;
    let (p50, p99, max) = if window.chunks == 0 {
        (0, 0, 0)
    } else {
        (
            window.late.value_at_quantile(0.5),
            window.late.value_at_quantile(0.99),
            window.late.max(),
        )
    };
    let mut reasons = Vec::new();
    if p99 > options.behind_ns {
        reasons.push(format!(
            "forwarded p99 {:.0} us late (max {:.0} us; allowed {:.0} us)",
            us(p99),
            us(max),
            us(options.behind_ns)
        ));
    }
    if window.refused > 0 {
        reasons.push(format!(
            "{} connections could not reach the server",
            window.refused
        ));
    }
    Report {
        one_way_us: us(options.one_way_ns),
        window_s: elapsed,
        connections: window.connections,
        refused: window.refused,
        chunks: window.chunks,
        bytes: window.bytes,
        late_us: Late {
            p50: us(p50),
            p99: us(p99),
            max: us(max),
        },
        cpu: Cpu {
            user_s: user,
            sys_s: system,
            busy_fraction: if elapsed > 0.0 {
                (user + system) / elapsed
            } else {
                0.0
            },
        },
        behind: !reasons.is_empty(),
        behind_reasons: reasons,
    }
}

/// A chunk read from one side, due at the other at `due` (read time + the one-way delay).
struct Chunk {
    due: u64,
    data: Vec<u8>,
}

/// One direction of a connection, named by the side it writes to: a FIFO of chunks (their
/// due times never decrease), how much of the front one a partial write already sent, and
/// the source's end, passed on as a half-close once it is due.
#[derive(Default)]
struct Flow {
    queue: VecDeque<Chunk>,
    sent: usize,
    noted: bool,
    end: Option<u64>,
    closed: bool,
}

struct Side {
    stream: TcpStream,
    reading: bool,
    wants_out: bool,
    watched: bool,
}

/// `flows[d]` writes to `sides[d]` and reads from `sides[1 - d]` (0: client, 1: server).
struct Conn {
    sides: [Side; 2],
    flows: [Flow; 2],
}

const LISTENER: u64 = 0;
const TIMER: u64 = 1;
const IDLE_NS: u64 = 3_600_000_000_000;

fn token(idx: usize, side: usize) -> u64 {
    2 + idx as u64 * 2 + side as u64
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// The proxy's one thread: non-blocking sockets on epoll, and a timerfd armed at the
/// earliest due chunk of all connections (a min-heap of (due, connection, direction);
/// an entry whose chunk already went is a no-op when it comes up).
struct Proxy {
    options: Options,
    shared: Shared,
    listener: TcpListener,
    poller: sys::Poller,
    timer: sys::Timer,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    due: BinaryHeap<Reverse<(u64, usize, usize)>>,
    buf: Vec<u8>,
}

impl Proxy {
    fn new(listener: TcpListener, options: Options, shared: Shared) -> io::Result<Proxy> {
        listener.set_nonblocking(true)?;
        let poller = sys::Poller::new()?;
        let timer = sys::Timer::new()?;
        poller.add(listener.as_raw_fd(), LISTENER)?;
        poller.add(timer.fd(), TIMER)?;
        Ok(Proxy {
            options,
            shared,
            listener,
            poller,
            timer,
            conns: Vec::new(),
            free: Vec::new(),
            due: BinaryHeap::new(),
            buf: vec![0u8; CHUNK],
        })
    }

    fn run(mut self) -> io::Result<()> {
        sys::tight_timer_slack();
        sys::short_sched_slice(); // wake on time beside a busy load generator
        let mut ready = Vec::new();
        loop {
            self.poller.wait(&mut ready)?;
            for &(tok, readable, writable, hup) in &ready {
                match tok {
                    LISTENER => self.accept(),
                    TIMER => self.timer.fired(),
                    t => {
                        let (idx, side) = (((t - 2) / 2) as usize, ((t - 2) % 2) as usize);
                        self.event(idx, side, readable || hup, writable, hup);
                    }
                }
            }
            self.forward_due();
            let next = match self.due.peek() {
                Some(Reverse((due, _, _))) => *due,
                None => sys::now_ns() + IDLE_NS, // a fired timerfd stays readable till re-armed
            };
            self.timer.arm(next)?;
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((client, _)) => self.open(client),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return, // WouldBlock: all taken; anything else: try at the next wake
            }
        }
    }

    fn open(&mut self, client: TcpStream) {
        // loopback or a local container: the connect takes microseconds
        let server = match TcpStream::connect(&self.options.upstream) {
            Ok(s) => s,
            Err(_) => {
                self.shared.lock().expect("not poisoned").refused += 1;
                return;
            }
        };
        let idx = self.free.pop().unwrap_or(self.conns.len());
        for (side, stream) in [&client, &server].into_iter().enumerate() {
            let ok = stream.set_nonblocking(true).is_ok()
                && stream.set_nodelay(true).is_ok()
                && self
                    .poller
                    .add(stream.as_raw_fd(), token(idx, side))
                    .is_ok();
            if !ok {
                if side == 1 {
                    let _ = self.poller.remove(client.as_raw_fd());
                }
                self.free.push(idx);
                return;
            }
        }
        let side = |stream| Side {
            stream,
            reading: true,
            wants_out: false,
            watched: true,
        };
        let conn = Conn {
            sides: [side(client), side(server)],
            flows: [Flow::default(), Flow::default()],
        };
        if idx == self.conns.len() {
            self.conns.push(Some(conn));
        } else {
            self.conns[idx] = Some(conn);
        }
        self.shared.lock().expect("not poisoned").connections += 1;
    }

    fn event(&mut self, idx: usize, side: usize, readable: bool, writable: bool, hup: bool) {
        if readable {
            self.read(idx, side);
        }
        if writable {
            self.flush(idx, side);
        }
        if let Some(Some(conn)) = self.conns.get_mut(idx) {
            let s = &mut conn.sides[side];
            if hup && !s.reading && s.watched {
                // shut both ways: EPOLLHUP would be reported on every wait
                let _ = self.poller.remove(s.stream.as_raw_fd());
                s.watched = false;
            }
        }
        self.finish(idx);
    }

    /// Read what `side` sent, each read a chunk due at the other side one delay later.
    fn read(&mut self, idx: usize, side: usize) {
        let Some(Some(conn)) = self.conns.get_mut(idx) else {
            return;
        };
        let d = 1 - side;
        if !conn.sides[side].reading {
            return;
        }
        loop {
            let got = conn.sides[side].stream.read(&mut self.buf);
            let due = sys::now_ns() + self.options.one_way_ns;
            match got {
                Ok(n) if n > 0 => {
                    let flow = &mut conn.flows[d];
                    if !flow.closed {
                        let data = self.buf[..n].to_vec();
                        flow.queue.push_back(Chunk { due, data });
                        self.due.push(Reverse((due, idx, d)));
                    }
                    if n < self.buf.len() {
                        return; // drained; level-triggered epoll says if more comes
                    }
                }
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => {
                    // end of stream (or a reset): pass it on after the delay too
                    conn.flows[d].end = Some(due);
                    self.due.push(Reverse((due, idx, d)));
                    let s = &mut conn.sides[side];
                    s.reading = false;
                    if s.watched {
                        let fd = s.stream.as_raw_fd();
                        let _ = self
                            .poller
                            .set_interest(fd, token(idx, side), false, s.wants_out);
                    }
                    return;
                }
            }
        }
    }

    /// Write every due chunk of the flow into `dest`; a partial write keeps the rest for
    /// EPOLLOUT. How late a chunk went is noted at its first write attempt.
    fn flush(&mut self, idx: usize, dest: usize) {
        let Some(Some(conn)) = self.conns.get_mut(idx) else {
            return;
        };
        let (flow, side) = (&mut conn.flows[dest], &mut conn.sides[dest]);
        if flow.closed {
            return;
        }
        let now = sys::now_ns();
        let mut blocked = false;
        while let Some(front) = flow.queue.front() {
            if front.due > now {
                break;
            }
            if !flow.noted {
                // noted before the write: a report asked for once the reply is read has it
                let late = sys::now_ns().saturating_sub(front.due).max(1);
                let mut w = self.shared.lock().expect("not poisoned");
                let _ = w.late.record(late);
                w.chunks += 1;
                w.bytes += front.data.len() as u64;
                flow.noted = true;
            }
            match side.stream.write(&front.data[flow.sent..]) {
                Ok(n) if n > 0 => {
                    flow.sent += n;
                    if flow.sent == front.data.len() {
                        flow.queue.pop_front();
                        (flow.sent, flow.noted) = (0, false);
                    }
                }
                Err(e) if would_block(&e) => {
                    blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                _ => {
                    // the destination is gone: drop what was for it, reset it
                    flow.queue.clear();
                    flow.closed = true;
                    let _ = side.stream.shutdown(Shutdown::Both);
                    break;
                }
            }
        }
        if !flow.closed && flow.queue.is_empty() && flow.end.is_some_and(|e| e <= now) {
            let _ = side.stream.shutdown(Shutdown::Write);
            flow.closed = true;
        }
        if blocked != side.wants_out && side.watched {
            side.wants_out = blocked;
            let fd = side.stream.as_raw_fd();
            let _ = self
                .poller
                .set_interest(fd, token(idx, dest), side.reading, blocked);
        }
    }

    fn forward_due(&mut self) {
        while let Some(&Reverse((due, idx, dest))) = self.due.peek() {
            if due > sys::now_ns() {
                return;
            }
            self.due.pop();
            self.flush(idx, dest);
            self.finish(idx);
        }
    }

    /// Both directions ended (passed on, or their destination failed): close both sockets.
    fn finish(&mut self, idx: usize) {
        let Some(slot) = self.conns.get_mut(idx) else {
            return;
        };
        if !slot
            .as_ref()
            .is_some_and(|c| c.flows.iter().all(|f| f.closed))
        {
            return;
        }
        if let Some(conn) = slot.take() {
            for s in conn.sides.iter().filter(|s| s.watched) {
                let _ = self.poller.remove(s.stream.as_raw_fd());
            }
            self.free.push(idx);
        }
    }
}

/// The proxy: listen, print where, forward until stdin ends. Exit 2: bad input or a
/// listen address that cannot be bound.
pub fn main(args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let listener = TcpListener::bind(&options.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listen address: {e}"))?;
    let shared: Shared = Arc::new(Mutex::new(Window::new()));
    let proxy = Proxy::new(listener, options.clone(), shared.clone())
        .map_err(|e| format!("cannot start the event loop: {e}"))?;
    thread::Builder::new()
        .name("delay".into())
        .spawn(move || {
            if let Err(e) = proxy.run() {
                eprintln!("regtrack-openloop delay: the event loop failed: {e}");
                std::process::exit(1);
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    let mut out = io::stdout().lock();
    let first = serde_json::json!({
        "listen": local.to_string(),
        "upstream": options.upstream,
        "one_way_us": options.one_way_ns as f64 / 1000.0,
        "behind_us": options.behind_ns as f64 / 1000.0,
    });
    let _ = writeln!(out, "{first}");
    let _ = out.flush();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() != "report" {
            continue;
        }
        let done = {
            let mut w = shared.lock().expect("not poisoned");
            let done = report(&w, &options);
            *w = Window::new();
            done
        };
        let text = serde_json::to_string(&done).expect("serialisable");
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;
    use std::time::Instant;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn options_need_upstream_and_a_positive_delay() {
        let o = parse(&args(&["--upstream", "127.0.0.1:1", "--one-way-us", "250"])).unwrap();
        assert_eq!(o.listen, "127.0.0.1:0");
        assert_eq!(o.one_way_ns, 250_000);
        assert_eq!(o.behind_ns, 200_000);
        let o = parse(&args(&["--upstream=h:1", "--one-way-us=14000"])).unwrap();
        assert_eq!(o.behind_ns, 1_400_000);
        assert!(parse(&args(&["--one-way-us", "5"])).is_err());
        assert!(parse(&args(&["--upstream", "h:1", "--one-way-us", "0"])).is_err());
        assert!(parse(&args(&["--upstream", "h:1", "--one-way-us", "1ms"])).is_err());
        assert!(parse(&args(&["--upstream", "h:1", "--one-way-us", "5", "--x"])).is_err());
    }

    /// An echo server, and a proxy in front of it on its own threads.
    fn proxied(one_way_us: u64) -> (std::net::SocketAddr, Shared) {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = echo.local_addr().unwrap().to_string();
        thread::spawn(move || {
            for conn in echo.incoming().flatten() {
                thread::spawn(move || {
                    let mut conn = conn;
                    let mut buf = [0u8; 4096];
                    loop {
                        match conn.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if conn.write_all(&buf[..n]).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        let options = parse(&args(&[
            "--upstream",
            &upstream,
            "--one-way-us",
            &one_way_us.to_string(),
        ]))
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let shared: Shared = Arc::new(Mutex::new(Window::new()));
        let proxy = Proxy::new(listener, options, shared.clone()).unwrap();
        thread::spawn(move || proxy.run());
        (at, shared)
    }

    #[test]
    fn a_round_trip_takes_twice_the_one_way_delay_and_no_more_than_a_little() {
        let (at, shared) = proxied(10_000);
        let mut conn = TcpStream::connect(at).unwrap();
        conn.set_nodelay(true).unwrap();
        let mut times = Vec::new();
        for i in 0..20u8 {
            let start = Instant::now();
            conn.write_all(&[i; 10]).unwrap();
            let mut got = [0u8; 10];
            conn.read_exact(&mut got).unwrap();
            times.push(start.elapsed().as_micros() as u64);
            assert_eq!(got, [i; 10], "the reply is the request's, unchanged");
        }
        times.sort();
        assert!(times[0] >= 20_000, "a round trip under 20 ms: {times:?}");
        // a quiet host forwards within a fraction of a millisecond; a shared VM's stalls
        // allow for more, but never a second round trip
        assert!(times[10] < 30_000, "median round trip {} us", times[10]);
        let w = shared.lock().unwrap();
        assert_eq!(w.chunks, 40, "20 chunks each way");
        assert_eq!(w.connections, 1);
    }

    #[test]
    fn order_is_kept_in_both_directions_under_a_stream() {
        let (at, _) = proxied(2_000);
        let conn = TcpStream::connect(at).unwrap();
        let mut rx = BufReader::new(conn.try_clone().unwrap());
        let mut tx = conn;
        let sender = thread::spawn(move || {
            for i in 0..5000u32 {
                tx.write_all(format!("{i}\n").as_bytes()).unwrap();
                if i % 500 == 0 {
                    thread::sleep(std::time::Duration::from_micros(300));
                }
            }
            tx.shutdown(Shutdown::Write).unwrap();
        });
        let mut line = String::new();
        for i in 0..5000u32 {
            line.clear();
            rx.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), i.to_string(), "out of order at {i}");
        }
        sender.join().unwrap();
        line.clear();
        // the half-close crossed both ways: the echo server saw it and closed its side
        assert_eq!(
            rx.read_line(&mut line).unwrap(),
            0,
            "end of stream passed on"
        );
    }

    #[test]
    fn many_connections_at_once_each_get_their_own_replies_one_round_trip_later() {
        let (at, shared) = proxied(5_000);
        let mut conns: Vec<TcpStream> = (0..100) // under the listen backlog (128)
            .map(|_| TcpStream::connect(at).unwrap())
            .collect();
        let start = Instant::now();
        for (i, c) in conns.iter_mut().enumerate() {
            c.write_all(format!("{i:08}").as_bytes()).unwrap();
        }
        for (i, c) in conns.iter_mut().enumerate() {
            let mut got = [0u8; 8];
            c.read_exact(&mut got).unwrap();
            assert_eq!(got, format!("{i:08}").as_bytes(), "connection {i}");
        }
        let took = start.elapsed().as_micros() as u64;
        assert!(took >= 10_000, "100 round trips in parallel in {took} us");
        assert!(took < 200_000, "100 round trips in parallel took {took} us");
        drop(conns);
        let w = shared.lock().unwrap();
        assert_eq!(w.connections, 100);
        assert!(w.chunks >= 200, "{} chunks", w.chunks);
    }

    #[test]
    fn a_bulk_transfer_arrives_whole_through_partial_writes() {
        let (at, _) = proxied(1_000);
        let conn = TcpStream::connect(at).unwrap();
        let mut rx = conn.try_clone().unwrap();
        let mut tx = conn;
        let data: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 251) as u8).collect();
        let sent = data.clone();
        // more than the socket buffers hold: the proxy's writes are partial, its queue
        // waits for EPOLLOUT, the echo server's reads wait for the proxy
        let sender = thread::spawn(move || {
            tx.write_all(&sent).unwrap();
            tx.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        rx.read_to_end(&mut got).unwrap();
        sender.join().unwrap();
        assert_eq!(got.len(), data.len());
        assert!(got == data, "the bytes came back changed");
    }

    #[test]
    fn a_window_that_forwarded_late_is_behind() {
        let options = parse(&args(&["--upstream", "h:1", "--one-way-us", "1000"])).unwrap();
        let mut w = Window::new();
        for _ in 0..100 {
            w.late.record(50_000).unwrap();
            w.chunks += 1;
        }
        assert!(!report(&w, &options).behind, "50 us late is held");
        for _ in 0..10 {
            w.late.record(5_000_000).unwrap();
            w.chunks += 1;
        }
        let r = report(&w, &options);
        assert!(
            r.behind && r.behind_reasons[0].contains("late"),
            "{:?}",
            r.behind_reasons
        );
    }
}
