//! What the measured window recorded, for one server: latency and schedule lag histograms
//! and counts; and the engine's own CPU time over the window (one for all servers).

use crate::sys;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Histograms hold nanoseconds from 1 ns to one hour at 3 significant digits.
pub const HIGHEST_NS: u64 = 3_600 * 1_000_000_000;

pub struct Stats {
    /// Reply complete (the last of a pipelined request's replies) minus intended time.
    pub latency: Histogram<u64>,
    /// Write time minus intended time.
    pub lag: Histogram<u64>,
    /// Requests the schedule placed in the measured window.
    pub intended: u64,
    /// Of those, written by the end of the window, and written at all.
    pub sent_in_window: u64,
    pub sent: u64,
    pub completed: u64,
    /// Measured requests with no reply by the end of the drain.
    pub timeouts: u64,
    /// Completed measured requests that overlapped a stall of the engine (stall.rs): in
    /// `completed` and `lag`, not in `latency`.
    pub tainted: u64,
    pub errors: BTreeMap<String, u64>,
    window_end: u64,
}

/// The engine's CPU clock at the measured window's start and end as the loop saw them.
#[derive(Default)]
pub struct CpuWindow {
    /// (wall ns, user s, sys s)
    pub start: Option<(u64, f64, f64)>,
    pub end: Option<(u64, f64, f64)>,
}

impl CpuWindow {
    /// Note the CPU clock the first time the loop sees the window open and close.
    pub fn mark(&mut self, now: u64, from: u64, end: u64) {
        if self.start.is_none() && now >= from {
            let (user, system) = sys::cpu_seconds();
            self.start = Some((now, user, system));
        }
        if self.end.is_none() && now >= end {
            let (user, system) = sys::cpu_seconds();
            self.end = Some((now, user, system));
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, 3).expect("valid bounds")
}

impl Stats {
    /// `window_end`: the measured window's end (ns); a write after it is late.
    pub fn new(window_end: u64) -> Stats {
        Stats {
            latency: histogram(),
            lag: histogram(),
            intended: 0,
            sent_in_window: 0,
            sent: 0,
            completed: 0,
            timeouts: 0,
            tainted: 0,
            errors: BTreeMap::new(),
            window_end,
        }
    }

    /// A request written at `now`.
    pub fn wrote(&mut self, intended: u64, measured: bool, now: u64) {
        self.started(measured, now);
        self.lagged(intended, measured, now);
    }

    /// A request (or a task's enqueue) written at `now`, its lag recorded elsewhere.
    pub fn started(&mut self, measured: bool, now: u64) {
        if measured {
            self.sent += 1;
            if now < self.window_end {
                self.sent_in_window += 1;
            }
        }
    }

    /// The engine handled what was due at `intended` at `now`: how late its schedule ran.
    pub fn lagged(&mut self, intended: u64, measured: bool, now: u64) {
        if measured {
            self.lag
                .saturating_record(now.saturating_sub(intended).max(1));
        }
    }

    /// A request whose last reply was read at `now`; `tainted`: it overlapped a stall of
    /// the engine, so its latency is the engine's as much as the server's and is left out.
    pub fn completed(&mut self, intended: u64, measured: bool, now: u64, tainted: bool) {
        if measured {
            self.completed += 1;
            if tainted {
                self.tainted += 1;
            } else {
                self.latency
                    .saturating_record(now.saturating_sub(intended).max(1));
            }
        }
    }
}
