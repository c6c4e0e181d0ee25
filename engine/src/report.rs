//! The run's one JSON object on stdout, and the `.hgrm` percentile distribution. With one
//! server the object is that server's report; with several, `Paired`: the reports of each
//! (over its own requests) in --port order.

use crate::cli::Options;
use crate::engine::Measured;
use crate::pairing::Cover;
use crate::stall::Summary;
use crate::stats::{CpuWindow, Stats};
use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Below this share of the intended requests written in the window, the engine is behind.
pub const MIN_SENT_SHARE: f64 = 0.99;

#[derive(Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub count: u64,
}

#[derive(Serialize)]
pub struct Lag {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The engine's own stalls (stall.rs) from the measured window's start to the run's end.
#[derive(Serialize, Clone)]
pub struct Stalls {
    pub count: u64,
    pub total_ms: f64,
    pub max_ms: f64,
}

#[derive(Serialize, Clone)]
pub struct Cpu {
    pub user_s: f64,
    pub sys_s: f64,
    /// (user + sys) / wall over the measured window; the loop sleeps in epoll, never spins.
    pub busy_fraction: f64,
}

#[derive(Serialize)]
pub struct Report {
    pub version: String,
    /// The server (paired runs only; a one-port report is as before 0.2.0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub arrival: &'static str,
    pub rate_intended: f64,
    pub duration_s: f64,
    /// Paired runs: this server's windows that overlap the measured period, and the
    /// seconds of it they cover (what `achieved_rate` divides by).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_s: Option<f64>,
    pub warmup_s: f64,
    pub connections: usize,
    pub pipeline: u32,
    pub seed: u64,
    pub intended: u64,
    pub sent: u64,
    pub sent_in_window: u64,
    pub completed: u64,
    pub errors: BTreeMap<String, u64>,
    pub timeouts: u64,
    /// Completed requests that overlapped a stall of the engine: in `completed` and
    /// `lag_us`, not in `latency_us` nor `hdr`.
    pub tainted: u64,
    pub achieved_rate: f64,
    pub latency_us: Latency,
    pub lag_us: Lag,
    pub stalls: Stalls,
    pub cpu: Cpu,
    pub behind: bool,
    pub behind_reasons: Vec<String>,
    pub hdr_unit: &'static str,
    pub hdr: String,
}

pub fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn latency(h: &Histogram<u64>) -> Latency {
    let q = |q: f64| {
        if h.is_empty() {
            0.0
        } else {
            us(h.value_at_quantile(q))
        }
    };
    Latency {
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p999: q(0.999),
        max: if h.is_empty() { 0.0 } else { us(h.max()) },
        mean: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
        count: h.len(),
    }
}

/// A paired run: the engine's version and CPU, and one report per server in --port order.
#[derive(Serialize)]
pub struct Paired {
    pub version: String,
    pub switch_ms: f64,
    pub cpu: Cpu,
    pub servers: Vec<Report>,
}

pub fn cpu(window: &CpuWindow) -> Cpu {
    match (window.start, window.end) {
        (Some((t0, u0, s0)), Some((t1, u1, s1))) if t1 > t0 => {
            let wall = (t1 - t0) as f64 / 1e9;
            Cpu {
                user_s: u1 - u0,
                sys_s: s1 - s0,
                busy_fraction: ((u1 - u0) + (s1 - s0)) / wall,
            }
        }
        _ => Cpu {
            user_s: 0.0,
            sys_s: 0.0,
            busy_fraction: 0.0,
        },
    }
}

/// The histogram as HdrHistogram's V2 compressed encoding in base64 (what `HdrHistogram`
/// libraries decode, and what an interval log line holds).
pub fn encode_hdr(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("in-memory serialization");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Why the engine did not keep its schedule, if it did not.
fn behind(o: &Options, stats: &Stats, lag: &Lag) -> Vec<String> {
    let mut reasons = Vec::new();
    if lag.p99 > o.behind_lag_us {
        reasons.push(format!(
            "schedule lag p99 {:.0} us is above {:.0} us",
            lag.p99, o.behind_lag_us
        ));
    }
    if (stats.sent_in_window as f64) < MIN_SENT_SHARE * stats.intended as f64 {
        reasons.push(format!(
            "wrote {} of {} intended requests within the window (under {:.0}%)",
            stats.sent_in_window,
            stats.intended,
            MIN_SENT_SHARE * 100.0
        ));
    }
    reasons
}

pub fn stalls(s: &Summary) -> Stalls {
    Stalls {
        count: s.count,
        total_ms: s.total_ns as f64 / 1e6,
        max_ms: s.max_ns as f64 / 1e6,
    }
}

/// One server's report: `share` is its port and what its windows covered in a paired run,
/// None with one server (the whole measured window). `stall_summary`: the engine's, the
/// same for every server.
pub fn build(
    o: &Options,
    stats: &Stats,
    cpu_window: &CpuWindow,
    stall_summary: &Summary,
    share: Option<(u16, Cover)>,
) -> Report {
    let lag = {
        let h = &stats.lag;
        let q = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                us(h.value_at_quantile(q))
            }
        };
        Lag {
            p50: q(0.5),
            p99: q(0.99),
            max: if h.is_empty() { 0.0 } else { us(h.max()) },
        }
    };
    let behind_reasons = behind(o, stats, &lag);
    let measured_s = match share {
        Some((_, cover)) => cover.ns as f64 / 1e9,
        None => o.duration_s,
    };
    Report {
        version: VERSION.to_string(),
        port: share.map(|(port, _)| port),
        arrival: o.arrival.name(),
        rate_intended: o.rate,
        duration_s: o.duration_s,
        windows: share.map(|(_, cover)| cover.windows),
        measured_s: share.map(|_| measured_s),
        warmup_s: o.warmup_s,
        connections: o.connections,
        pipeline: o.pipeline,
        seed: o.seed,
        intended: stats.intended,
        sent: stats.sent,
        sent_in_window: stats.sent_in_window,
        completed: stats.completed,
        errors: stats.errors.clone(),
        timeouts: stats.timeouts,
        tainted: stats.tainted,
        achieved_rate: if measured_s > 0.0 {
            stats.completed as f64 / measured_s
        } else {
            0.0
        },
        latency_us: latency(&stats.latency),
        lag_us: lag,
        stalls: stalls(stall_summary),
        cpu: cpu(cpu_window),
        behind: !behind_reasons.is_empty(),
        behind_reasons,
        hdr_unit: "ns",
        hdr: encode_hdr(&stats.latency),
    }
}

