//! The engine's own stalls: intervals in which the loop was due to run but did not (its CPU
//! taken by another task, an interrupt, the hypervisor, or the process stopped). Every
//! request due or answered meanwhile is timed late by the engine, not by the server, so a
//! request whose [intended time, reply read] overlaps a stall is *tainted*: counted apart
//! and kept out of the latency histogram (its schedule lag still counts).
//!
//! Except where the request provably had nothing for the engine to do: behind a delay
//! proxy (--rtt) no reply can arrive sooner than the round trip after its request was
//! written, so a stall wholly inside [written, written + round trip] (a `Wait`) delayed
//! neither the send nor the read. Without such waits a request in flight for 20 ms on a VM
//! that stalls the engine 20-50 times a second would nearly always be tainted.
//!
//! Two kinds, both seen only on the engine's side of the socket:
//! (a) the loop woke later than the timerfd deadline it armed (the next intended send, or
//!     the window's or drain's end) by more than the threshold: the stall is [deadline, wake]
//!     (from the moment it blocked, if the deadline had already passed then);
//! (b) two consecutive clock readings more than the threshold apart while the loop was not
//!     blocked in epoll_wait (preempted mid-work): the stall is that gap. The loop reads the
//!     clock after every connection it reads or writes, so one step of its own work is far
//!     below the threshold.
//!
//! Why a SERVER stall can never make one (no coordinated omission): a server that stops
//! answering only leaves the engine blocked in epoll_wait, and that wait is bounded by the
//! timerfd, whose deadlines (the intended send times) still fire on time; the replies that
//! pile up meanwhile are then read one connection per clock reading. Waiting for the server
//! is never counted as a stall, so the requests a server pause delayed stay in the histogram
//! with their full latency.

/// A span [from, to] (ns) in which a request's reply could not yet have arrived and
/// nothing of it was due: from the end of the write that sent it (its last byte) to the
/// start of that write plus the least time a reply takes (--reply-floor-us).
pub type Wait = (u64, u64);

/// The wait of a request written by a write call that started at `before` and returned at
/// `after`, its replies taking at least `floor` ns (None: no floor, or too short a span).
pub fn wait_after_write(before: u64, after: u64, floor: u64) -> Option<Wait> {
    (floor > 0 && before + floor > after).then_some((after, before + floor))
}

/// One stall, [start, end] in CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub start: u64,
    pub end: u64,
}

impl Stall {
    /// Whether the stall overlaps a request's [intended, read] (by more than an instant).
    pub fn overlaps(&self, intended: u64, read: u64) -> bool {
        self.start < read && self.end > intended
    }

    /// Whether what the stall overlaps of [intended, read] lies inside one of `waits`.
    fn excused(&self, intended: u64, read: u64, waits: &[Wait]) -> bool {
        let (a, b) = (self.start.max(intended), self.end.min(read));
        waits.iter().any(|&(from, to)| from <= a && b <= to)
    }
}

/// The most recent stalls kept one by one; older ones only by the latest end among them.
pub const RING: usize = 64;

/// Stalls in the order they ended, newest last: a ring of the last RING, plus the latest
/// end of those it dropped (a request intended before that end overlapped a dropped stall,
/// since every stall known when a reply is read began before that read).
#[derive(Debug)]
pub struct Ring {
    stalls: [Stall; RING],
    len: usize,
    next: usize,
    dropped_end: u64,
}

impl Default for Ring {
    fn default() -> Ring {
        Ring {
            stalls: [Stall { start: 0, end: 0 }; RING],
            len: 0,
            next: 0,
            dropped_end: 0,
        }
    }
}

impl Ring {
    pub fn push(&mut self, stall: Stall) {
        if self.len == RING {
            self.dropped_end = self.dropped_end.max(self.stalls[self.next].end);
        } else {
            self.len += 1;
        }
        self.stalls[self.next] = stall;
        self.next = (self.next + 1) % RING;
    }

    /// Newest first.
    fn newest_first(&self) -> impl Iterator<Item = &Stall> {
        (1..=self.len).map(move |k| &self.stalls[(self.next + RING - k) % RING])
    }

    /// Whether a request intended at `intended` and read at `read` overlapped a stall
    /// outside its `waits`. Stalls end in the order they were recorded, so the scan stops at
    /// the first that ended at or before `intended`: with no recent stall it looks at one.
    /// A dropped stall always taints (its span is no longer known).
    pub fn taints(&self, intended: u64, read: u64, waits: &[Wait]) -> bool {
        for s in self.newest_first() {
            if s.end <= intended {
                return false;
            }
            if s.overlaps(intended, read) && !s.excused(intended, read, waits) {
                return true;
            }
        }
        self.dropped_end > intended
    }
}

