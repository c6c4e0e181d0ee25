//! The lifecycle run's one JSON object on stdout (the `.hgrm` text is report.rs's): one
//! server's report, or with several (paired in time) `Paired`: a report per server, over
//! its own tasks and windows, in --port order.

use crate::cli::Options;
use crate::lifecycle::Measured;
use crate::lifecycle_run::Run;
use crate::lifecycle_spec::Lifecycle;
use crate::pairing::Cover;
use crate::report::{self, Cpu, Lag, Stalls, MIN_SENT_SHARE, VERSION};
use crate::stall::Summary;
use crate::stats::CpuWindow;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub struct TaskLatency {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub count: u64,
}

#[derive(Serialize)]
pub struct Report {
    pub engine: &'static str,
    pub version: &'static str,
    pub mode: &'static str,
    /// The server (paired runs only; a one-port report is as in 0.4.0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Tasks/s intended; None: capacity.
    pub rate: Option<f64>,
    /// None: capacity.
    pub arrival: Option<&'static str>,
    pub duration_s: f64,
    /// Paired runs: this server's windows that overlap the measured window, and the
    /// seconds of it they cover (what `tasks_per_sec` and `enqueue_per_sec` divide by).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_s: Option<f64>,
    pub warmup_s: f64,
    pub seed: u64,
    pub producers: usize,
    pub consumers: usize,
    pub max_queued: u64,
    pub data_size: usize,
    /// Tasks intended in the measured window; of those, completed (by the drain's end),
    /// and not.
    pub enqueued: u64,
    pub completed: u64,
    pub left: u64,
    /// Tasks completed during the measured window, and tasks enqueued (every enqueue step
    /// answered) during it, per second of it (paired: during its windows, per second of
    /// them).
    pub tasks_per_sec: f64,
    pub enqueue_per_sec: f64,
    pub latency_us: TaskLatency,
    /// Producers' schedule lag (open loop; None in capacity).
    pub lag_us: Option<Lag>,
    pub behind: bool,
    pub behind_reasons: Vec<String>,
    /// Commands and round trips written in the window per task completed in it.
    pub commands_per_task: f64,
    pub round_trips_per_task: f64,
    pub dequeues: u64,
    pub empty_dequeues: u64,
    pub foreign: u64,
    pub tainted: u64,
    pub errors: BTreeMap<String, u64>,
    pub error_commands: BTreeMap<String, u64>,
    pub stalls: Stalls,
    pub engine_cpu_pct: f64,
    pub cpu: Cpu,
    pub hdr_unit: &'static str,
    pub hdr: String,
}

fn latency(h: &Histogram<u64>) -> TaskLatency {
    let q = |q: f64| {
        if h.is_empty() {
            0.0
        } else {
            report::us(h.value_at_quantile(q))
        }
    };
    TaskLatency {
        p50: q(0.5),
        p90: q(0.9),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
        max: if h.is_empty() {
            0.0
        } else {
            report::us(h.max())
        },
        mean: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
        count: h.len(),
    }
}

fn per(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// A paired run: the engine, its version and CPU, and one report per server.
#[derive(Serialize)]
pub struct Paired {
    pub engine: &'static str,
    pub version: &'static str,
    pub mode: &'static str,
    pub switch_ms: f64,
    pub cpu: Cpu,
    pub servers: Vec<Report>,
}

/// One server's report; `share`: paired, its port and its windows' share of the period.
pub fn build(
    o: &Options,
    l: &Lifecycle,
    m: &Measured,
    engine: (&CpuWindow, &Summary),
    share: Option<(u16, Cover)>,
) -> Report {
    let capacity = o.rate == 0.0;
    let s = &m.stats;
    let lag = (!capacity).then(|| {
        let h = &s.lag;
        let q = |q: f64| {
            if h.is_empty() {
                0.0
            } else {
                report::us(h.value_at_quantile(q))
            }
        };
        Lag {
            p50: q(0.5),
            p99: q(0.99),
            max: if h.is_empty() {
                0.0
            } else {
                report::us(h.max())
            },
        }
    });
    let mut behind_reasons = Vec::new();
    if let Some(lag) = &lag {
        if lag.p99 > o.behind_lag_us {
            behind_reasons.push(format!(
                "schedule lag p99 {:.0} us is above {:.0} us",
                lag.p99, o.behind_lag_us
            ));
        }
        if (s.sent_in_window as f64) < MIN_SENT_SHARE * s.intended as f64 {
            behind_reasons.push(format!(
                "started {} of {} intended tasks within the window (under {:.0}%)",
                s.sent_in_window,
                s.intended,
                MIN_SENT_SHARE * 100.0
            ));
        }
    }
    let (cpu, stalls) = engine;
    let cpu = report::cpu(cpu);
    let active_s = share.map(|(_, c)| c.ns as f64 / 1e9);
    let seconds = active_s.unwrap_or(o.duration_s);
    let per_second = |n: u64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    Report {
        engine: "regtrack-openloop",
        version: VERSION,
        mode: "lifecycle",
        port: share.map(|(port, _)| port),
        rate: (!capacity).then_some(o.rate),
        arrival: (!capacity).then(|| o.arrival.name()),
        duration_s: o.duration_s,
        windows: share.map(|(_, c)| c.windows),
        active_s,
        warmup_s: o.warmup_s,
        seed: o.seed,
        producers: l.producers,
        consumers: l.consumers,
        max_queued: l.max_queued,
        data_size: l.data_size,
        enqueued: s.intended,
        completed: s.completed,
        left: s.intended - s.completed,
        tasks_per_sec: per_second(m.completed_active),
        enqueue_per_sec: per_second(m.enqueued_active),
        latency_us: latency(&s.latency),
        lag_us: lag,
        behind: !behind_reasons.is_empty(),
        behind_reasons,
        commands_per_task: per(m.commands, m.completed_in_window),
        round_trips_per_task: per(m.round_trips, m.completed_in_window),
        dequeues: m.dequeues,
        empty_dequeues: m.empty_dequeues,
        foreign: m.foreign,
        tainted: s.tainted,
        errors: s.errors.clone(),
        error_commands: m.error_commands.clone(),
        stalls: report::stalls(stalls),
        engine_cpu_pct: (cpu.busy_fraction * 1000.0).round() / 10.0,
        cpu,
        hdr_unit: "ns",
        hdr: report::encode_hdr(&s.latency),
    }
}

/// The run's output line: one server's report, or with several the paired object.
pub fn output(o: &Options, l: &Lifecycle, run: &Run) -> String {
    let engine = (&run.cpu, &run.stalls);
    let text = if o.ports.len() == 1 {
        serde_json::to_string(&build(o, l, &run.servers[0], engine, None))
    } else {
        let servers = (0..o.ports.len())
            .map(|i| {
                build(
                    o,
                    l,
                    &run.servers[i],
                    engine,
                    Some((o.ports[i], run.cover[i])),
                )
            })
            .collect();
        serde_json::to_string(&Paired {
            engine: "regtrack-openloop",
            version: VERSION,
            mode: "lifecycle",
            switch_ms: o.switch_ms,
            cpu: report::cpu(&run.cpu),
            servers,
        })
    };
    text.expect("a report serializes")
}
