//! The command line: `--name value` or `--name=value`; a bad value is one line (exit 2).

use crate::schedule::Arrival;

pub const USAGE: &str = "usage: regtrack-openloop --spec FILE --rate R [--host H] \
[--port P [--port P2 ...] [--switch-ms W]] [--connections N (per server)] \
[--arrival constant|poisson] [--duration S] [--warmup S] [--seed K] [--pipeline K] \
[--max-in-flight M (per connection)] [--drain S] [--behind-lag-us U] [--stall-us U] \
[--reply-floor-us U] [--spin-us U] [--hgrm FILE (one port)] | regtrack-openloop --lifecycle FILE [--host H] \
[--port P [--port P2 ...] --switch-ms W] [--rate R (tasks/s; none or 0: capacity)] \
[--arrival constant|poisson] [--duration S | --tasks N] [--warmup S] [--seed K] [--drain S] \
[--behind-lag-us U] [--stall-us U] [--reply-floor-us U] [--spin-us U] [--hgrm FILE (one port)] | \
regtrack-openloop delay \
--upstream HOST:PORT --one-way-us N [--listen HOST:PORT] [--behind-us U]";

/// The default --drain of each mode: replies still outstanding (latency), tasks still
/// in the queues (lifecycle).
const DRAIN_S: f64 = 2.0;
const LIFECYCLE_DRAIN_S: f64 = 5.0;

/// The port when no --port is given.
pub const DEFAULT_PORT: u16 = 6379;

#[derive(Debug, Clone)]
pub struct Options {
    pub host: String,
    /// The servers, all on `host`, in the order given (one --port each; 6379 when none).
    pub ports: Vec<u16>,
    /// With two servers or more: the length of one server's turn of the arrival stream.
    pub switch_ms: f64,
    /// Connections to each server.
    pub connections: usize,
    pub rate: f64,
    pub arrival: Arrival,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub seed: u64,
    pub pipeline: u32,
    pub spec: String,
    /// The task lifecycle file (lifecycle mode; exclusive with `spec`).
    pub lifecycle: Option<String>,
    /// Lifecycle capacity mode: exactly this many tasks, then the run ends when they are
    /// done (a fixed amount of work, for callgrind's windows), instead of --duration.
    pub tasks: Option<u64>,
    pub hgrm: Option<String>,
    /// Requests outstanding on one connection before the next due ones wait (sent late,
    /// still timed from their intended time).
    pub max_in_flight: usize,
    /// How long to wait after the schedule ends for replies still outstanding.
    pub drain_s: f64,
    /// Schedule lag p99 above this means the engine did not keep its schedule.
    pub behind_lag_us: f64,
    /// The engine not running for longer than this (µs) when it was due to is a stall of
    /// its own; the requests it touched are left out of the latency. 0: no detection.
    pub stall_us: f64,
    /// No reply comes sooner than this (µs) after its request is written (a delay proxy's
    /// round trip): a stall inside that wait cannot have timed the request late. 0: none.
    pub reply_floor_us: f64,
    /// Poll instead of sleeping this long (µs) before each due time, at most a quarter of
    /// the mean gap between arrivals (schedule::spin_lead_ns). 0: always sleep.
    pub spin_us: f64,
}

/// What the command line asks for (made once: the size of `Run` does not matter).
#[allow(clippy::large_enum_variant)]
pub enum Command {
    Version,
    Help,
    Run(Options),
}

fn value<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, String> {
    text.parse::<T>()
        .map_err(|_| format!("--{name}: {text:?} is not a valid value"))
}

fn positive(name: &str, text: &str) -> Result<f64, String> {
    let v: f64 = value(name, text)?;
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(format!("--{name}: {text} must be a number above 0"))
    }
}

fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(
    name: &str,
    text: &str,
) -> Result<T, String> {
    let v: T = value(name, text)?;
    if v >= T::from(1u8) {
        Ok(v)
    } else {
        Err(format!("--{name}: {text} must be 1 or more"))
    }
}

