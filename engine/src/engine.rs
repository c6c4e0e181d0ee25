//! The event loop: one thread, epoll plus an absolute timerfd. It wakes at the next intended
//! time, writes every request that is due (one write per connection), and reads replies as
//! they come, timing each request from its intended time. With several servers, the due
//! request goes to the server whose window it falls in (pairing.rs), each server with
//! connections and stats of its own. It also watches for its own stalls (stall.rs): it reads
//! the clock after every connection it reads or writes and on every wake, and a request
//! that overlapped a stall is counted apart from the latency.

use crate::cli::Options;
use crate::conn::{Conn, Done, ReadOutcome};
use crate::pairing::{self, Cover, Router};
use crate::rotation::Rotation;
use crate::schedule::{self, Schedule};
use crate::spec::Spec;
use crate::stall::{Detector, Summary};
use crate::stats::{CpuWindow, Stats};
use crate::sys::{self, Poller, Timer};
use rand::SeedableRng;
use rand_pcg::Pcg64;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

const TIMER: u64 = u64::MAX;

/// The server could not be reached or went away: one line, exit 3.
#[derive(Debug)]
pub struct Lost(pub String);

/// A PRNG for stream `index` of a seed: 0 is the arrival stream, 1 + i connection i's keys.
pub fn rng(seed: u64, index: u64) -> Pcg64 {
    let mixed =
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    Pcg64::seed_from_u64(mixed)
}

fn connect(o: &Options, spec: &Spec, port: u16) -> Result<Vec<Conn>, Lost> {
    let target = format!("{}:{}", o.host, port);
    let lost = |e: String| Lost(format!("cannot connect to {target}: {e}"));
    let addr = target
        .to_socket_addrs()
        .map_err(|e| lost(e.to_string()))?
        .next()
        .ok_or_else(|| lost("no address".into()))?;
    let mut conns = Vec::with_capacity(o.connections);
    for i in 0..o.connections {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .map_err(|e| lost(e.to_string()))?;
        stream.set_nodelay(true).map_err(|e| lost(e.to_string()))?;
        stream
            .set_nonblocking(true)
            .map_err(|e| lost(e.to_string()))?;
        // connection i of every server draws the same keys (its own stream of the seed)
        let count = o.connections as u64;
        let rotation = Rotation::new(spec, i as u64, count, rng(o.seed, 1 + i as u64));
        conns.push(Conn::new(stream, rotation));
    }
    Ok(conns)
}

/// The loop's clock marks: start of the schedule, of the measured window, its end.
struct Window {
    start: u64,
    measure_from: u64,
    end: u64,
}

/// What a run measured: each server's stats (in --port order) and the engine's CPU time.
pub struct Measured {
    pub servers: Vec<Stats>,
    pub cover: Vec<Cover>,
    pub cpu: CpuWindow,
    /// The engine's stalls from the measured window's start to the run's end.
    pub stalls: Summary,
}

struct Loop {
    /// Server s's connections are s * per_server .. (s + 1) * per_server.
    conns: Vec<Conn>,
    per_server: usize,
    poller: Poller,
    pipeline: u32,
    cap: usize,
    stats: Vec<Stats>,
    cpu: CpuWindow,
    done: Vec<Done>,
    errors: Vec<(String, bool)>,
    servers: Vec<String>,
    stalls: Detector,
    /// --reply-floor-us in ns: no reply comes sooner after its request is written.
    floor_ns: u64,
    /// Polls instead of sleeping this long before a due time (schedule::spin_lead_ns).
    lead_ns: u64,
}

impl Loop {
    /// Read the clock while running (not blocked in epoll_wait since the last reading): a
    /// gap above --stall-us means the engine was preempted mid-work, a stall.
    fn tick(&mut self) -> u64 {
        let now = sys::now_ns();
        self.stalls.ran_to(now);
        now
    }

    fn lost(&self, conn: usize, what: &str) -> Lost {
        let server = &self.servers[conn / self.per_server];
        Lost(format!("lost the server {server}: {what}"))
    }

