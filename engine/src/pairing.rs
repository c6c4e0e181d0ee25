//! Pairing in time: the one arrival stream cut into windows of `--switch-ms`, counted from
//! the schedule's start, window j going to server `order(j, k)` (A B B A, A B C C B A...),
//! so each server gets the full rate during its windows and a drift that is linear in
//! time falls alike on every server. With one server every window is server 0's and the
//! routing is today's: arrival n on connection n mod N.

use crate::schedule::Schedule;

/// The server of window `j` among `servers`: 0, 1, ..., k-1, k-1, ..., 1, 0, again.
pub fn order(j: u64, servers: usize) -> usize {
    let cycle = 2 * servers as u64;
    let p = j % cycle;
    if p < servers as u64 {
        p as usize
    } else {
        (cycle - 1 - p) as usize
    }
}

/// The server whose window holds `offset` (ns from the schedule's start).
pub fn server_at(offset: u64, window_ns: u64, servers: usize) -> usize {
    order(offset / window_ns.max(1), servers)
}

/// The start of the window after the one holding `offset` (ns from the schedule's start):
/// when the active server changes next.
pub fn switch_after(offset: u64, window_ns: u64) -> u64 {
    let w = window_ns.max(1);
    (offset / w + 1) * w
}

/// Where one arrival goes: its intended offset (ns from the schedule's start), its server,
/// and its connection among that server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub offset: u64,
    pub server: usize,
    pub conn: usize,
}

/// The arrival stream routed to servers by window and, within a server, round robin over
/// its connections.
pub struct Router {
    schedule: Schedule,
    window_ns: u64,
    servers: usize,
    connections: usize,
    /// Arrivals routed to each server so far.
    counts: Vec<u64>,
}

impl Router {
    pub fn new(schedule: Schedule, window_ns: u64, servers: usize, connections: usize) -> Router {
        Router {
            schedule,
            window_ns: window_ns.max(1),
            servers,
            connections,
            counts: vec![0; servers],
        }
    }

    pub fn next_slot(&mut self) -> Slot {
        let offset = self.schedule.next_offset();
        let server = server_at(offset, self.window_ns, self.servers);
        let m = self.counts[server];
        self.counts[server] += 1;
        Slot {
            offset,
            server,
            conn: (m % self.connections as u64) as usize,
        }
    }
}

/// What part of the measured period fell in one server's windows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cover {
    /// Its windows overlapping the measured period (one cut by either end counts).
    pub windows: u64,
    /// Nanoseconds of the measured period inside its windows.
    pub ns: u64,
}

/// How many j in [0, b) have j mod m == r.
fn below(b: u64, r: u64, m: u64) -> u64 {
    if b > r {
        (b - r - 1) / m + 1
    } else {
        0
    }
}

