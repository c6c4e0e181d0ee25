//! One connection to the server: bytes waiting to be written, replies being read, and the
//! requests outstanding on it in send order (Redis answers in order per connection).

use crate::resp::{self, Parsed};
use crate::rotation::Rotation;
use crate::stall::{self, Wait};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;

/// A request written and not yet fully answered.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// When the schedule meant it to be sent (ns, CLOCK_MONOTONIC).
    pub intended: u64,
    /// Replies still to come (the pipeline depth, counting down).
    pub remaining: u32,
    /// Intended inside the measured window (not warmup).
    pub measured: bool,
    /// Its bytes all written (`wait` then says when its reply could not yet have come).
    pub written: bool,
    pub wait: Option<Wait>,
}

/// A reply that completed a request.
pub struct Done {
    pub intended: u64,
    pub measured: bool,
    pub wait: Option<Wait>,
}

pub struct Conn {
    pub stream: TcpStream,
    pub rotation: Rotation,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    in_pos: usize,
    pub pending: VecDeque<Pending>,
    /// The cycle index of every command written and not yet answered, to name an error.
    commands: VecDeque<usize>,
    /// Requests due but held back by --max-in-flight: (intended, measured).
    pub backlog: VecDeque<(u64, bool)>,
    pub wants_write: bool,
}

pub enum ReadOutcome {
    Open,
    Closed,
}

impl Conn {
    pub fn new(stream: TcpStream, rotation: Rotation) -> Conn {
        Conn {
            stream,
            rotation,
            out: Vec::with_capacity(64 * 1024),
            out_pos: 0,
            inbuf: Vec::with_capacity(64 * 1024),
            in_pos: 0,
            pending: VecDeque::new(),
            commands: VecDeque::new(),
            backlog: VecDeque::new(),
            wants_write: false,
        }
    }

    /// Queue one request of `pipeline` commands; written at the next flush.
    pub fn queue(&mut self, intended: u64, measured: bool, pipeline: u32) {
        for _ in 0..pipeline {
            let index = self.rotation.encode_next(&mut self.out);
            self.commands.push_back(index);
        }
        self.pending.push_back(Pending {
            intended,
            remaining: pipeline,
            measured,
            written: false,
            wait: None,
        });
    }

    pub fn has_output(&self) -> bool {
        self.out_pos < self.out.len()
    }

    /// Write what the kernel takes; Ok(true) when everything is written. `floor_ns`: the
    /// least time a reply takes (0: none known), for the waits of the requests written.
    pub fn flush(&mut self, floor_ns: u64) -> io::Result<bool> {
        // A wait is known only for requests written whole by this call: one written in
        // part earlier may have reached the server before `before`.
        let fresh = self.out_pos == 0;
        let before = crate::sys::now_ns();
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "wrote 0 bytes")),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        let wait = if fresh {
            stall::wait_after_write(before, crate::sys::now_ns(), floor_ns)
        } else {
            None
        };
        for p in self.pending.iter_mut().rev() {
            if p.written {
                break;
            }
            p.written = true;
            p.wait = wait;
        }
        Ok(true)
    }

    /// Read everything available. Ok(Closed) when the server closed the connection.
    pub fn fill(&mut self) -> io::Result<ReadOutcome> {
        if self.in_pos > 0 && self.in_pos == self.inbuf.len() {
            self.inbuf.clear();
            self.in_pos = 0;
        } else if self.in_pos > 1 << 20 {
            self.inbuf.drain(..self.in_pos);
            self.in_pos = 0;
        }
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(ReadOutcome::Closed),
                Ok(n) => {
                    self.inbuf.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() {
                        // drained: epoll (level-triggered) reports the rest; saves a read
                        return Ok(ReadOutcome::Open);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadOutcome::Open),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Take every whole reply read so far: the requests they completed go to `done`,
    /// error replies go to `errors` as "COMMAND KIND" (as builtin.py counts them). Err:
    /// not RESP, or a reply nobody asked for.
    pub fn take_replies(
        &mut self,
        done: &mut Vec<Done>,
        errors: &mut Vec<(String, bool)>,
    ) -> Result<(), String> {
        loop {
            match resp::parse(&self.inbuf[self.in_pos..]) {
                Parsed::Incomplete => return Ok(()),
                Parsed::Invalid(problem) => return Err(problem),
                Parsed::Reply { len, error } => {
                    self.in_pos += len;
                    let head = self.pending.front_mut().ok_or("a reply to no request")?;
                    let command = self.commands.pop_front().expect("one per command sent");
                    if let Some(kind) = error {
                        let name = self.rotation.name(command);
                        errors.push((format!("{name} {kind}"), head.measured));
                    }
                    head.remaining -= 1;
                    if head.remaining == 0 {
                        let p = self.pending.pop_front().expect("head exists");
                        done.push(Done {
                            intended: p.intended,
                            measured: p.measured,
                            wait: p.wait,
                        });
                    }
                }
            }
        }
    }
}