    /// A request intended at `intended` goes to connection `slot.conn` of `slot.server`.
    fn dispatch(&mut self, slot: pairing::Slot, intended: u64, measured: bool, now: u64) {
        let conn = &mut self.conns[slot.server * self.per_server + slot.conn];
        let stats = &mut self.stats[slot.server];
        if measured {
            stats.intended += 1;
        }
        if conn.pending.len() < self.cap && conn.backlog.is_empty() {
            conn.queue(intended, measured, self.pipeline);
            stats.wrote(intended, measured, now);
        } else {
            conn.backlog.push_back((intended, measured));
        }
    }

    fn flush_all(&mut self) -> Result<(), Lost> {
        for i in 0..self.conns.len() {
            if !self.conns[i].has_output() {
                continue;
            }
            let all = self.conns[i]
                .flush(self.floor_ns)
                .map_err(|e| self.lost(i, &e.to_string()))?;
            self.tick(); // one connection's write per reading: a step far below --stall-us
            if all == self.conns[i].wants_write {
                let fd = self.conns[i].stream.as_raw_fd();
                self.poller
                    .set_writable(fd, i as u64, !all)
                    .map_err(|e| self.lost(i, &e.to_string()))?;
                self.conns[i].wants_write = !all;
            }
        }
        Ok(())
    }

    /// Read connection `i`'s replies, time the requests they complete, and send what the
    /// in-flight cap was holding back.
    fn read(&mut self, i: usize) -> Result<(), Lost> {
        let outcome = self.conns[i]
            .fill()
            .map_err(|e| self.lost(i, &e.to_string()))?;
        let now = self.tick(); // before the replies are timed: a stall in fill() taints them
        self.done.clear();
        self.errors.clear();
        if let Err(problem) = self.conns[i].take_replies(&mut self.done, &mut self.errors) {
            return Err(self.lost(i, &format!("unreadable reply: {problem}")));
        }
        let stats = &mut self.stats[i / self.per_server];
        for d in &self.done {
            let tainted = self.stalls.taints(d.intended, now, d.wait.as_slice());
            stats.completed(d.intended, d.measured, now, tainted);
        }
        for (kind, measured) in self.errors.drain(..) {
            if measured {
                *stats.errors.entry(kind).or_insert(0) += 1;
            }
        }
        if let ReadOutcome::Closed = outcome {
            return Err(self.lost(i, "it closed the connection"));
        }
        let conn = &mut self.conns[i];
        while conn.pending.len() < self.cap {
            let Some((intended, measured)) = conn.backlog.pop_front() else {
                break;
            };
            conn.queue(intended, measured, self.pipeline);
            stats.wrote(intended, measured, now);
        }
        Ok(())
    }

    fn outstanding(&self) -> bool {
        self.conns
            .iter()
            .any(|c| !c.pending.is_empty() || !c.backlog.is_empty())
    }
}

/// The length of one server's turn (--switch-ms) in ns.
pub fn window_ns(o: &Options) -> u64 {
    ((o.switch_ms * 1e6).round() as u64).max(1)
}

/// Run the schedule against the servers; the stats of the measured window.
pub fn run(o: &Options, spec: &Spec) -> Result<Measured, Lost> {
    let mut conns = Vec::with_capacity(o.connections * o.ports.len());
    for &port in &o.ports {
        conns.extend(connect(o, spec, port)?);
    }
    let servers: Vec<String> = o.ports.iter().map(|p| format!("{}:{p}", o.host)).collect();
    let fail = |e: std::io::Error| Lost(format!("event loop: {e}"));
    let poller = Poller::new().map_err(fail)?;
    let mut timer = Timer::new().map_err(fail)?;
    for (i, c) in conns.iter().enumerate() {
        poller.add(c.stream.as_raw_fd(), i as u64).map_err(fail)?;
    }
    poller.add(timer.fd(), TIMER).map_err(fail)?;
    sys::tight_timer_slack();
    sys::short_sched_slice();
    let start = sys::now_ns() + 2_000_000;
    let measure_from = start + (o.warmup_s * 1e9) as u64;
    let w = Window {
        start,
        measure_from,
        end: measure_from + (o.duration_s * 1e9) as u64,
    };
    let mut lp = Loop {
        conns,
        per_server: o.connections,
        poller,
        pipeline: o.pipeline,
        cap: o.max_in_flight,
        stats: o.ports.iter().map(|_| Stats::new(w.end)).collect(),
        cpu: CpuWindow::default(),
        done: Vec::new(),
        errors: Vec::new(),
        servers,
        stalls: Detector::new(
            (o.stall_us * 1e3).round() as u64,
            measure_from,
            sys::now_ns(),
        ),
        floor_ns: (o.reply_floor_us * 1e3).round() as u64,
        lead_ns: schedule::spin_lead_ns(o.spin_us, o.rate),
    };
    event_loop(&mut lp, &mut timer, o, &w)?;
    for (s, stats) in lp.stats.iter_mut().enumerate() {
        let mine = &lp.conns[s * lp.per_server..(s + 1) * lp.per_server];
        stats.timeouts = mine
            .iter()
            .map(|c| {
                c.pending.iter().filter(|p| p.measured).count() as u64
                    + c.backlog.iter().filter(|b| b.1).count() as u64
            })
            .sum();
    }
    let cover = pairing::cover(
        window_ns(o),
        o.ports.len(),
        w.measure_from - w.start,
        w.end - w.start,
    );
    Ok(Measured {
        servers: lp.stats,
        cover,
        cpu: lp.cpu,
        stalls: lp.stalls.summary,
    })
}

