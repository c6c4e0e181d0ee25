//! The lifecycle loop: producers enqueue tasks (at intended times, or as fast as the
//! `max_queued` bound lets them: capacity), consumers dequeue them, find the task ids in
//! the reply (reply.rs) and run the process steps for each, then the batch steps, then
//! dequeue again. A task is timed from its intended enqueue time to the reply of the
//! consumer's last step for it. One thread: epoll plus an absolute timerfd, as engine.rs;
//! the engine's own stalls (stall.rs) taint the tasks they overlap.

use crate::cli::Options;
use crate::engine::rng;
use crate::lifecycle_spec::{Lifecycle, Step};
use crate::link::{Link, Reply};
use crate::reply::{self, Found};
use crate::schedule::Schedule;
use crate::scripts::{self, LoadError};
use crate::stall::{Detector, Summary};
use crate::stats::{CpuWindow, Stats};
use crate::sys::{self, Poller, Timer};
use crate::template::{Ctx, Place, TaskRef};
use rand_pcg::Pcg64;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

const TIMER: u64 = u64::MAX;

/// Why a run ended without a report: bad input (exit 2) or the server lost (exit 3).
pub enum Failure {
    Bad(String),
    Lost(String),
}

/// What the run measured (the measured window, and its tasks however late they completed).
pub struct Measured {
    /// Task level: `intended` the tasks intended in the window (enqueued), `completed` of
    /// those, `latency` their latency, `lag` the producers' schedule lag, `errors` by kind.
    pub stats: Stats,
    pub error_commands: BTreeMap<String, u64>,
    /// Tasks (any) completed, and enqueued (every enqueue step answered), in the window.
    pub completed_in_window: u64,
    pub enqueued_in_window: u64,
    /// Commands and round trips (steps) written in the window, on every connection.
    pub commands: u64,
    pub round_trips: u64,
    pub dequeues: u64,
    pub empty_dequeues: u64,
    /// Task ids found that were not outstanding, over the whole run.
    pub foreign: u64,
    pub cpu: CpuWindow,
    pub stalls: Summary,
}

/// A task a producer is enqueueing (its intended time is in `outstanding`).
struct Task {
    task: TaskRef,
}

/// The step a connection has written and is waiting for: which list, which step, how
/// many of its replies came.
#[derive(Clone, Copy)]
struct Flight {
    place: Place,
    step: usize,
    got: usize,
}

#[derive(Default)]
struct Producer {
    task: Option<Task>,
    /// Tasks due but not yet started: (intended, measured).
    backlog: VecDeque<(u64, bool)>,
}

/// A task of a dequeue reply: its id and handle, and (intended, measured) if it is ours.
struct Taken {
    task: TaskRef,
    ours: Option<(u64, bool)>,
}

/// What a consumer does when its wait is over.
#[derive(Default, Clone, Copy)]
enum Resume {
    /// Dequeue again (after an empty dequeue, or the work of a task with no process step).
    #[default]
    Dequeue,
    /// Run the process steps of its current task (its work is done).
    Process,
}

#[derive(Default)]
struct Consumer {
    taken: Vec<Taken>,
    /// The task of `taken` whose process steps run.
    at: usize,
    /// When a waiting consumer (an empty dequeue, or a task's work) goes on, and with what.
    resume_at: Option<u64>,
    resume_to: Resume,
    /// The last dequeue reply's tasks, until the step is done.
    found: Vec<Found>,
}

struct Window {
    start: u64,
    measure_from: u64,
    end: u64,
}

impl Window {
    fn holds(&self, t: u64) -> bool {
        t >= self.measure_from && t < self.end
    }
}

struct Loop<'a> {
    l: &'a Lifecycle,
    seed: u64,
    capacity: bool,
    server: String,
    /// Producer p is link p; consumer c is link producers + c.
    links: Vec<Link>,
    flights: Vec<Option<Flight>>,
    rngs: Vec<Pcg64>,
    producers: Vec<Producer>,
    consumers: Vec<Consumer>,
    /// Tasks enqueued (started) and not yet dequeued, by counter.
    outstanding: HashMap<u64, (u64, bool)>,
    /// Tasks started and not completed (the capacity bound).
    in_system: u64,
    next_counter: u64,
    poller: Poller,
    stalls: Detector,
    w: Window,
    m: Measured,
}