fn defaults() -> Options {
    Options {
        host: "127.0.0.1".into(),
        ports: Vec::new(),
        switch_ms: 100.0,
        connections: 4,
        rate: 0.0,
        arrival: Arrival::Constant,
        duration_s: 10.0,
        warmup_s: 1.0,
        seed: 1,
        pipeline: 1,
        spec: String::new(),
        lifecycle: None,
        tasks: None,
        hgrm: None,
        max_in_flight: 100_000,
        drain_s: 0.0, // the mode's default, below
        behind_lag_us: 1000.0,
        stall_us: 200.0,
        reply_floor_us: 0.0,
        spin_us: 1000.0,
    }
}

fn set(o: &mut Options, name: &str, text: &str) -> Result<(), String> {
    match name {
        "host" => o.host = text.to_string(),
        "port" => o.ports.push(at_least_one(name, text)?),
        "switch-ms" => o.switch_ms = positive(name, text)?,
        "connections" => o.connections = at_least_one(name, text)?,
        "rate" => {
            o.rate = value(name, text)?;
            if !(o.rate.is_finite() && o.rate >= 0.0) {
                return Err(format!("--{name}: {text} must be a number above 0"));
            }
        }
        "arrival" => {
            o.arrival = match text {
                "constant" => Arrival::Constant,
                "poisson" => Arrival::Poisson,
                _ => return Err(format!("--arrival: {text:?} is not constant or poisson")),
            }
        }
        "duration" => o.duration_s = positive(name, text)?,
        "warmup" => {
            o.warmup_s = value(name, text)?;
            if !(o.warmup_s.is_finite() && o.warmup_s >= 0.0) {
                return Err(format!("--warmup: {text} must be 0 or more"));
            }
        }
        "seed" => o.seed = value(name, text)?,
        "pipeline" => o.pipeline = at_least_one(name, text)?,
        "spec" => o.spec = text.to_string(),
        "lifecycle" => o.lifecycle = Some(text.to_string()),
        "tasks" => o.tasks = Some(at_least_one(name, text)?),
        "hgrm" => o.hgrm = Some(text.to_string()),
        "max-in-flight" => o.max_in_flight = at_least_one(name, text)?,
        "drain" => o.drain_s = positive(name, text)?,
        "behind-lag-us" => o.behind_lag_us = positive(name, text)?,
        "stall-us" => {
            o.stall_us = value(name, text)?;
            if !(o.stall_us.is_finite() && o.stall_us >= 0.0) {
                return Err(format!("--stall-us: {text} must be 0 (off) or more"));
            }
        }
        "spin-us" => {
            o.spin_us = value(name, text)?;
            if !(o.spin_us.is_finite() && o.spin_us >= 0.0) {
                return Err(format!("--spin-us: {text} must be 0 (off) or more"));
            }
        }
        "reply-floor-us" => {
            o.reply_floor_us = value(name, text)?;
            if !(o.reply_floor_us.is_finite() && o.reply_floor_us >= 0.0) {
                return Err(format!("--reply-floor-us: {text} must be 0 (none) or more"));
            }
        }
        _ => return Err(format!("unknown option --{name} ({USAGE})")),
    }
    Ok(())
}

/// Parse the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    if args.iter().any(|a| a == "--version" || a == "-V") {
        return Ok(Command::Version);
    }
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return Ok(Command::Help);
    }
    let mut o = defaults();
    let mut given: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let Some(option) = arg.strip_prefix("--") else {
            return Err(format!("unexpected argument {arg:?} ({USAGE})"));
        };
        let (name, text) = match option.split_once('=') {
            Some((name, text)) => (name.to_string(), text.to_string()),
            None => {
                i += 1;
                let text = args
                    .get(i)
                    .ok_or_else(|| format!("--{option} needs a value"))?;
                (option.to_string(), text.clone())
            }
        };
        set(&mut o, &name, &text)?;
        given.push(name);
        i += 1;
    }
    if o.lifecycle.is_some() {
        return lifecycle(o, &given);
    }
    if o.drain_s == 0.0 {
        o.drain_s = DRAIN_S;
    }
    if o.spec.is_empty() {
        return Err(format!("--spec FILE is required ({USAGE})"));
    }
    if o.rate == 0.0 {
        return Err(format!(
            "--rate R (requests per second, above 0) is required ({USAGE})"
        ));
    }
    if o.ports.is_empty() {
        o.ports.push(DEFAULT_PORT);
    }
    if o.hgrm.is_some() && o.ports.len() > 1 {
        return Err(format!(
            "--hgrm FILE takes one --port; with {} ports each server's histogram is the \
             hdr of its report in the JSON",
            o.ports.len()
        ));
    }
    Ok(Command::Run(o))
}