/// What the report says of the stalls from the measured window's start to the run's end.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
}

/// The stall detector the loop feeds with its clock readings.
pub struct Detector {
    /// Above this gap (ns) the engine stalled; 0: never (the feature off).
    threshold: u64,
    /// Stalls ending after this count in the summary (the measured window's start).
    count_from: u64,
    /// The last clock reading of the loop while it ran.
    last: u64,
    pub ring: Ring,
    pub summary: Summary,
}

impl Detector {
    pub fn new(threshold_ns: u64, count_from: u64, now: u64) -> Detector {
        Detector {
            threshold: threshold_ns,
            count_from,
            last: now,
            ring: Ring::default(),
            summary: Summary::default(),
        }
    }

    fn record(&mut self, start: u64, end: u64) {
        self.ring.push(Stall { start, end });
        if end > self.count_from {
            let length = end - start;
            self.summary.count += 1;
            self.summary.total_ns += length;
            self.summary.max_ns = self.summary.max_ns.max(length);
        }
    }

    /// A clock reading `now` while running (not blocked since the last one): a gap above
    /// the threshold is a stall (b).
    pub fn ran_to(&mut self, now: u64) {
        if self.threshold > 0 && now > self.last + self.threshold {
            self.record(self.last, now);
        }
        self.last = self.last.max(now);
    }

    /// The loop, blocked in epoll_wait since `blocked_at` with the timer armed at
    /// `deadline`, read the clock at `now` on waking: later than it was due (the deadline,
    /// or `blocked_at` if that had passed) by more than the threshold is a stall (a). Any
    /// earlier wake (a reply) is not: the server's time is not the engine's.
    pub fn woke(&mut self, blocked_at: u64, deadline: u64, now: u64) {
        let due = deadline.max(blocked_at);
        if self.threshold > 0 && now > due + self.threshold {
            self.record(due, now);
        }
        self.last = self.last.max(now);
    }