fn connect(addr: &SocketAddr, server: &str) -> Result<TcpStream, Failure> {
    let lost = |e: std::io::Error| Failure::Lost(format!("cannot connect to {server}: {e}"));
    let stream = TcpStream::connect_timeout(addr, Duration::from_secs(3)).map_err(lost)?;
    stream.set_nodelay(true).map_err(lost)?;
    Ok(stream)
}

impl<'a> Loop<'a> {
    fn tick(&mut self) -> u64 {
        let now = sys::now_ns();
        self.stalls.ran_to(now);
        now
    }

    fn lost(&self, what: &str) -> Failure {
        Failure::Lost(format!("lost the server {}: {what}", self.server))
    }

    fn step(&self, place: Place, step: usize) -> &'a Step {
        let l = self.l;
        match place {
            Place::Enqueue => &l.enqueue[step],
            Place::Dequeue => &l.dequeue,
            Place::Process => &l.process[step],
            Place::Batch => &l.batch[step],
        }
    }

    /// Write step `step` of `place` on link `i` (its placeholders expanded now).
    fn send(&mut self, i: usize, place: Place, step: usize, now: u64) {
        let s = self.step(place, step);
        let p = self.producers.len();
        let (task, consumer) = if i < p {
            (self.producers[i].task.as_ref().map(|t| &t.task), 0)
        } else {
            let c = &self.consumers[i - p];
            (c.taken.get(c.at).map(|t| &t.task), i - p)
        };
        // a batch sees every task of the dequeue
        let refs: Vec<TaskRef> = if place == Place::Batch {
            let taken = &self.consumers[i - p].taken;
            taken.iter().map(|t| t.task.clone()).collect()
        } else {
            Vec::new()
        };
        let mut ctx = Ctx {
            task,
            batch: &refs,
            consumer,
            data_size: self.l.data_size,
            rng: &mut self.rngs[i],
        };
        for c in &s.commands {
            c.encode(&mut ctx, &mut self.links[i].out);
        }
        self.flights[i] = Some(Flight {
            place,
            step,
            got: 0,
        });
        if self.w.holds(now) {
            self.m.commands += s.commands.len() as u64;
            self.m.round_trips += 1;
        }
    }

    /// Producer `p` starts a task intended at `intended`.
    fn start(&mut self, p: usize, intended: u64, measured: bool, now: u64) {
        let counter = self.next_counter;
        self.next_counter += 1;
        let id = reply::task_id(self.seed, counter);
        self.outstanding.insert(counter, (intended, measured));
        self.in_system += 1;
        self.m.stats.wrote(intended, measured, now);
        self.producers[p].task = Some(Task {
            task: TaskRef {
                task: id,
                handle: id.to_vec(),
            },
        });
        self.send(p, Place::Enqueue, 0, now);
    }

    /// Open loop: give the due task to the producer with the least backlog.
    fn dispatch(&mut self, intended: u64, measured: bool) {
        if measured {
            self.m.stats.intended += 1;
        }
        let load = |p: &Producer| p.backlog.len() + usize::from(p.task.is_some());
        let p = (0..self.producers.len())
            .min_by_key(|&p| load(&self.producers[p]))
            .expect("one producer or more");
        self.producers[p].backlog.push_back((intended, measured));
    }

    /// Start what idle producers have to start: their backlog (open loop), or a new task
    /// while under `max_queued` and in the window (capacity).
    fn feed_producers(&mut self, now: u64) {
        for p in 0..self.producers.len() {
            if self.producers[p].task.is_some() {
                continue;
            }
            if let Some((intended, measured)) = self.producers[p].backlog.pop_front() {
                self.start(p, intended, measured, now);
            } else if self.capacity && now < self.w.end && self.in_system < self.l.max_queued {
                let measured = now >= self.w.measure_from;
                if measured {
                    self.m.stats.intended += 1;
                }
                self.start(p, now, measured, now);
            }
        }
    }

    /// Consumers whose wait (an empty dequeue, a task's work) is over go on.
    fn wake_consumers(&mut self, now: u64) {
        let p = self.producers.len();
        for c in 0..self.consumers.len() {
            if self.consumers[c].resume_at.is_some_and(|t| t <= now) {
                self.consumers[c].resume_at = None;
                let place = match self.consumers[c].resume_to {
                    Resume::Dequeue => Place::Dequeue,
                    Resume::Process => Place::Process,
                };
                self.send(p + c, place, 0, now);
            }
        }
    }

    /// Consumer `c` starts its current task: after its work (--work_us), its first step.
    fn start_task(&mut self, c: usize, now: u64) {
        if self.l.work_ns == 0 {
            self.send(self.producers.len() + c, Place::Process, 0, now);
        } else {
            self.consumers[c].resume_at = Some(now + self.l.work_ns);
            self.consumers[c].resume_to = Resume::Process;
        }
    }

    fn flush_all(&mut self) -> Result<(), Failure> {
        for i in 0..self.links.len() {
            if !self.links[i].has_output() {
                continue;
            }
            let all = self.links[i]
                .flush()
                .map_err(|e| self.lost(&e.to_string()))?;
            self.tick();
            if all == self.links[i].wants_write {
                let fd = self.links[i].stream.as_raw_fd();
                self.poller
                    .set_writable(fd, i as u64, !all)
                    .map_err(|e| self.lost(&e.to_string()))?;
                self.links[i].wants_write = !all;
            }
        }
        Ok(())
    }

    fn read(&mut self, i: usize) -> Result<(), Failure> {
        let open = self.links[i]
            .fill()
            .map_err(|e| self.lost(&e.to_string()))?;
        let now = self.tick();
        loop {
            let r = match self.links[i].next_reply() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(problem) => return Err(self.lost(&format!("unreadable reply: {problem}"))),
            };
            self.on_reply(i, &r, now)?;
        }
        if !open {
            return Err(self.lost("it closed the connection"));
        }
        Ok(())
    }

    fn on_reply(&mut self, i: usize, r: &Reply, now: u64) -> Result<(), Failure> {
        let Some(mut f) = self.flights[i] else {
            return Err(self.lost("a reply to no command"));
        };
        let s = self.step(f.place, f.step);
        if let Some(kind) = &r.error {
            if now >= self.w.measure_from {
                *self.m.stats.errors.entry(kind.clone()).or_insert(0) += 1;
                let name = s.commands[f.got].name.clone();
                *self.m.error_commands.entry(name).or_insert(0) += 1;
            }
        }
        if f.place == Place::Dequeue {
            let (root, _) = reply::parse(self.links[i].bytes(r), 0)
                .map_err(|e| self.lost(&format!("unreadable reply: {e}")))?;
            let found = reply::tasks(&root);
            self.consumers[i - self.producers.len()].found = found;
        }
        f.got += 1;
        if f.got < s.commands.len() {
            self.flights[i] = Some(f);
            return Ok(());
        }
        self.flights[i] = None;
        if i < self.producers.len() {
            self.enqueue_step_done(i, f.step, now);
        } else {
            self.consumer_step_done(i - self.producers.len(), f, now);
        }
        Ok(())
    }

    fn enqueue_step_done(&mut self, p: usize, step: usize, now: u64) {
        if step + 1 < self.l.enqueue.len() {
            self.send(p, Place::Enqueue, step + 1, now);
            return;
        }
        self.producers[p].task = None;
        if self.w.holds(now) {
            self.m.enqueued_in_window += 1;
        }
        self.feed_producers(now);
    }

    /// A task done: timed if it is ours and was intended in the window.
    fn complete(&mut self, ours: Option<(u64, bool)>, now: u64) {
        let Some((intended, measured)) = ours else {
            return;
        };
        self.in_system -= 1;
        if self.w.holds(now) {
            self.m.completed_in_window += 1;
        }
        let tainted = self.stalls.taints(intended, now);
        self.m.stats.completed(intended, measured, now, tainted);
    }

    fn consumer_step_done(&mut self, c: usize, f: Flight, now: u64) {
        let i = self.producers.len() + c;
        match f.place {
            Place::Dequeue => {
                let found = std::mem::take(&mut self.consumers[c].found);
                let counted = self.w.holds(now);
                if found.is_empty() {
                    self.m.empty_dequeues += u64::from(counted);
                    if self.l.empty_wait_ns == 0 {
                        self.send(i, Place::Dequeue, 0, now);
                    } else {
                        self.consumers[c].resume_at = Some(now + self.l.empty_wait_ns);
                        self.consumers[c].resume_to = Resume::Dequeue;
                    }
                    return;
                }
                self.m.dequeues += u64::from(counted);
                let mut taken = Vec::with_capacity(found.len());
                for f in found {
                    let ours = reply::counter_of(&f.task, self.seed)
                        .and_then(|n| self.outstanding.remove(&n));
                    // over the whole run: leftovers of an earlier run come first
                    self.m.foreign += u64::from(ours.is_none());
                    taken.push(Taken {
                        task: TaskRef {
                            task: f.task,
                            handle: f.handle,
                        },
                        ours,
                    });
                }
                self.consumers[c].taken = taken;
                self.consumers[c].at = 0;
                if !self.l.process.is_empty() {
                    self.start_task(c, now);
                } else if !self.l.batch.is_empty() {
                    self.send(i, Place::Batch, 0, now);
                } else {
                    // nothing after the pop (Sidekiq's BasicFetch): done when dequeued
                    let taken = std::mem::take(&mut self.consumers[c].taken);
                    for t in &taken {
                        self.complete(t.ours, now);
                    }
                    if self.l.work_ns == 0 {
                        self.send(i, Place::Dequeue, 0, now);
                    } else {
                        // the tasks' work, one after another, before the next pop
                        let work = self.l.work_ns * taken.len() as u64;
                        self.consumers[c].resume_at = Some(now + work);
                        self.consumers[c].resume_to = Resume::Dequeue;
                    }
                }
            }
            Place::Process => {
                if f.step + 1 < self.l.process.len() {
                    self.send(i, Place::Process, f.step + 1, now);
                    return;
                }
                let con = &mut self.consumers[c];
                let at = con.at;
                con.at += 1;
                let more = con.at < con.taken.len();
                if self.l.batch.is_empty() {
                    let ours = self.consumers[c].taken[at].ours;
                    self.complete(ours, now);
                }
                if more {
                    self.start_task(c, now);
                } else if !self.l.batch.is_empty() {
                    self.send(i, Place::Batch, 0, now);
                } else {
                    self.consumers[c].taken.clear();
                    self.send(i, Place::Dequeue, 0, now);
                }
            }
            Place::Batch => {
                if f.step + 1 < self.l.batch.len() {
                    self.send(i, Place::Batch, f.step + 1, now);
                    return;
                }
                let taken = std::mem::take(&mut self.consumers[c].taken);
                for t in &taken {
                    self.complete(t.ours, now);
                }
                self.send(i, Place::Dequeue, 0, now);
            }
            Place::Enqueue => unreachable!("consumers do not enqueue"),
        }
    }

    /// The earliest wait of an idle consumer.
    fn next_resume(&self) -> Option<u64> {
        self.consumers.iter().filter_map(|c| c.resume_at).min()
    }
}

