//! Before a lifecycle run: SCRIPT LOAD of every script of the file on a setup connection,
//! so `${sha:NAME}` is the SHA1 the server gave (no SHA1 code of our own).

use crate::reply::{self, Node};
use crate::resp::{self, Parsed};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;

/// Why the scripts could not be loaded: the server refused one (bad input, exit 2), or the
/// connection failed (exit 3).
pub enum LoadError {
    Refused(String),
    Lost(String),
}

/// One command on a blocking connection, and its whole reply's bytes.
fn call(stream: &mut TcpStream, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    resp::array_header(args.len(), &mut out);
    for a in args {
        resp::bulk(a, &mut out);
    }
    stream.write_all(&out)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match resp::parse(&buf) {
            Parsed::Reply { .. } => return Ok(buf),
            Parsed::Invalid(p) => return Err(std::io::Error::other(p)),
            Parsed::Incomplete => {}
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::other("it closed the connection"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The SHA1 of every script, by name.
pub fn load(
    stream: &mut TcpStream,
    server: &str,
    scripts: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, LoadError> {
    let mut shas = BTreeMap::new();
    for (name, body) in scripts {
        let bytes = call(stream, &[b"SCRIPT", b"LOAD", body.as_bytes()])
            .map_err(|e| LoadError::Lost(format!("lost the server {server}: {e}")))?;
        match reply::parse(&bytes, 0) {
            Ok((Node::Str(sha), _)) if sha.len() == 40 => {
                shas.insert(name.clone(), String::from_utf8_lossy(sha).into_owned());
            }
            Ok((Node::Error(text), _)) => {
                let text = String::from_utf8_lossy(text).replace(['\r', '\n'], " ");
                return Err(LoadError::Refused(format!(
                    "script {name}: SCRIPT LOAD refused it: {text}"
                )));
            }
            _ => {
                return Err(LoadError::Refused(format!(
                    "script {name}: SCRIPT LOAD gave no SHA1"
                )))
            }
        }
    }
    Ok(shas)
}
