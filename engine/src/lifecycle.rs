//! The lifecycle loop: producers enqueue tasks (at intended times, or as fast as the
//! `max_queued` bound lets them: capacity), consumers dequeue them, find the task ids in
//! the reply (reply.rs) and run the process steps for each, then the batch steps, then
//! dequeue again. A task is timed from its intended enqueue time to the reply of the
//! consumer's last step for it. This is one server's side of it (`Side`): its connections,
//! its outstanding tasks, its stats; lifecycle_run.rs holds one per server and the event
//! loop. Paired in time, a side is `active` in its server's windows only: an inactive
//! side's connections finish the step they are in, then hold (`ProducerMove`,
//! `ConsumerMove`) until its next window.

use crate::engine::rng;
use crate::lifecycle_spec::{Lifecycle, Step};
use crate::link::{Link, Reply};
use crate::reply::{self, Found};
use crate::stall::{Detector, Wait};
use crate::stats::Stats;
use crate::template::{Ctx, Place, TaskRef};
use rand_pcg::Pcg64;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Why a run ended without a report: bad input (exit 2) or the server lost (exit 3).
pub enum Failure {
    Bad(String),
    Lost(String),
}

/// What one server's side measured (the measured window, and its tasks however late they
/// completed).
pub struct Measured {
    /// Task level: `intended` the tasks intended in the window (enqueued), `completed` of
    /// those, `latency` their latency, `lag` the producers' schedule lag, `errors` by kind.
    pub stats: Stats,
    pub error_commands: BTreeMap<String, u64>,
    /// Tasks (any) completed in the window (the per-task ratios divide by it).
    pub completed_in_window: u64,
    /// Tasks (any) completed, and enqueued (every enqueue step answered), in the window
    /// while the side was active (`tasks_per_sec`, `enqueue_per_sec`); with one server the
    /// side is always active.
    pub completed_active: u64,
    pub enqueued_active: u64,
    /// Commands and round trips (steps) written in the window, on every connection.
    pub commands: u64,
    pub round_trips: u64,
    pub dequeues: u64,
    pub empty_dequeues: u64,
    /// Task ids found that were not outstanding, over the whole run.
    pub foreign: u64,
}

impl Measured {
    fn new(window_end: u64) -> Measured {
        Measured {
            stats: Stats::new(window_end),
            error_commands: BTreeMap::new(),
            completed_in_window: 0,
            completed_active: 0,
            enqueued_active: 0,
            commands: 0,
            round_trips: 0,
            dequeues: 0,
            empty_dequeues: 0,
            foreign: 0,
        }
    }
}

/// A task a producer is enqueueing (its intended time is in `outstanding`).
struct Task {
    task: TaskRef,
    counter: u64,
}

/// A task enqueued (started) and not yet dequeued: its intended time, and when its first
/// enqueue step was written and its last answered (what bounds its dequeue's waits).
struct Out {
    intended: u64,
    measured: bool,
    /// The first enqueue step's wait (stall.rs), once written whole with a reply floor.
    first: Option<Wait>,
    /// When its last enqueue step was answered.
    enqueued_at: Option<u64>,
}

/// The step a connection has written and is waiting for: which list, which step, how
/// many of its replies came.
#[derive(Clone, Copy)]
struct Flight {
    place: Place,
    step: usize,
    got: usize,
    written: bool,
}

#[derive(Default)]
struct Producer {
    task: Option<Task>,
    /// Tasks due but not yet started: (intended, measured).
    backlog: VecDeque<(u64, bool)>,
}

/// A task of a dequeue reply: its id and handle, (intended, measured) if it is ours, and
/// the span before its dequeue's reply in which nothing of it was due (stall.rs).
struct Taken {
    task: TaskRef,
    ours: Option<(u64, bool)>,
    wait: Option<Wait>,
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
    /// Done with its tasks while its server was inactive: its next dequeue waits for the
    /// server's next window.
    held: bool,
    /// Its last dequeue's wait, and the waits of the steps it wrote since that dequeue's
    /// reply: spans in which its tasks had nothing due (stall.rs).
    dequeue_wait: Option<Wait>,
    waits: Vec<Wait>,
}

