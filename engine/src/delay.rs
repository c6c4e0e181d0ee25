//! `regtrack-openloop delay`: a TCP proxy that holds every chunk it reads for the one-way
//! delay before it forwards it, in both directions, order kept per direction (toxiproxy's
//! latency toxic). Between a load generator and a server it adds a round trip of twice the
//! one-way delay to every request, with no privileges, whatever runs the server.
//!
//! Each direction of a connection has a reader (stamps each chunk with its due time: read
//! time + delay) and a writer (sleeps until the due time, forwards, notes how late it
//! was). A closed side is passed on as a half-close after the delay too.
//!
//! Protocol on stdin/stdout: the first stdout line is `{"listen":"HOST:PORT",...}`; each
//! stdin line `report` prints one JSON line with what was forwarded since the last report
//! (and starts a new window): chunks, how late they went out, the proxy's CPU, and
//! whether it fell behind (`behind`). End of stdin ends the proxy.

use crate::sys;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::{self, BufRead, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;

pub const USAGE: &str = "usage: regtrack-openloop delay --upstream HOST:PORT --one-way-us N \
[--listen HOST:PORT (127.0.0.1:0)] [--behind-us U (late p99 that is falling behind; default \
max(200, N/10))]";

/// Threads per connection: 4 (a reader and a writer each way), small stacks.
const STACK: usize = 128 * 1024;
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

enum Item {
    Data(Vec<u8>, u64),
    End(u64),
}

/// Sleep until `deadline` on CLOCK_MONOTONIC (absolute: no drift from the time it took
/// to get here).
fn sleep_until(deadline: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

fn reader(mut from: TcpStream, to: Sender<Item>, one_way: u64) {
    sys::short_sched_slice(); // a chunk's due time is stamped when it is read
    let mut buf = vec![0u8; CHUNK]; // read into once; each chunk is copied at its size
    loop {
        let n = match from.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        let due = sys::now_ns() + one_way;
        if n == 0 {
            let _ = to.send(Item::End(due));
            return;
        }
        if to.send(Item::Data(buf[..n].to_vec(), due)).is_err() {
            return; // the writer's side is gone
        }
    }
}

fn writer(mut to: TcpStream, items: Receiver<Item>, shared: Shared) {
    sys::tight_timer_slack();
    sys::short_sched_slice(); // wake on time beside a busy load generator
    for item in items {
        let due = match &item {
            Item::Data(_, due) | Item::End(due) => *due,
        };
        sleep_until(due);
        let late = sys::now_ns().saturating_sub(due).max(1);
        match item {
            Item::Data(buf, _) => {
                {
                    let mut w = shared.lock().expect("not poisoned");
                    let _ = w.late.record(late);
                    w.chunks += 1;
                    w.bytes += buf.len() as u64;
                }
                if to.write_all(&buf).is_err() {
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
            }
            Item::End(_) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

fn spawn(f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .map(|_| ())
}

/// One direction: a reader on `from`, a writer on `to`.
fn direction(from: TcpStream, to: TcpStream, one_way: u64, shared: &Shared) -> io::Result<()> {
    let (tx, rx) = channel();
    let shared = shared.clone();
    spawn(move || writer(to, rx, shared))?;
    spawn(move || reader(from, tx, one_way))
}

fn connection(client: TcpStream, options: &Options, shared: &Shared) -> io::Result<()> {
    let server = match TcpStream::connect(&options.upstream) {
        Ok(s) => s,
        Err(e) => {
            shared.lock().expect("not poisoned").refused += 1;
            return Err(e);
        }
    };
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    shared.lock().expect("not poisoned").connections += 1;
    direction(
        client.try_clone()?,
        server.try_clone()?,
        options.one_way_ns,
        shared,
    )?;
    direction(server, client, options.one_way_ns, shared)
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
    {
        let (options, shared) = (options.clone(), shared.clone());
        spawn(move || {
            for client in listener.incoming().flatten() {
                let _ = connection(client, &options, &shared);
            }
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    }
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
        let s = shared.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let _ = connection(client, &options, &s);
            }
        });
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