/// Wait for what is ready before `deadline` (the next intended send, or the window's or
/// drain's end; each mode's loop calls this): asleep on the timer armed `lead_ns` early,
/// then, within the lead, polling without sleeping (schedule::spin_lead_ns; a preemption
/// meanwhile is a gap between two clock readings, a stall). A wake later than the deadline
/// is a stall of the engine. A server that stops answering cannot make one: the loop only
/// waits here, and the timer still fires on time; waiting for replies (a blocked dequeue
/// included) is never a stall, so the requests it delays keep their latency.
pub fn await_due(
    poller: &mut Poller,
    timer: &mut Timer,
    stalls: &mut Detector,
    deadline: u64,
    lead_ns: u64,
    ready: &mut Vec<(u64, bool, bool, bool)>,
) -> Result<(), String> {
    let early = deadline.saturating_sub(lead_ns);
    let now = sys::now_ns();
    stalls.ran_to(now);
    if now >= early {
        return poller.poll(ready).map_err(|e| format!("epoll: {e}"));
    }
    timer.arm(early).map_err(|e| format!("timer: {e}"))?;
    let blocked_at = sys::now_ns();
    stalls.ran_to(blocked_at);
    poller.wait(ready).map_err(|e| format!("epoll: {e}"))?;
    stalls.woke(blocked_at, deadline, sys::now_ns());
    Ok(())
}

fn event_loop(lp: &mut Loop, timer: &mut Timer, o: &Options, w: &Window) -> Result<(), Lost> {
    let schedule = Schedule::new(o.arrival, o.rate, rng(o.seed, 0));
    let mut router = Router::new(schedule, window_ns(o), o.ports.len(), o.connections);
    let mut slot = router.next_slot();
    let mut next = w.start + slot.offset;
    let mut drain_until: Option<u64> = None;
    let mut ready = Vec::new();
    loop {
        let now = lp.tick();
        lp.cpu.mark(now, w.measure_from, w.end);
        while next <= now && next < w.end {
            lp.dispatch(slot, next, next >= w.measure_from, now);
            slot = router.next_slot();
            next = w.start + slot.offset;
        }
        lp.flush_all()?;
        let deadline = if next < w.end {
            next
        } else if now < w.end {
            w.end // wake at the window's end to close it (its CPU time) on time
        } else {
            let until = *drain_until.get_or_insert(now + (o.drain_s * 1e9) as u64);
            if !lp.outstanding() || now >= until {
                return Ok(());
            }
            until
        };
        await_due(
            &mut lp.poller,
            timer,
            &mut lp.stalls,
            deadline,
            lp.lead_ns,
            &mut ready,
        )
        .map_err(Lost)?;
        for &(token, readable, writable, hung_up) in ready.iter() {
            if token == TIMER {
                timer.fired();
                continue;
            }
            if readable || hung_up {
                lp.read(token as usize)?;
            }
            if writable {
                lp.flush_all()?;
            }
        }
    }
}