/// What an idle producer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerMove {
    /// Start the first task of its backlog (open loop).
    Backlog,
    /// Start a new task now (capacity, under `max_queued`, in the window).
    New,
    /// Nothing: no task for it, or its server is inactive (it holds until its window).
    Hold,
}

impl ProducerMove {
    /// `room`: capacity mode, before the window's end, under `max_queued`.
    pub fn of(active: bool, backlog: bool, room: bool) -> ProducerMove {
        if !active {
            ProducerMove::Hold
        } else if backlog {
            ProducerMove::Backlog
        } else if room {
            ProducerMove::New
        } else {
            ProducerMove::Hold
        }
    }
}

/// What a consumer whose step (or wait) is done does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerMove {
    Send(Place),
    /// A new dequeue while its server is inactive: it waits for the server's next window.
    Hold,
}

impl ConsumerMove {
    /// `next`: what it would write. Only a new dequeue waits: a consumer mid-task finishes
    /// the task's steps and its batch whatever the window.
    pub fn of(next: Place, active: bool) -> ConsumerMove {
        if next == Place::Dequeue && !active {
            ConsumerMove::Hold
        } else {
            ConsumerMove::Send(next)
        }
    }
}

/// The run's clock marks: the schedule's start, the measured window's start and end.
#[derive(Clone, Copy)]
pub struct Window {
    pub start: u64,
    pub measure_from: u64,
    pub end: u64,
}

impl Window {
    fn holds(&self, t: u64) -> bool {
        t >= self.measure_from && t < self.end
    }
}

/// One server's side of the run.
pub struct Side<'a> {
    l: &'a Lifecycle,
    seed: u64,
    capacity: bool,
    server: String,
    /// Producer p is link p; consumer c is link producers + c.
    pub links: Vec<Link>,
    flights: Vec<Option<Flight>>,
    rngs: Vec<Pcg64>,
    producers: Vec<Producer>,
    consumers: Vec<Consumer>,
    /// Tasks enqueued (started) and not yet dequeued, by counter.
    outstanding: HashMap<u64, Out>,
    /// Tasks started and not completed (the capacity bound).
    in_system: u64,
    next_counter: u64,
    /// --tasks: capacity mode starts no more than this many tasks.
    quota: Option<u64>,
    consumers_started: bool,
    w: Window,
    /// In its server's window (always, with one server, and in the drain).
    pub active: bool,
    /// --reply-floor-us in ns: no reply comes sooner after its step is written (0: none).
    pub floor_ns: u64,
    pub m: Measured,
}