/// The run's output line: one server's report, or with several the paired object.
pub fn output(o: &Options, m: &Measured) -> String {
    let text = if o.ports.len() == 1 {
        serde_json::to_string(&build(o, &m.servers[0], &m.cpu, &m.stalls, None))
    } else {
        let servers = (0..o.ports.len())
            .map(|i| {
                let share = Some((o.ports[i], m.cover[i]));
                build(o, &m.servers[i], &m.cpu, &m.stalls, share)
            })
            .collect();
        serde_json::to_string(&Paired {
            version: VERSION.to_string(),
            switch_ms: o.switch_ms,
            cpu: cpu(&m.cpu),
            servers,
        })
    };
    text.expect("a report serializes")
}

/// HdrHistogram's percentile distribution text (`outputPercentileDistribution`, 5 ticks per
/// half distance) with values in milliseconds, as `.hgrm` files hold them.
pub fn hgrm(h: &Histogram<u64>) -> String {
    const SCALE: f64 = 1e6; // ns -> ms
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value = v.value_iterated_to() as f64 / SCALE;
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{value:12.3} {q:2.12} {total:10} {:14.2}",
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(out, "{value:12.3} {q:2.12} {total:10}");
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean(), h.stdev(), h.max() as f64)
    };
    let _ = writeln!(
        out,
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]",
        mean / SCALE,
        sd / SCALE
    );
    let _ = writeln!(
        out,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        max / SCALE,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn the_hdr_export_decodes_to_the_same_histogram() {
        let mut h = Histogram::<u64>::new_with_bounds(1, crate::stats::HIGHEST_NS, 3).unwrap();
        for v in [1_000u64, 25_000, 25_000, 200_000_000] {
            h.record(v).unwrap();
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encode_hdr(&h))
            .unwrap();
        let back: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .unwrap();
        assert_eq!(back, h);
    }

    #[test]
    fn hgrm_ends_at_the_max_with_the_total_count() {
        let mut h = Histogram::<u64>::new_with_bounds(1, crate::stats::HIGHEST_NS, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let text = hgrm(&h);
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let last: Vec<&str> = rows.last().unwrap().split_whitespace().collect();
        assert_eq!(last[0], "1.000"); // 1,000,000 ns = 1 ms
        assert_eq!(last[1], "1.000000000000");
        assert_eq!(last[2], "1000");
        assert!(text.contains("Total count    =         1000]"));
    }
}
