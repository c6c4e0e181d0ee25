//! RESP: encoding a command, and finding where each reply ends in what the server sent.
//!
//! The engine only needs reply boundaries (replies come in order per connection) and, for
//! an error reply, its first word ("ERR", "WRONGTYPE") to count it by; values are skipped.

/// `n` in decimal, written into `digits`; the slice of it that holds the number.
pub fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

fn header(kind: u8, n: usize, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    out.push(kind);
    out.extend_from_slice(decimal(n as u64, &mut digits));
    out.extend_from_slice(b"\r\n");
}

/// The head of a command of `n` arguments (an array of bulk strings).
pub fn array_header(n: usize, out: &mut Vec<u8>) {
    header(b'*', n, out);
}

/// The head of a bulk string of `len` bytes; its bytes and CRLF follow.
pub fn bulk_header(len: usize, out: &mut Vec<u8>) {
    header(b'$', len, out);
}

/// One whole bulk string.
pub fn bulk(bytes: &[u8], out: &mut Vec<u8>) {
    bulk_header(bytes.len(), out);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// One command as RESP bytes: an array of bulk strings.
#[cfg(test)]
pub fn encode(args: &[&[u8]], out: &mut Vec<u8>) {
    array_header(args.len(), out);
    for arg in args {
        bulk(arg, out);
    }
}

/// The arguments of one encoded command (tests read back what was encoded).
#[cfg(test)]
pub fn decode_command(buf: &[u8]) -> Vec<Vec<u8>> {
    let line = |at: usize| line_end(buf, at).expect("a whole line");
    let mut end = line(0);
    let n: usize = std::str::from_utf8(&buf[1..end - 2])
        .unwrap()
        .parse()
        .unwrap();
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let start = end;
        end = line(start);
        let len: usize = std::str::from_utf8(&buf[start + 1..end - 2])
            .unwrap()
            .parse()
            .unwrap();
        args.push(buf[end..end + len].to_vec());
        end += len + 2;
    }
    assert_eq!(end, buf.len(), "one command, nothing after it");
    args
}

/// What the head of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole reply yet: read more.
    Incomplete,
    /// A whole reply of `len` bytes; `error` is an error reply's first word.
    Reply { len: usize, error: Option<String> },
    /// Not RESP: the connection cannot be read any further.
    Invalid(String),
}

/// The first whole reply at the head of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    match skip(buf, 0) {
        Ok(None) => Parsed::Incomplete,
        Ok(Some(end)) => {
            let error = match buf[0] {
                b'-' => Some(first_word(&buf[1..end - 2])),
                b'!' => {
                    let start = buf.iter().position(|&b| b == b'\n').map_or(end, |p| p + 1);
                    Some(first_word(&buf[start..end.saturating_sub(2).max(start)]))
                }
                _ => None,
            };
            Parsed::Reply { len: end, error }
        }
        Err(problem) => Parsed::Invalid(problem),
    }
}

fn first_word(text: &[u8]) -> String {
    let word = text.split(|&b| b == b' ').next().unwrap_or(b"");
    let word = String::from_utf8_lossy(word).into_owned();
    if word.is_empty() {
        "ERR".to_string()
    } else {
        word
    }
}

/// The end of the line starting at `pos` (just past its CRLF), or None if not all here.
fn line_end(buf: &[u8], pos: usize) -> Option<usize> {
    let rest = buf.get(pos..)?;
    let nl = rest.windows(2).position(|w| w == b"\r\n")?;
    Some(pos + nl + 2)
}

fn number(buf: &[u8], pos: usize, end: usize) -> Result<i64, String> {
    let text = std::str::from_utf8(&buf[pos + 1..end - 2]).map_err(|_| "bad length")?;
    text.parse::<i64>()
        .map_err(|_| format!("bad length {text:?}"))
}

/// The end of the reply starting at `pos`: Ok(None) when incomplete.
fn skip(buf: &[u8], pos: usize) -> Result<Option<usize>, String> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    let Some(end) = line_end(buf, pos) else {
        return Ok(None);
    };
    match kind {
        // simple string, error, integer, RESP3 null, boolean, double, big number
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Ok(Some(end)),
        // bulk string, RESP3 bulk error and verbatim string
        b'$' | b'!' | b'=' => {
            let n = number(buf, pos, end)?;
            if n < 0 {
                return Ok(Some(end));
            }
            let stop = end + n as usize + 2;
            Ok(if buf.len() >= stop { Some(stop) } else { None })
        }
        // array, set, push; map and attribute hold pairs
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = number(buf, pos, end)?;
            let items = if kind == b'%' || kind == b'|' {
                n * 2
            } else {
                n
            };
            let mut at = end;
            for _ in 0..items.max(0) {
                match skip(buf, at)? {
                    Some(next) => at = next,
                    None => return Ok(None),
                }
            }
            Ok(Some(at))
        }
        other => Err(format!("unexpected reply type byte 0x{other:02x}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(len: usize, error: Option<&str>) -> Parsed {
        Parsed::Reply {
            len,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn encodes_a_command_as_bulk_strings() {
        let mut out = Vec::new();
        encode(&[b"GET", b"key:1"], &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n");
        let mut digits = [0u8; 20];
        for n in [0u64, 7, 10, 12345, u64::MAX] {
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
    }

    #[test]
    fn finds_the_end_of_each_simple_reply() {
        assert_eq!(parse(b"+OK\r\n+PONG\r\n"), reply(5, None));
        assert_eq!(parse(b":42\r\n"), reply(5, None));
        assert_eq!(parse(b"$3\r\nabc\r\n:1\r\n"), reply(9, None));
        assert_eq!(parse(b"$-1\r\n"), reply(5, None));
        assert_eq!(parse(b"$0\r\n\r\n"), reply(6, None));
    }

    #[test]
    fn a_bulk_string_may_hold_crlf() {
        assert_eq!(parse(b"$4\r\n\r\n\r\n\r\n"), reply(10, None));
    }

    #[test]
    fn incomplete_until_the_last_byte() {
        let whole = b"*3\r\n$1\r\na\r\n*1\r\n:5\r\n$-1\r\n";
        for cut in 0..whole.len() {
            assert_eq!(parse(&whole[..cut]), Parsed::Incomplete, "cut at {cut}");
        }
        assert_eq!(parse(whole), reply(whole.len(), None));
    }

    #[test]
    fn errors_counted_by_their_first_word() {
        let text = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        assert_eq!(parse(text), reply(text.len(), Some("WRONGTYPE")));
        assert_eq!(parse(b"-ERR unknown command\r\n"), reply(22, Some("ERR")));
        assert_eq!(parse(b"-\r\n"), reply(3, Some("ERR")));
        assert_eq!(parse(b"!10\r\nNOSCRIPT x\r\n"), reply(17, Some("NOSCRIPT")));
    }

    #[test]
    fn an_error_inside_an_array_is_not_a_top_level_error() {
        assert_eq!(parse(b"*1\r\n-ERR x\r\n"), reply(12, None));
    }

    #[test]
    fn resp3_maps_hold_pairs_and_null_arrays_end_at_once() {
        assert_eq!(parse(b"%1\r\n+a\r\n:1\r\n"), reply(12, None));
        assert_eq!(parse(b"%1\r\n+a\r\n"), Parsed::Incomplete);
        assert_eq!(parse(b"*-1\r\n"), reply(5, None));
    }

    #[test]
    fn garbage_is_invalid() {
        assert!(matches!(parse(b"hello\r\n"), Parsed::Invalid(_)));
        assert!(matches!(parse(b"$x\r\n"), Parsed::Invalid(_)));
    }
}