/// Load the scripts, connect the producers and consumers, run; the measured window.
pub fn run(o: &Options, mut l: Lifecycle) -> Result<(Measured, Lifecycle), Failure> {
    let server = format!("{}:{}", o.host, o.ports[0]);
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
    let n = l.producers + l.consumers;
    let mut links = Vec::with_capacity(n);
    for _ in 0..n {
        let stream = connect(&addr, &server)?;
        stream
            .set_nonblocking(true)
            .map_err(|e| lost(e.to_string()))?;
        links.push(Link::new(stream));
    }
    let fail = |e: std::io::Error| Failure::Lost(format!("event loop: {e}"));
    let poller = Poller::new().map_err(fail)?;
    let mut timer = Timer::new().map_err(fail)?;
    for (i, link) in links.iter().enumerate() {
        poller
            .add(link.stream.as_raw_fd(), i as u64)
            .map_err(fail)?;
    }
    poller.add(timer.fd(), TIMER).map_err(fail)?;
    sys::tight_timer_slack();
    sys::short_sched_slice();
    let start = sys::now_ns() + 2_000_000;
    let measure_from = start + (o.warmup_s * 1e9) as u64;
    let end = measure_from + (o.duration_s * 1e9) as u64;
    let measured = {
        let mut lp = Loop {
            l: &l,
            seed: o.seed,
            capacity: o.rate == 0.0,
            server,
            links,
            flights: vec![None; n],
            rngs: (0..n as u64).map(|i| rng(o.seed, 1 + i)).collect(),
            producers: (0..l.producers).map(|_| Producer::default()).collect(),
            consumers: (0..l.consumers).map(|_| Consumer::default()).collect(),
            outstanding: HashMap::new(),
            in_system: 0,
            next_counter: 0,
            poller,
            stalls: Detector::new(
                (o.stall_us * 1e3).round() as u64,
                measure_from,
                sys::now_ns(),
            ),
            w: Window {
                start,
                measure_from,
                end,
            },
            m: Measured {
                stats: Stats::new(end),
                error_commands: BTreeMap::new(),
                completed_in_window: 0,
                enqueued_in_window: 0,
                commands: 0,
                round_trips: 0,
                dequeues: 0,
                empty_dequeues: 0,
                foreign: 0,
                cpu: CpuWindow::default(),
                stalls: Summary::default(),
            },
        };
        event_loop(&mut lp, &mut timer, o)?;
        lp.m.stalls = lp.stalls.summary;
        lp.m
    };
    Ok((measured, l))
}

