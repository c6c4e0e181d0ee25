//! The lifecycle run: load the scripts and connect every server's producers and consumers
//! (in --port order), then one event loop (epoll plus an absolute timerfd, as engine.rs)
//! over a `Side` per server. With several servers the run is paired in time (pairing.rs):
//! the open loop's one arrival stream is cut into windows (A B B A...) and a side is active
//! in its server's windows only; after the measured window every side drains, unrestricted.
//! The engine's own stalls (stall.rs) taint the tasks they overlap, on every side alike.

use crate::cli::Options;
use crate::engine::{await_due, rng, window_ns};
use crate::lifecycle::{Failure, Measured, Side, Window};
use crate::lifecycle_spec::Lifecycle;
use crate::link::Link;
use crate::pairing::{self, Cover, Router};
use crate::schedule::{self, Schedule};
use crate::scripts::{self, LoadError};
use crate::stall::{Detector, Summary};
use crate::stats::CpuWindow;
use crate::sys::{self, Poller, Timer};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

const TIMER: u64 = u64::MAX;

/// What the run measured: each server's side (in --port order), its share of the measured
/// window, and the engine's CPU time and stalls (one for all).
pub struct Run {
    pub servers: Vec<Measured>,
    pub cover: Vec<Cover>,
    pub cpu: CpuWindow,
    pub stalls: Summary,
}

fn connect(addr: &SocketAddr, server: &str) -> Result<TcpStream, Failure> {
    let lost = |e: std::io::Error| Failure::Lost(format!("cannot connect to {server}: {e}"));
    let stream = TcpStream::connect_timeout(addr, Duration::from_secs(3)).map_err(lost)?;
    stream.set_nodelay(true).map_err(lost)?;
    Ok(stream)
}

/// Load the scripts on the server (their SHA1s are the bodies', the same on every server)
/// and open its producers' and consumers' connections.
fn open(o: &Options, port: u16, l: &mut Lifecycle) -> Result<(String, Vec<Link>), Failure> {
    let server = format!("{}:{}", o.host, port);
    let lost = |e: String| Failure::Lost(format!("cannot connect to {server}: {e}"));
    let addr = server
        .to_socket_addrs()
        .map_err(|e| lost(e.to_string()))?
        .next()
        .ok_or_else(|| lost("no address".into()))?;
    if !l.scripts.is_empty() {
        let mut setup = connect(&addr, &server)?;
        let shas = scripts::load(&mut setup, &server, &l.scripts).map_err(|e| match e {
            LoadError::Refused(line) => Failure::Bad(line),
            LoadError::Lost(line) => Failure::Lost(line),
        })?;
        for c in l.commands_mut() {
            c.resolve_shas(&shas);
        }
    }
    let mut links = Vec::with_capacity(l.producers + l.consumers);
    for _ in 0..l.producers + l.consumers {
        let stream = connect(&addr, &server)?;
        stream
            .set_nonblocking(true)
            .map_err(|e| lost(e.to_string()))?;
        links.push(Link::new(stream));
    }
    Ok((server, links))
}

struct Loop<'a> {
    /// Server s's link i is token s * per_server + i.
    sides: Vec<Side<'a>>,
    per_server: usize,
    poller: Poller,
    stalls: Detector,
    cpu: CpuWindow,
    w: Window,
    window_ns: u64,
    /// Polls instead of sleeping this long before a due time (schedule::spin_lead_ns).
    lead_ns: u64,
}

impl Loop<'_> {
    fn tick(&mut self) -> u64 {
        let now = sys::now_ns();
        self.stalls.ran_to(now);
        now
    }

    /// Paired: which side is active at `now` (every side after the measured window, and
    /// the one side of an unpaired run always).
    fn set_active(&mut self, now: u64) {
        let k = self.sides.len();
        if k < 2 {
            return;
        }
        let on = pairing::server_at(now.saturating_sub(self.w.start), self.window_ns, k);
        let over = now >= self.w.end;
        for (s, side) in self.sides.iter_mut().enumerate() {
            side.active = over || s == on;
        }
    }

    /// When the active server changes next (paired, before the window's end), else None.
    fn next_switch(&self, now: u64) -> Option<u64> {
        if self.sides.len() < 2 {
            return None;
        }
        let at =
            self.w.start + pairing::switch_after(now.saturating_sub(self.w.start), self.window_ns);
        (at < self.w.end).then_some(at)
    }

    fn flush_all(&mut self) -> Result<(), Failure> {
        for s in 0..self.sides.len() {
            for i in 0..self.sides[s].links.len() {
                if !self.sides[s].links[i].has_output() {
                    continue;
                }
                let side = &mut self.sides[s];
                let written = side.links[i]
                    .flush(side.floor_ns)
                    .map_err(|e| side.lost(&e.to_string()))?;
                self.tick();
                let side = &mut self.sides[s];
                let all = written.is_some();
                if let Some(wait) = written {
                    side.written(i, wait);
                }
                if all == side.links[i].wants_write {
                    let fd = side.links[i].stream.as_raw_fd();
                    let token = (s * self.per_server + i) as u64;
                    self.poller
                        .set_writable(fd, token, !all)
                        .map_err(|e| side.lost(&e.to_string()))?;
                    side.links[i].wants_write = !all;
                }
            }
        }
        Ok(())
    }

    fn read(&mut self, token: usize) -> Result<(), Failure> {
        let (s, i) = (token / self.per_server, token % self.per_server);
        let open = {
            let side = &mut self.sides[s];
            side.links[i]
                .fill()
                .map_err(|e| side.lost(&e.to_string()))?
        };
        let now = self.tick();
        self.set_active(now);
        let side = &mut self.sides[s];
        loop {
            let r = match side.links[i].next_reply() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(problem) => return Err(side.lost(&format!("unreadable reply: {problem}"))),
            };
            side.on_reply(i, &r, now, &self.stalls)?;
        }
        if !open {
            return Err(side.lost("it closed the connection"));
        }
        Ok(())
    }
}

