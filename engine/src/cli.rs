//! The command line: `--name value` or `--name=value`; a bad value is one line (exit 2).

use crate::schedule::Arrival;

pub const USAGE: &str = "usage: regtrack-openloop --spec FILE --rate R [--host H] \
[--port P [--port P2 ...] [--switch-ms W]] [--connections N (per server)] \
[--arrival constant|poisson] [--duration S] [--warmup S] [--seed K] [--pipeline K] \
[--max-in-flight M (per connection)] [--drain S] [--behind-lag-us U] [--stall-us U] \
[--hgrm FILE (one port)]";

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
}

/// What the command line asks for.
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
        hgrm: None,
        max_in_flight: 100_000,
        drain_s: 2.0,
        behind_lag_us: 1000.0,
        stall_us: 200.0,
    }
}

fn set(o: &mut Options, name: &str, text: &str) -> Result<(), String> {
    match name {
        "host" => o.host = text.to_string(),
        "port" => o.ports.push(at_least_one(name, text)?),
        "switch-ms" => o.switch_ms = positive(name, text)?,
        "connections" => o.connections = at_least_one(name, text)?,
        "rate" => o.rate = positive(name, text)?,
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
        i += 1;
    }
    if o.spec.is_empty() {
        return Err(format!("--spec FILE is required ({USAGE})"));
    }
    if o.rate == 0.0 {
        return Err(format!(
            "--rate R (requests per second) is required ({USAGE})"
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
