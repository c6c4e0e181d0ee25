//! One lifecycle connection's bytes: what waits to be written, what was read, and the
//! whole replies cut from it (their boundaries and error words from resp.rs). The
//! latency mode's conn.rs does the same around its rotation; a lifecycle connection has
//! one step in flight at a time, so it needs no queue of requests.

use crate::resp::{self, Parsed};
use crate::stall::{self, Wait};
use std::io::{self, Read, Write};
use std::net::TcpStream;

pub struct Link {
    pub stream: TcpStream,
    pub out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    in_pos: usize,
    pub wants_write: bool,
}

/// A whole reply: where it sits in the read buffer, and an error reply's first word.
pub struct Reply {
    pub start: usize,
    pub len: usize,
    pub error: Option<String>,
}

impl Link {
    pub fn new(stream: TcpStream) -> Link {
        Link {
            stream,
            out: Vec::with_capacity(16 * 1024),
            out_pos: 0,
            inbuf: Vec::with_capacity(16 * 1024),
            in_pos: 0,
            wants_write: false,
        }
    }

    pub fn has_output(&self) -> bool {
        self.out_pos < self.out.len()
    }

    /// Write what the kernel takes; Ok(Some(wait)) when everything is written, `wait` the
    /// span in which its reply cannot have come (stall.rs; `floor_ns` the least time a
    /// reply takes), known only when this call wrote the step whole.
    pub fn flush(&mut self, floor_ns: u64) -> io::Result<Option<Option<Wait>>> {
        let fresh = self.out_pos == 0;
        let before = crate::sys::now_ns();
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "wrote 0 bytes")),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        let wait = fresh
            .then(|| stall::wait_after_write(before, crate::sys::now_ns(), floor_ns))
            .flatten();
        Ok(Some(wait))
    }

    /// Read everything available; Ok(false) when the server closed the connection.
    pub fn fill(&mut self) -> io::Result<bool> {
        if self.in_pos > 0 {
            self.inbuf.drain(..self.in_pos);
            self.in_pos = 0;
        }
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.inbuf.extend_from_slice(&chunk[..n]);
                    if n < chunk.len() {
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next whole reply read so far, if any; Err: not RESP.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, String> {
        match resp::parse(&self.inbuf[self.in_pos..]) {
            Parsed::Incomplete => Ok(None),
            Parsed::Invalid(problem) => Err(problem),
            Parsed::Reply { len, error } => {
                let start = self.in_pos;
                self.in_pos += len;
                Ok(Some(Reply { start, len, error }))
            }
        }
    }

    /// The bytes of a reply `next_reply` gave (until the next `fill`).
    pub fn bytes(&self, r: &Reply) -> &[u8] {
        &self.inbuf[r.start..r.start + r.len]
    }
}