/// Load the scripts, connect every server's producers and consumers, run; each server's
/// measured window.
pub fn run(o: &Options, mut l: Lifecycle) -> Result<(Run, Lifecycle), Failure> {
    let mut opened = Vec::with_capacity(o.ports.len());
    for &port in &o.ports {
        opened.push(open(o, port, &mut l)?);
    }
    let fail = |e: std::io::Error| Failure::Lost(format!("event loop: {e}"));
    let poller = Poller::new().map_err(fail)?;
    let mut timer = Timer::new().map_err(fail)?;
    let per_server = l.producers + l.consumers;
    for (s, (_, links)) in opened.iter().enumerate() {
        for (i, link) in links.iter().enumerate() {
            let token = (s * per_server + i) as u64;
            poller.add(link.stream.as_raw_fd(), token).map_err(fail)?;
        }
    }
    poller.add(timer.fd(), TIMER).map_err(fail)?;
    sys::tight_timer_slack();
    sys::short_sched_slice();
    let start = sys::now_ns() + 2_000_000;
    let measure_from = start + (o.warmup_s * 1e9) as u64;
    let end = measure_from + (o.duration_s * 1e9) as u64;
    let w = Window {
        start,
        measure_from,
        end,
    };
    let run = {
        let capacity = o.rate == 0.0;
        let sides = opened
            .into_iter()
            .map(|(server, links)| {
                let mut side = Side::new(&l, o.seed, capacity, o.tasks, server, links, w);
                side.floor_ns = (o.reply_floor_us * 1e3).round() as u64;
                side
            })
            .collect();
        let mut lp = Loop {
            sides,
            per_server,
            poller,
            stalls: Detector::new(
                (o.stall_us * 1e3).round() as u64,
                measure_from,
                sys::now_ns(),
            ),
            cpu: CpuWindow::default(),
            w,
            window_ns: window_ns(o),
            lead_ns: schedule::spin_lead_ns(o.spin_us, o.rate),
        };
        event_loop(&mut lp, &mut timer, o)?;
        Run {
            servers: lp.sides.into_iter().map(|s| s.m).collect(),
            cover: pairing::cover(
                window_ns(o),
                o.ports.len(),
                measure_from - start,
                end - start,
            ),
            cpu: lp.cpu,
            stalls: lp.stalls.summary,
        }
    };
    Ok((run, l))
}

fn event_loop(lp: &mut Loop, timer: &mut Timer, o: &Options) -> Result<(), Failure> {
    let (start, measure_from, end) = (lp.w.start, lp.w.measure_from, lp.w.end);
    let k = lp.sides.len();
    // the latency mode's router: the same intended times as one server, cut into windows
    let mut router = (o.rate > 0.0).then(|| {
        let schedule = Schedule::new(o.arrival, o.rate, rng(o.seed, 0));
        Router::new(schedule, lp.window_ns, k, 1)
    });
    let mut slot = router.as_mut().map(|r| r.next_slot());
    let mut next = slot.map_or(u64::MAX, |s| start + s.offset);
    let mut drain_until: Option<u64> = None;
    let mut ready = Vec::new();
    let now = lp.tick();
    lp.set_active(now);
    for side in lp.sides.iter_mut() {
        // the first dequeues: the active side's now, the others' at their windows
        side.start_consumers(now);
    }
    loop {
        let now = lp.tick();
        lp.cpu.mark(now, measure_from, end);
        lp.set_active(now);
        if let Some(r) = router.as_mut() {
            while next <= now && next < end {
                let s = slot.expect("a router gives slots").server;
                lp.sides[s].dispatch(next, next >= measure_from, now);
                let n = r.next_slot();
                next = start + n.offset;
                slot = Some(n);
            }
        }
        for side in lp.sides.iter_mut() {
            side.feed_producers(now);
            side.start_consumers_when_enqueued(now);
            side.wake_consumers(now);
        }
        lp.flush_all()?;
        if lp.sides.iter().all(|s| s.quota_done()) {
            return Ok(()); // --tasks: the fixed work is done
        }
        let mut deadline = if next < end {
            next
        } else if now < end {
            end
        } else {
            let until = *drain_until.get_or_insert(now + (o.drain_s * 1e9) as u64);
            if lp.sides.iter().all(|s| s.drained()) || now >= until {
                return Ok(());
            }
            until
        };
        for t in lp.sides.iter().filter_map(|s| s.next_resume()) {
            deadline = deadline.min(t);
        }
        if let Some(t) = lp.next_switch(now) {
            deadline = deadline.min(t);
        }
        await_due(
            &mut lp.poller,
            timer,
            &mut lp.stalls,
            deadline,
            lp.lead_ns,
            &mut ready,
        )
        .map_err(Failure::Lost)?;
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
