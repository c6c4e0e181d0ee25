//! regtrack-openloop: an open-loop Redis load engine. Requests go out at intended times
//! (constant spacing or Poisson) whatever the replies do, and each is timed from its
//! intended time, so a server stall shows in every request it delayed. Given several
//! ports, the one stream is paired in time: it alternates between the servers in windows
//! (A B B A...) and each server gets a report of its own.
//!
//! Exit codes: 0 measured, 2 bad input (one line on stderr), 3 a server could not be
//! reached or was lost (one line naming it).

mod cli;
mod conn;
mod engine;
mod pairing;
mod report;
mod resp;
mod rotation;
mod schedule;
mod spec;
mod stall;
mod stats;
mod sys;

use std::process::ExitCode;

fn fail(code: u8, line: &str) -> ExitCode {
    eprintln!("regtrack-openloop: error: {line}");
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