/// Lifecycle mode: producers and consumers from the file, per server (several ports:
/// paired in time, --switch-ms); --rate optional (none or 0: capacity). Options of the
/// latency mode that mean nothing here are refused.
fn lifecycle(mut o: Options, given: &[String]) -> Result<Command, String> {
    if !o.spec.is_empty() {
        return Err("--spec and --lifecycle are exclusive: give one".to_string());
    }
    for name in ["pipeline", "connections", "max-in-flight"] {
        if given.iter().any(|g| g == name) {
            return Err(format!(
                "--{name} does not apply to --lifecycle (its producers and consumers come \
                 from the file, one step per round trip)"
            ));
        }
    }
    if given.iter().any(|g| g == "switch-ms") && o.ports.len() < 2 {
        return Err(
            "--switch-ms pairs servers in time: with --lifecycle it needs two --port or more"
                .to_string(),
        );
    }
    if o.hgrm.is_some() && o.ports.len() > 1 {
        return Err(format!(
            "--hgrm FILE takes one --port; with {} ports each server's histogram is the \
             hdr of its report in the JSON",
            o.ports.len()
        ));
    }
    if o.tasks.is_some() && (o.rate > 0.0 || o.ports.len() > 1 || o.warmup_s > 0.0) {
        return Err(
            "--tasks N is a fixed amount of work at capacity on one server: give no --rate, \
             one --port and no --warmup"
                .to_string(),
        );
    }
    if o.tasks.is_some() {
        o.duration_s = TASKS_DEADLINE_S; // the run ends when its tasks are done
    }
    if o.ports.is_empty() {
        o.ports.push(DEFAULT_PORT);
    }
    if o.drain_s == 0.0 {
        o.drain_s = LIFECYCLE_DRAIN_S;
    }
    Ok(Command::Run(o))
}