/// Each server's share of the measured period [from, end) (ns from the schedule's start).
pub fn cover(window_ns: u64, servers: usize, from: u64, end: u64) -> Vec<Cover> {
    let w = window_ns.max(1);
    let mut out = vec![Cover::default(); servers];
    if end <= from {
        return out;
    }
    let first = from / w;
    let last = (end - 1) / w; // the last window that overlaps, inclusive
    let mut add = |j: u64| {
        let overlap = end.min((j + 1) * w) - from.max(j * w);
        let c = &mut out[order(j, servers)];
        c.windows += 1;
        c.ns += overlap;
    };
    add(first);
    if last > first {
        add(last);
    }
    if last > first + 1 {
        // the windows between are whole: count them by their place in the cycle
        let m = 2 * servers as u64;
        for (s, c) in out.iter_mut().enumerate() {
            let mut n = 0;
            for r in [s as u64, m - 1 - s as u64] {
                n += below(last, r, m) - below(first + 1, r, m);
            }
            c.windows += n;
            c.ns += n * w;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rng;
    use crate::schedule::Arrival;

    #[test]
    fn the_order_goes_there_and_back() {
        let seq = |k: usize| (0..4 * k as u64).map(|j| order(j, k)).collect::<Vec<_>>();
        assert_eq!(seq(1), [0, 0, 0, 0]);
        assert_eq!(seq(2), [0, 1, 1, 0, 0, 1, 1, 0]);
        assert_eq!(
            seq(3),
            [0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0],
            "A B C C B A, twice"
        );
        // every server gets two windows of each cycle of 2k, mean position k - 1/2
        for k in 1..6 {
            for s in 0..k {
                let at: Vec<u64> = (0..2 * k as u64).filter(|&j| order(j, k) == s).collect();
                assert_eq!(at.len(), 2);
                assert_eq!(at[0] + at[1], 2 * k as u64 - 1);
            }
        }
    }

    #[test]
    fn the_active_server_follows_the_windows() {
        let w = 50_000_000; // 50 ms
                            // two servers: A B B A A B B A..., each window [j w, (j + 1) w)
        let at = |ms: u64| server_at(ms * 1_000_000, w, 2);
        assert_eq!(
            [0, 49, 50, 99, 100, 149, 150, 199, 200, 250].map(at),
            [0, 0, 1, 1, 1, 1, 0, 0, 0, 1]
        );
        assert_eq!(server_at(w - 1, w, 2), 0);
        assert_eq!(server_at(w, w, 2), 1);
        // one server: always it
        assert!((0..1000).all(|ms| server_at(ms * 1_000_000, w, 1) == 0));
        // the switch after any instant of a window is that window's end
        assert_eq!(switch_after(0, w), w);
        assert_eq!(switch_after(w - 1, w), w);
        assert_eq!(switch_after(w, w), 2 * w);
        // the active server at an arrival is the server the router sends it to
        let mut r = router(Arrival::Poisson, 3, 7_000_000, 3, 2);
        for _ in 0..10_000 {
            let s = r.next_slot();
            assert_eq!(s.server, server_at(s.offset, 7_000_000, 3));
        }
        // the time each server is active in a period is its cover
        let (from, end) = (1_000_000_007, 3_000_000_011);
        let mut ns = [0u64; 3];
        let mut t = from;
        while t < end {
            let next = switch_after(t, 7_000_000).min(end);
            ns[server_at(t, 7_000_000, 3)] += next - t;
            t = next;
        }
        let cover = cover(7_000_000, 3, from, end);
        assert_eq!(ns.to_vec(), cover.iter().map(|c| c.ns).collect::<Vec<_>>());
    }

    fn router(arrival: Arrival, seed: u64, window_ns: u64, k: usize, n: usize) -> Router {
        let schedule = Schedule::new(arrival, 20_000.0, rng(seed, 0));
        Router::new(schedule, window_ns, k, n)
    }

    #[test]
    fn windows_partition_the_stream() {
        let w = 3_000_000; // 3 ms windows at 20000/s: about 60 arrivals each
        let mut r = router(Arrival::Poisson, 5, w, 3, 4);
        let slots: Vec<Slot> = (0..20_000).map(|_| r.next_slot()).collect();
        let mut per_window: std::collections::BTreeMap<u64, Vec<&Slot>> = Default::default();
        for s in &slots {
            per_window.entry(s.offset / w).or_default().push(s);
        }
        // each arrival is in exactly one window, and a window's arrivals all go to its server
        let total: usize = per_window.values().map(|v| v.len()).sum();
        assert_eq!(total, slots.len());
        for (&j, in_window) in &per_window {
            assert!(in_window
                .iter()
                .all(|s| s.server == order(j, 3) && s.offset >= j * w && s.offset < (j + 1) * w));
        }
        // consecutive windows alternate A B C C B A and no window is skipped
        let windows: Vec<u64> = per_window.keys().copied().collect();
        assert_eq!(windows, (0..windows.len() as u64).collect::<Vec<_>>());
        // within a server, round robin over its own connections
        for server in 0..3 {
            let conns: Vec<usize> = slots
                .iter()
                .filter(|s| s.server == server)
                .map(|s| s.conn)
                .collect();
            assert!(conns.iter().enumerate().all(|(m, &c)| c == m % 4));
            // each about a third of the stream
            let share = conns.len() as f64 / slots.len() as f64;
            assert!((share - 1.0 / 3.0).abs() < 0.05, "{share}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_intended_times_whatever_the_servers() {
        for arrival in [Arrival::Poisson, Arrival::Constant] {
            let mut one = router(arrival, 9, 100_000_000, 1, 4);
            let mut two = router(arrival, 9, 100_000_000, 2, 4);
            let mut bare = Schedule::new(arrival, 20_000.0, rng(9, 0));
            for n in 0..50_000u64 {
                let (a, b) = (one.next_slot(), two.next_slot());
                assert_eq!(a.offset, b.offset);
                assert_eq!(a.offset, bare.next_offset());
                // one server: every arrival to it, arrival n on connection n mod N (as before)
                assert_eq!((a.server, a.conn), (0, (n % 4) as usize));
            }
        }
    }

    #[test]
    fn cover_splits_the_measured_period_between_the_servers() {
        let brute = |w: u64, k: usize, from: u64, end: u64| {
            let mut out = vec![Cover::default(); k];
            let mut j = from / w;
            while j * w < end {
                let overlap = end.min((j + 1) * w) - from.max(j * w);
                if overlap > 0 {
                    out[order(j, k)].windows += 1;
                    out[order(j, k)].ns += overlap;
                }
                j += 1;
            }
            out
        };
        for k in 1..5 {
            for (w, from, end) in [
                (100, 0, 1000),
                (100, 50, 1050),
                (100, 250, 260),
                (100, 199, 201),
                (7, 13, 10_000),
                (1000, 1000, 2000),
                (3, 0, 1),
            ] {
                let got = cover(w, k, from, end);
                assert_eq!(got, brute(w, k, from, end), "w {w} k {k} [{from}, {end})");
                assert_eq!(got.iter().map(|c| c.ns).sum::<u64>(), end - from);
            }
        }
        // a 1 s warmup and 10 s measured in 100 ms windows: 50 windows, 5 s each of two
        let two = cover(100_000_000, 2, 1_000_000_000, 11_000_000_000);
        assert!(two.iter().all(|c| c.windows == 50 && c.ns == 5_000_000_000));
        assert_eq!(cover(100, 2, 10, 10), vec![Cover::default(); 2]);
    }
}