    /// Whether the request intended at `intended`, its reply read at `read` (a reading
    /// already given to `ran_to`), overlapped a stall outside its `waits`. Never with the
    /// feature off.
    pub fn taints(&self, intended: u64, read: u64, waits: &[Wait]) -> bool {
        self.threshold > 0 && self.ring.taints(intended, read, waits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn overlap_is_of_the_open_intervals() {
        let s = Stall {
            start: 100,
            end: 200,
        };
        assert!(s.overlaps(50, 150)); // in flight when it began
        assert!(s.overlaps(150, 300)); // due during it
        assert!(s.overlaps(120, 180)); // inside it
        assert!(s.overlaps(50, 300)); // across it
        assert!(!s.overlaps(10, 100)); // read as it began
        assert!(!s.overlaps(200, 300)); // due as it ended
        assert!(!s.overlaps(300, 400));
    }

    #[test]
    fn the_ring_finds_an_old_stall_behind_newer_ones() {
        let mut r = Ring::default();
        assert!(!r.taints(0, 1_000, &[]));
        for k in 0..10u64 {
            r.push(Stall {
                start: 1_000 * k + 100,
                end: 1_000 * k + 300,
            });
        }
        assert!(r.taints(150, 160, &[])); // the oldest
        assert!(r.taints(50, 20_000, &[])); // long request: all of them
        assert!(r.taints(9_200, 9_250, &[])); // the newest
        assert!(!r.taints(9_300, 9_900, &[])); // after the newest
        assert!(!r.taints(400, 1_050, &[])); // between two
        assert!(!r.taints(10_000, 10_500, &[]));
    }

    #[test]
    fn stalls_dropped_from_the_ring_still_taint() {
        let mut r = Ring::default();
        let n = RING as u64 + 10;
        for k in 0..n {
            r.push(Stall {
                start: 1_000 * k,
                end: 1_000 * k + 10,
            });
        }
        assert_eq!(r.len, RING);
        // the first ten were dropped; a request across one of them is still tainted
        assert_eq!(r.dropped_end, 1_000 * 9 + 10);
        assert!(r.taints(5, 500, &[]));
        assert!(r.taints(5, 1_000 * n, &[]));
        // one after every dropped stall and before the next is not
        assert!(!r.taints(9_500, 9_900, &[]));
        assert!(r.taints(1_000 * (n - 1) + 5, 1_000 * n, &[]));
    }

    #[test]
    fn a_gap_while_running_is_a_stall_a_blocked_wait_is_not() {
        let mut d = Detector::new(200 * US, 0, 0);
        d.ran_to(100 * US);
        d.ran_to(250 * US); // 150 us: work, not a stall
        assert_eq!(d.summary.count, 0);
        d.ran_to(600 * US); // 350 us apart while running: preempted
        assert_eq!(
            d.ring.newest_first().next(),
            Some(&Stall {
                start: 250 * US,
                end: 600 * US
            })
        );
        // blocked 50 ms waiting for a server, timer armed 50 ms ahead, woke on time
        d.woke(600 * US, 50_600 * US, 50_650 * US);
        assert_eq!(d.summary.count, 1);
        // a reply woke it before its deadline: no stall however long it waited
        d.woke(50_650 * US, 90_000 * US, 80_000 * US);
        assert_eq!(d.summary.count, 1);
        // woke 5 ms after the deadline: the stall is [deadline, wake]
        d.woke(80_000 * US, 81_000 * US, 86_000 * US);
        assert_eq!(d.summary.count, 2);
        assert_eq!(d.summary.max_ns, 5_000 * US);
        assert_eq!(d.summary.total_ns, 5_350 * US);
        // the deadline had passed when it blocked: due at once
        d.woke(87_000 * US, 86_500 * US, 87_300 * US);
        assert_eq!(d.summary.count, 3);
        assert!(d.taints(86_900 * US, 87_300 * US, &[]));
        assert!(d.taints(80_500 * US, 87_300 * US, &[])); // in flight across two
        assert!(!d.taints(86_000 * US, 86_900 * US, &[])); // between them
    }

    #[test]
    fn the_requests_a_stall_touched_and_no_others() {
        let mut d = Detector::new(200 * US, 0, 0);
        d.ran_to(1_000 * US);
        d.woke(1_000 * US, 1_500 * US, 51_500 * US); // 50 ms late
        assert!(d.taints(1_400 * US, 51_600 * US, &[])); // sent before, read after
        assert!(d.taints(30_000 * US, 51_700 * US, &[])); // due during it, sent after
        assert!(!d.taints(51_500 * US, 51_700 * US, &[])); // due as it ended
        assert!(!d.taints(1_000 * US, 1_400 * US, &[])); // done before it
    }

    #[test]
    fn a_stall_inside_a_wait_for_a_reply_taints_nothing_one_outside_it_does() {
        // written at 1 ms (the write took 10 us), replies take at least 20 ms: a reply
        // cannot come before 21 ms
        let wait = wait_after_write(1_000 * US, 1_010 * US, 20_000 * US).unwrap();
        assert_eq!(wait, (1_010 * US, 21_000 * US));
        assert_eq!(wait_after_write(1_000 * US, 1_010 * US, 0), None);
        assert_eq!(wait_after_write(1_000 * US, 30_000 * US, 20_000 * US), None);
        let mut d = Detector::new(200 * US, 0, 5_000 * US);
        d.ran_to(5_500 * US); // a stall while the request waits for its reply
        assert!(!d.taints(900 * US, 21_100 * US, &[wait]));
        assert!(d.taints(900 * US, 21_100 * US, &[])); // no floor: tainted as before
        d.woke(5_500 * US, 21_000 * US, 21_000 * US); // blocked until the reply is due
        d.ran_to(21_400 * US); // a stall when the reply could have come
        assert!(d.taints(900 * US, 21_500 * US, &[wait]));
        let mut d = Detector::new(200 * US, 0, 800 * US);
        d.ran_to(1_100 * US); // a stall across the write: it may have delayed the send
        assert!(d.taints(900 * US, 21_100 * US, &[wait]));
        // a stall the ring dropped still taints, waits or not
        let mut r = Ring::default();
        for k in 0..RING as u64 + 1 {
            r.push(Stall {
                start: 2_000 * US + k,
                end: 2_000 * US + k + 1,
            });
        }
        assert!(r.taints(1_500 * US, 21_100 * US, &[wait]));
    }

    #[test]
    fn only_stalls_into_the_measured_window_are_summed_and_zero_turns_it_off() {
        let mut d = Detector::new(200 * US, 10_000 * US, 0);
        d.ran_to(1_000 * US); // warm-up stall
        d.ran_to(9_900 * US); // ends in warm-up
        d.ran_to(10_500 * US); // runs into the window: counted whole
        assert_eq!(
            d.summary,
            Summary {
                count: 1,
                total_ns: 600 * US,
                max_ns: 600 * US
            }
        );
        let mut off = Detector::new(0, 0, 0);
        off.ran_to(1_000_000 * US);
        off.woke(0, 0, 2_000_000 * US);
        assert_eq!(off.summary, Summary::default());
        assert!(!off.taints(0, 3_000_000 * US, &[]));
    }
}