impl<'a> Side<'a> {
    /// `links`: its producers' then its consumers' connections, connected.
    pub fn new(
        l: &'a Lifecycle,
        seed: u64,
        capacity: bool,
        quota: Option<u64>,
        server: String,
        links: Vec<Link>,
        w: Window,
    ) -> Side<'a> {
        let n = links.len() as u64;
        Side {
            l,
            seed,
            capacity,
            server,
            links,
            flights: vec![None; n as usize],
            // link i of every server draws the same stream of the seed
            rngs: (0..n).map(|i| rng(seed, 1 + i)).collect(),
            producers: (0..l.producers).map(|_| Producer::default()).collect(),
            consumers: (0..l.consumers).map(|_| Consumer::default()).collect(),
            outstanding: HashMap::new(),
            in_system: 0,
            next_counter: 0,
            quota,
            consumers_started: false,
            w,
            active: true,
            floor_ns: 0,
            m: Measured::new(w.end),
        }
    }

    pub fn lost(&self, what: &str) -> Failure {
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
            written: false,
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
        self.outstanding.insert(
            counter,
            Out {
                intended,
                measured,
                first: None,
                enqueued_at: None,
            },
        );
        self.in_system += 1;
        if self.capacity {
            self.m.stats.wrote(intended, measured, now); // intended is now: no lag
        } else {
            self.m.stats.started(measured, now); // its lag was taken when it was due
        }
        self.producers[p].task = Some(Task {
            task: TaskRef {
                task: id,
                handle: id.to_vec(),
            },
            counter,
        });
        self.send(p, Place::Enqueue, 0, now);
    }

    /// Link `i`'s step is all written; `wait`: the span in which its reply cannot come.
    pub fn written(&mut self, i: usize, wait: Option<Wait>) {
        let Some(f) = self.flights[i].as_mut() else {
            return;
        };
        if f.written {
            return;
        }
        f.written = true;
        let (place, step) = (f.place, f.step);
        let p = self.producers.len();
        match place {
            Place::Enqueue if step == 0 => {
                let counter = self.producers[i].task.as_ref().map(|t| t.counter);
                if let Some(out) = counter.and_then(|n| self.outstanding.get_mut(&n)) {
                    out.first = wait;
                }
            }
            Place::Dequeue => self.consumers[i - p].dequeue_wait = wait,
            Place::Process | Place::Batch => self.consumers[i - p].waits.extend(wait),
            Place::Enqueue => {}
        }
    }

    /// The span before a dequeue's reply in which nothing of task `out` was due, the
    /// dequeue's wait being `dequeue`: the first enqueue step's wait if the dequeue was
    /// written before that step (a blocked pop cannot return the task before the push
    /// could reach the server and the reply come back, and the producer waits for the
    /// same step's reply); the dequeue's own wait if the task was wholly enqueued before
    /// the dequeue was written; else none.
    fn pop_wait(&self, out: &Out, dequeue: Option<Wait>) -> Option<Wait> {
        let d = dequeue?;
        let started = |w: Wait| w.1 - self.floor_ns; // when the write began
        if let Some(first) = out.first {
            if d.0 <= started(first) {
                return Some(first);
            }
        }
        out.enqueued_at.filter(|&r| r <= started(d)).map(|_| d)
    }

    /// Open loop: give the due task to the producer with the least backlog. The schedule's
    /// lag is the engine's: how late it handled the task (`now`), not how long the task then
    /// waited for a producer, which is the modelled application's (its producer threads all
    /// busy) and is in the task's latency, timed from `intended`.
    pub fn dispatch(&mut self, intended: u64, measured: bool, now: u64) {
        if measured {
            self.m.stats.intended += 1;
        }
        self.m.stats.lagged(intended, measured, now);
        let load = |p: &Producer| p.backlog.len() + usize::from(p.task.is_some());
        let p = (0..self.producers.len())
            .min_by_key(|&p| load(&self.producers[p]))
            .expect("one producer or more");
        self.producers[p].backlog.push_back((intended, measured));
    }

    /// Start what idle producers have to start: their backlog (open loop), or a new task
    /// while under `max_queued` and in the window (capacity); nothing while inactive.
    pub fn feed_producers(&mut self, now: u64) {
        for p in 0..self.producers.len() {
            if self.producers[p].task.is_some() {
                continue;
            }
            let backlog = !self.producers[p].backlog.is_empty();
            let room = self.capacity
                && now < self.w.end
                && (self.quota.is_some() || self.in_system < self.l.max_queued)
                && self.quota.is_none_or(|q| self.next_counter < q);
            match ProducerMove::of(self.active, backlog, room) {
                ProducerMove::Backlog => {
                    let (intended, measured) = self.producers[p].backlog.pop_front().unwrap();
                    self.start(p, intended, measured, now);
                }
                ProducerMove::New => {
                    // --tasks: every task of the fixed amount counts, from the first
                    let measured = self.quota.is_some() || now >= self.w.measure_from;
                    if measured {
                        self.m.stats.intended += 1;
                    }
                    self.start(p, now, measured, now);
                }
                ProducerMove::Hold => {}
            }
        }
    }

    /// Consumer `c` goes on with `next` (written now), or holds if that is a new dequeue
    /// and its server is inactive.
    fn go_on(&mut self, c: usize, next: Place, now: u64) {
        match ConsumerMove::of(next, self.active) {
            ConsumerMove::Send(place) => {
                self.consumers[c].held = false;
                self.send(self.producers.len() + c, place, 0, now);
            }
            ConsumerMove::Hold => self.consumers[c].held = true,
        }
    }

    /// Every consumer's first dequeue (held while the side is inactive).
    pub fn start_consumers(&mut self, now: u64) {
        if self.quota.is_some() && !self.consumers_started {
            return; // --tasks: after every task is enqueued (start_consumers_when_enqueued)
        }
        self.consumers_started = true;
        for c in 0..self.consumers.len() {
            self.go_on(c, Place::Dequeue, now);
        }
    }

    /// --tasks: the consumers start once every task of the quota is in the queue, so no
    /// dequeue ever waits for a task and each takes the same path (callgrind's count per
    /// task then repeats: a blocked pop and its wake-up cost more than a pop that finds one).
    pub fn start_consumers_when_enqueued(&mut self, now: u64) {
        let enqueued = self.quota.is_some_and(|q| self.next_counter >= q)
            && self.producers.iter().all(|p| p.task.is_none());
        if enqueued && !self.consumers_started {
            self.consumers_started = true;
            self.start_consumers(now);
        }
    }

    /// Consumers whose wait (an empty dequeue, a task's work, their server's window) is
    /// over go on.
    pub fn wake_consumers(&mut self, now: u64) {
        for c in 0..self.consumers.len() {
            if self.consumers[c].held && self.active {
                self.go_on(c, Place::Dequeue, now);
            }
            if self.consumers[c].resume_at.is_some_and(|t| t <= now) {
                self.consumers[c].resume_at = None;
                let place = match self.consumers[c].resume_to {
                    Resume::Dequeue => Place::Dequeue,
                    Resume::Process => Place::Process,
                };
                self.go_on(c, place, now);
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

    /// A reply read at `now` on link `i`; `stalls` taints the tasks it completes.
    pub fn on_reply(
        &mut self,
        i: usize,
        r: &Reply,
        now: u64,
        stalls: &Detector,
    ) -> Result<(), Failure> {
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
            self.consumer_step_done(i - self.producers.len(), f, now, stalls);
        }
        Ok(())
    }

    fn enqueue_step_done(&mut self, p: usize, step: usize, now: u64) {
        if step + 1 < self.l.enqueue.len() {
            self.send(p, Place::Enqueue, step + 1, now);
            return;
        }
        let counter = self.producers[p].task.take().map(|t| t.counter);
        if let Some(out) = counter.and_then(|n| self.outstanding.get_mut(&n)) {
            out.enqueued_at = Some(now);
        }
        if self.w.holds(now) && self.active {
            self.m.enqueued_active += 1;
        }
        self.feed_producers(now);
    }

    /// A task done: timed if it is ours and was intended in the window. Consumer `c`'s
    /// waits since the dequeue, and the task's wait before it, excuse the stalls inside
    /// them.
    fn complete(
        &mut self,
        c: usize,
        t: (Option<(u64, bool)>, Option<Wait>),
        now: u64,
        stalls: &Detector,
    ) {
        let (Some((intended, measured)), before) = t else {
            return;
        };
        self.in_system -= 1;
        if self.w.holds(now) {
            self.m.completed_in_window += 1;
            self.m.completed_active += u64::from(self.active);
        }
        let waits = &mut self.consumers[c].waits;
        let mine = waits.len();
        waits.extend(before);
        let tainted = stalls.taints(intended, now, waits);
        waits.truncate(mine);
        self.m.stats.completed(intended, measured, now, tainted);
    }

    fn consumer_step_done(&mut self, c: usize, f: Flight, now: u64, stalls: &Detector) {
        let i = self.producers.len() + c;
        match f.place {
            Place::Dequeue => {
                let found = std::mem::take(&mut self.consumers[c].found);
                let counted = self.w.holds(now);
                if found.is_empty() {
                    self.m.empty_dequeues += u64::from(counted);
                    if self.l.empty_wait_ns == 0 {
                        self.go_on(c, Place::Dequeue, now);
                    } else {
                        self.consumers[c].resume_at = Some(now + self.l.empty_wait_ns);
                        self.consumers[c].resume_to = Resume::Dequeue;
                    }
                    return;
                }
                self.m.dequeues += u64::from(counted);
                let dequeue = self.consumers[c].dequeue_wait.take();
                self.consumers[c].waits.clear();
                let mut taken = Vec::with_capacity(found.len());
                for f in found {
                    let out = reply::counter_of(&f.task, self.seed)
                        .and_then(|n| self.outstanding.remove(&n));
                    // over the whole run: leftovers of an earlier run come first
                    self.m.foreign += u64::from(out.is_none());
                    taken.push(Taken {
                        task: TaskRef {
                            task: f.task,
                            handle: f.handle,
                        },
                        ours: out.as_ref().map(|o| (o.intended, o.measured)),
                        wait: out.as_ref().and_then(|o| self.pop_wait(o, dequeue)),
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
                        self.complete(c, (t.ours, t.wait), now, stalls);
                    }
                    if self.l.work_ns == 0 {
                        self.go_on(c, Place::Dequeue, now);
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
                    let t = &self.consumers[c].taken[at];
                    self.complete(c, (t.ours, t.wait), now, stalls);
                }
                if more {
                    self.start_task(c, now);
                } else if !self.l.batch.is_empty() {
                    self.send(i, Place::Batch, 0, now);
                } else {
                    self.consumers[c].taken.clear();
                    self.go_on(c, Place::Dequeue, now);
                }
            }
            Place::Batch => {
                if f.step + 1 < self.l.batch.len() {
                    self.send(i, Place::Batch, f.step + 1, now);
                    return;
                }
                let taken = std::mem::take(&mut self.consumers[c].taken);
                for t in &taken {
                    self.complete(c, (t.ours, t.wait), now, stalls);
                }
                self.go_on(c, Place::Dequeue, now);
            }
            Place::Enqueue => unreachable!("consumers do not enqueue"),
        }
    }

    /// The earliest wait of an idle consumer.
    pub fn next_resume(&self) -> Option<u64> {
        self.consumers.iter().filter_map(|c| c.resume_at).min()
    }

    /// Every measured task completed.
    pub fn drained(&self) -> bool {
        self.m.stats.completed >= self.m.stats.intended
    }

    /// --tasks: every task of the quota started and done.
    pub fn quota_done(&self) -> bool {
        self.quota
            .is_some_and(|q| self.next_counter >= q && self.in_system == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inactive_producer_holds_even_with_a_backlog_or_room() {
        for backlog in [false, true] {
            for room in [false, true] {
                assert_eq!(ProducerMove::of(false, backlog, room), ProducerMove::Hold);
            }
        }
        // active: its backlog first (open loop), else a new task where there is room
        assert_eq!(ProducerMove::of(true, true, true), ProducerMove::Backlog);
        assert_eq!(ProducerMove::of(true, true, false), ProducerMove::Backlog);
        assert_eq!(ProducerMove::of(true, false, true), ProducerMove::New);
        assert_eq!(ProducerMove::of(true, false, false), ProducerMove::Hold);
    }

    #[test]
    fn an_inactive_consumer_finishes_its_task_but_holds_its_next_dequeue() {
        for place in [Place::Process, Place::Batch] {
            // mid-task: its steps and its batch go on whatever the window
            assert_eq!(ConsumerMove::of(place, false), ConsumerMove::Send(place));
            assert_eq!(ConsumerMove::of(place, true), ConsumerMove::Send(place));
        }
        assert_eq!(ConsumerMove::of(Place::Dequeue, false), ConsumerMove::Hold);
        assert_eq!(
            ConsumerMove::of(Place::Dequeue, true),
            ConsumerMove::Send(Place::Dequeue)
        );
    }
}
