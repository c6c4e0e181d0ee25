//! regtrack-openloop: an open-loop Redis load engine. Requests go out at intended times
//! (constant spacing or Poisson) whatever the replies do, and each is timed from its
//! intended time, so a server stall shows in every request it delayed. Given several
//! ports, the one stream is paired in time: it alternates between the servers in windows
//! (A B B A...) and each server gets a report of its own. With `--lifecycle FILE` it
//! drives task-queue lifecycles instead (producers enqueue, consumers dequeue and process)
//! and times each task from its intended enqueue to its consumer's last step; paired in
//! time too with several ports (each server works in its own windows). `delay` runs a
//! TCP proxy that holds each chunk for a one-way delay (delay.rs: a round trip's what-if).
//!
//! Exit codes: 0 measured, 2 bad input (one line on stderr), 3 a server could not be
//! reached or was lost (one line naming it).

mod cli;
mod conn;
mod delay;
mod engine;
mod lifecycle;
mod lifecycle_report;
mod lifecycle_run;
mod lifecycle_spec;
mod link;
mod pairing;
mod reply;
mod report;
mod resp;
mod rotation;
mod schedule;
mod scripts;
mod spec;
mod stall;
mod stats;
mod sys;
mod template;

use std::process::ExitCode;

fn fail(code: u8, line: &str) -> ExitCode {
    eprintln!("regtrack-openloop: error: {line}");
    ExitCode::from(code)
}

/// `--hgrm FILE` can be written (before the run: a bad path wastes no measurement).
fn hgrm_writable(options: &cli::Options) -> Result<(), String> {
    match &options.hgrm {
        Some(path) => {
            std::fs::write(path, "").map_err(|e| format!("cannot write --hgrm {path}: {e}"))
        }
        None => Ok(()),
    }
}

fn run_lifecycle(options: &cli::Options, path: &str) -> ExitCode {
    let l = match lifecycle_spec::Lifecycle::load(path) {
        Ok(l) => l,
        Err(line) => return fail(2, &line),
    };
    if let Err(line) = hgrm_writable(options) {
        return fail(2, &line);
    }
    let (run, l) = match lifecycle_run::run(options, l) {
        Ok(done) => done,
        Err(lifecycle::Failure::Bad(line)) => return fail(2, &line),
        Err(lifecycle::Failure::Lost(line)) => return fail(3, &line),
    };
    if let Some(path) = &options.hgrm {
        // one port only (cli refuses --hgrm with more)
        let latency = &run.servers[0].stats.latency;
        if let Err(e) = std::fs::write(path, report::hgrm(latency)) {
            return fail(2, &format!("cannot write --hgrm {path}: {e}"));
        }
    }
    println!("{}", lifecycle_report::output(options, &l, &run));
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("delay") {
        return match delay::main(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(line) => fail(2, &line),
        };
    }
    let options = match cli::parse(&args) {
        Ok(cli::Command::Version) => {
            println!("regtrack-openloop {}", report::VERSION);
            return ExitCode::SUCCESS;
        }
        Ok(cli::Command::Help) => {
            println!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(cli::Command::Run(o)) => o,
        Err(line) => return fail(2, &line),
    };
    if let Some(path) = &options.lifecycle {
        return run_lifecycle(&options, path);
    }
    let spec = match spec::Spec::load(&options.spec) {
        Ok(spec) => spec,
        Err(line) => return fail(2, &line),
    };
    if let Some(path) = &options.hgrm {
        // before the run, not after it: a path that cannot be written wastes no measurement
        if let Err(e) = std::fs::write(path, "") {
            return fail(2, &format!("cannot write --hgrm {path}: {e}"));
        }
    }
    let measured = match engine::run(&options, &spec) {
        Ok(measured) => measured,
        Err(engine::Lost(line)) => return fail(3, &line),
    };
    if let Some(path) = &options.hgrm {
        // one port only (cli refuses --hgrm with more)
        if let Err(e) = std::fs::write(path, report::hgrm(&measured.servers[0].latency)) {
            return fail(2, &format!("cannot write --hgrm {path}: {e}"));
        }
    }
    println!("{}", report::output(&options, &measured));
    ExitCode::SUCCESS
}