fn event_loop(lp: &mut Loop, timer: &mut Timer, o: &Options) -> Result<(), Failure> {
    let (start, measure_from, end) = (lp.w.start, lp.w.measure_from, lp.w.end);
    let mut schedule = (!lp.capacity).then(|| Schedule::new(o.arrival, o.rate, rng(o.seed, 0)));
    let mut next = schedule
        .as_mut()
        .map_or(u64::MAX, |s| start + s.next_offset());
    let mut drain_until: Option<u64> = None;
    let mut ready = Vec::new();
    let now = lp.tick();
    for c in 0..lp.consumers.len() {
        lp.send(lp.producers.len() + c, Place::Dequeue, 0, now);
    }
    loop {
        let now = lp.tick();
        lp.m.cpu.mark(now, measure_from, end);
        if let Some(s) = schedule.as_mut() {
            while next <= now && next < end {
                lp.dispatch(next, next >= measure_from);
                next = start + s.next_offset();
            }
        }
        lp.feed_producers(now);
        lp.wake_consumers(now);
        lp.flush_all()?;
        let mut deadline = if next < end {
            next
        } else if now < end {
            end
        } else {
            let until = *drain_until.get_or_insert(now + (o.drain_s * 1e9) as u64);
            let stats = &lp.m.stats;
            if stats.completed >= stats.intended || now >= until {
                return Ok(());
            }
            until
        };
        if let Some(t) = lp.next_resume() {
            deadline = deadline.min(t);
        }
        timer
            .arm(deadline)
            .map_err(|e| Failure::Lost(format!("timer: {e}")))?;
        let blocked_at = lp.tick();
        lp.poller
            .wait(&mut ready)
            .map_err(|e| Failure::Lost(format!("epoll: {e}")))?;
        // as engine.rs: a wake later than the deadline is a stall of the engine; waiting
        // for the server (a blocked dequeue included) never is
        lp.stalls.woke(blocked_at, deadline, sys::now_ns());
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