/// With --tasks, the longest the run may take to do them (a day: under callgrind a
/// server runs some 50 times slower).
const TASKS_DEADLINE_S: f64 = 86_400.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse(&args)? {
            Command::Run(o) => Ok(o),
            _ => Err("not a run".into()),
        }
    }

    #[test]
    fn both_spellings_of_an_option() {
        let o = run(&["--spec", "s.json", "--rate=2000", "--arrival", "poisson"]).unwrap();
        assert_eq!(
            (o.rate, o.arrival, o.connections),
            (2000.0, Arrival::Poisson, 4)
        );
    }

    #[test]
    fn bad_values_say_which_option() {
        assert!(run(&["--spec", "s", "--rate", "-5"])
            .unwrap_err()
            .contains("--rate"));
        assert!(run(&["--spec", "s", "--rate", "1", "--connections", "0"])
            .unwrap_err()
            .contains("--connections"));
        assert!(run(&["--spec", "s", "--rate", "1", "--bogus", "1"])
            .unwrap_err()
            .contains("--bogus"));
        assert!(run(&["--rate", "1"]).unwrap_err().contains("--spec"));
        assert!(run(&["--spec", "s", "--rate"])
            .unwrap_err()
            .contains("needs a value"));
        assert!(run(&["--spec", "s", "--rate", "1", "--switch-ms", "0"])
            .unwrap_err()
            .contains("--switch-ms"));
        assert!(run(&["--spec", "s", "--rate", "1", "--stall-us", "-1"])
            .unwrap_err()
            .contains("--stall-us"));
    }

    #[test]
    fn stall_threshold_defaults_to_200_us_and_0_turns_it_off() {
        assert_eq!(
            run(&["--spec", "s", "--rate", "1"]).unwrap().stall_us,
            200.0
        );
        let o = run(&["--spec", "s", "--rate", "1", "--stall-us", "0"]).unwrap();
        assert_eq!(o.stall_us, 0.0);
        assert_eq!(o.reply_floor_us, 0.0);
        assert_eq!(o.spin_us, 1000.0);
        assert_eq!(
            run(&["--spec", "s", "--rate", "1", "--spin-us", "0"])
                .unwrap()
                .spin_us,
            0.0
        );
        let o = run(&["--spec", "s", "--rate", "1", "--reply-floor-us", "28000"]).unwrap();
        assert_eq!(o.reply_floor_us, 28_000.0);
        assert!(
            run(&["--spec", "s", "--rate", "1", "--reply-floor-us", "-5"])
                .unwrap_err()
                .contains("--reply-floor-us")
        );
    }

    #[test]
    fn lifecycle_takes_no_rate_and_drains_5_s() {
        let o = run(&["--lifecycle", "l.json"]).unwrap();
        assert_eq!((o.rate, o.drain_s, o.ports.clone()), (0.0, 5.0, vec![6379]));
        let o = run(&["--lifecycle", "l.json", "--rate", "0", "--drain", "1"]).unwrap();
        assert_eq!((o.rate, o.drain_s), (0.0, 1.0));
        let o = run(&["--lifecycle", "l.json", "--rate", "500"]).unwrap();
        assert_eq!(o.rate, 500.0);
        assert_eq!(run(&["--spec", "s", "--rate", "1"]).unwrap().drain_s, 2.0);
        for (extra, word) in [
            (&["--port", "1", "--port", "2", "--hgrm", "f"][..], "--hgrm"),
            (&["--pipeline", "2"][..], "--pipeline"),
            (&["--switch-ms", "5"][..], "--switch-ms"),
            (&["--port", "1", "--switch-ms", "5"][..], "two --port"),
            (&["--connections", "5"][..], "--connections"),
            (&["--spec", "s"][..], "exclusive"),
        ] {
            let args = [&["--lifecycle", "l.json"][..], extra].concat();
            assert!(run(&args).unwrap_err().contains(word), "{extra:?}");
        }
        assert!(run(&["--spec", "s", "--rate", "0"])
            .unwrap_err()
            .contains("--rate"));
    }

    #[test]
    fn lifecycle_pairs_two_ports_or_more_in_time() {
        let o = run(&["--lifecycle", "l", "--port", "7002", "--port", "7001"]).unwrap();
        assert_eq!((o.ports, o.switch_ms), (vec![7002, 7001], 100.0));
        let o = run(&[
            "--lifecycle",
            "l",
            "--port",
            "1",
            "--port",
            "2",
            "--port",
            "3",
            "--switch-ms",
            "50",
            "--rate",
            "2000",
        ])
        .unwrap();
        assert_eq!((o.ports.len(), o.switch_ms, o.rate), (3, 50.0, 2000.0));
        let o = run(&["--lifecycle", "l", "--port", "1", "--hgrm", "f"]).unwrap();
        assert_eq!(o.hgrm.as_deref(), Some("f"));
    }

    #[test]
    fn ports_in_the_order_given_or_the_default() {
        let o = run(&["--spec", "s", "--rate", "1"]).unwrap();
        assert_eq!((o.ports, o.switch_ms), (vec![6379], 100.0));
        let o = run(&[
            "--spec",
            "s",
            "--rate",
            "1",
            "--port",
            "7002",
            "--port=7001",
        ])
        .unwrap();
        assert_eq!(o.ports, [7002, 7001]);
        // --switch-ms with one port is accepted and changes nothing
        let o = run(&[
            "--spec",
            "s",
            "--rate",
            "1",
            "--port",
            "7",
            "--switch-ms",
            "2.5",
        ])
        .unwrap();
        assert_eq!((o.ports, o.switch_ms), (vec![7], 2.5));
        let o = run(&["--spec", "s", "--rate", "1", "--hgrm", "f"]).unwrap();
        assert_eq!(o.hgrm.as_deref(), Some("f"));
        let two = ["--spec", "s", "--rate", "1", "--port", "1", "--port", "2"];
        assert!(run(&[&two[..], &["--hgrm", "f"]].concat())
            .unwrap_err()
            .contains("--hgrm"));
    }
}
