//! A reply as a tree (RESP2, and the RESP3 types Redis sends a RESP2 client), and the walk
//! that finds the tasks a dequeue reply holds: every bulk or simple string containing a
//! task id, each with its handle (the stream entry id when the string sits in a stream
//! entry, else the task id), deduplicated, in order.

/// One node of a reply; strings borrow the read buffer.
#[derive(Debug, PartialEq)]
pub enum Node<'a> {
    /// A bulk, simple or verbatim string.
    Str(&'a [u8]),
    /// Nil (`$-1`, `*-1`, `_`).
    Nil,
    /// An array, set or push; a map's pairs flattened in order.
    Array(Vec<Node<'a>>),
    /// An error reply (its text).
    Error(&'a [u8]),
    /// An integer, boolean, double or big number: holds no task.
    Other,
}

/// Task ids: this prefix, 12 hex digits of the seed, 16 of a counter (32 in all).
pub const TASK_PREFIX: &[u8; 4] = b"7a5c";
pub const TASK_LEN: usize = 32;

/// The id of task `counter` of a run seeded with `seed`.
pub fn task_id(seed: u64, counter: u64) -> [u8; TASK_LEN] {
    let text = format!("7a5c{:012x}{:016x}", seed & 0xffff_ffff_ffff, counter);
    text.as_bytes().try_into().expect("32 bytes")
}

/// The counter of a task id if it is one of this seed's.
pub fn counter_of(id: &[u8; TASK_LEN], seed: u64) -> Option<u64> {
    let mine = task_id(seed, 0);
    if id[..16] != mine[..16] {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(&id[16..]).ok()?, 16).ok()
}

fn line(buf: &[u8], pos: usize) -> Result<(&[u8], usize), String> {
    let rest = buf.get(pos..).ok_or("truncated reply")?;
    let nl = rest
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or("truncated reply")?;
    Ok((&rest[..nl], pos + nl + 2))
}

fn length(text: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("bad length {:?}", String::from_utf8_lossy(text)))
}

/// The reply starting at `pos` of a buffer holding it whole, and where it ends.
pub fn parse(buf: &[u8], pos: usize) -> Result<(Node<'_>, usize), String> {
    let kind = *buf.get(pos).ok_or("truncated reply")?;
    let (head, end) = line(buf, pos)?;
    let text = &head[1..];
    match kind {
        b'+' => Ok((Node::Str(text), end)),
        b'-' => Ok((Node::Error(text), end)),
        b'_' => Ok((Node::Nil, end)),
        b':' | b'#' | b',' | b'(' => Ok((Node::Other, end)),
        b'$' | b'=' | b'!' => {
            let n = length(text)?;
            if n < 0 {
                return Ok((Node::Nil, end));
            }
            let stop = end + n as usize;
            let body = buf.get(end..stop).ok_or("truncated reply")?;
            let body = if kind == b'=' && body.len() >= 4 {
                &body[4..] // verbatim: "txt:" first
            } else {
                body
            };
            let node = if kind == b'!' {
                Node::Error(body)
            } else {
                Node::Str(body)
            };
            Ok((node, stop + 2))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = length(text)?;
            if n < 0 {
                return Ok((Node::Nil, end));
            }
            let items = if kind == b'%' || kind == b'|' {
                n * 2
            } else {
                n
            };
            let mut at = end;
            let mut children = Vec::with_capacity(items.min(1024) as usize);
            for _ in 0..items {
                let (child, next) = parse(buf, at)?;
                children.push(child);
                at = next;
            }
            if kind == b'|' {
                // an attribute precedes the reply it describes: the reply is what counts
                return parse(buf, at);
            }
            Ok((Node::Array(children), at))
        }
        other => Err(format!("unexpected reply type byte 0x{other:02x}")),
    }
}

/// `1700000000000-0`: digits, a dash, digits.
fn is_entry_id(s: &[u8]) -> bool {
    match s.iter().position(|&b| b == b'-') {
        Some(dash) => {
            dash > 0
                && dash + 1 < s.len()
                && s[..dash].iter().all(u8::is_ascii_digit)
                && s[dash + 1..].iter().all(u8::is_ascii_digit)
        }
        None => false,
    }
}

/// A stream entry: [entry id, [field, value, ...]].
fn entry_id<'a>(items: &[Node<'a>]) -> Option<&'a [u8]> {
    match items {
        [Node::Str(id), Node::Array(_)] if is_entry_id(id) => Some(id),
        _ => None,
    }
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Every task id inside `s`: the prefix and 28 more lowercase hex digits, not inside a
/// longer run of hex digits.
fn ids_in(s: &[u8], out: &mut Vec<[u8; TASK_LEN]>) {
    let mut at = 0;
    while at + TASK_LEN <= s.len() {
        let Some(found) = s[at..].windows(4).position(|w| w == TASK_PREFIX) else {
            return;
        };
        let start = at + found;
        let end = start + TASK_LEN;
        let whole = end <= s.len()
            && s[start..end].iter().all(|&b| is_hex(b))
            && (start == 0 || !is_hex(s[start - 1]))
            && (end == s.len() || !is_hex(s[end]));
        if whole {
            out.push(s[start..end].try_into().expect("32 bytes"));
            at = end;
        } else {
            at = start + 1;
        }
    }
}

/// A task found in a reply: its id and its handle (the stream entry id, or the task id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub task: [u8; TASK_LEN],
    pub handle: Vec<u8>,
}

/// The tasks of a dequeue reply, in order, each once (its first handle).
pub fn tasks(root: &Node) -> Vec<Found> {
    let mut found = Vec::new();
    walk(root, None, &mut found, &mut Vec::new());
    found
}

fn walk(node: &Node, entry: Option<&[u8]>, found: &mut Vec<Found>, ids: &mut Vec<[u8; 32]>) {
    match node {
        Node::Str(s) => {
            ids.clear();
            ids_in(s, ids);
            for id in ids.iter() {
                if !found.iter().any(|f| &f.task == id) {
                    found.push(Found {
                        task: *id,
                        handle: entry.map_or_else(|| id.to_vec(), <[u8]>::to_vec),
                    });
                }
            }
        }
        Node::Array(items) => match entry_id(items) {
            Some(id) => walk(&items[1], Some(id), found, ids),
            None => {
                for item in items {
                    walk(item, entry, found, ids);
                }
            }
        },
        Node::Nil | Node::Error(_) | Node::Other => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u64) -> String {
        String::from_utf8(task_id(0xabc, n).to_vec()).unwrap()
    }

    fn bulk(s: &str) -> String {
        format!("${}\r\n{s}\r\n", s.len())
    }

    fn array(items: &[String]) -> String {
        format!("*{}\r\n{}", items.len(), items.concat())
    }

    fn payload(n: u64) -> String {
        format!(r#"{{"id":"{}","pad":"xxxx"}}"#, t(n))
    }

    fn walked(text: &str) -> Vec<(String, String)> {
        let (root, end) = parse(text.as_bytes(), 0).unwrap();
        assert_eq!(end, text.len());
        tasks(&root)
            .into_iter()
            .map(|f| {
                (
                    String::from_utf8(f.task.to_vec()).unwrap(),
                    String::from_utf8(f.handle).unwrap(),
                )
            })
            .collect()
    }

    fn plain(n: u64) -> (String, String) {
        (t(n), t(n))
    }

    fn entry(id: &str, fields: &[String]) -> String {
        array(&[bulk(id), array(fields)])
    }

    #[test]
    fn task_ids_carry_the_seed_and_the_counter() {
        let id = task_id(0xabc, 255);
        assert_eq!(&id, b"7a5c000000000abc00000000000000ff");
        assert_eq!(counter_of(&id, 0xabc), Some(255));
        assert_eq!(counter_of(&id, 0xabd), None);
    }

    #[test]
    fn brpop_a_key_and_a_payload() {
        assert_eq!(
            walked(&array(&[bulk("celery"), bulk(&payload(3))])),
            [plain(3)]
        );
    }

    #[test]
    fn blmove_one_element_and_bzpopmin_key_member_score() {
        assert_eq!(walked(&bulk(&payload(9))), [plain(9)]);
        let reply = array(&[bulk("z"), bulk(&t(4)), bulk("1700000000.123")]);
        assert_eq!(walked(&reply), [plain(4)]);
    }

    #[test]
    fn nil_and_empty_hold_no_task() {
        for reply in ["$-1\r\n", "*-1\r\n", "_\r\n", "*0\r\n", ":0\r\n", "+OK\r\n"] {
            assert!(walked(reply).is_empty(), "{reply:?}");
        }
        // an id inside a longer hex run (a SHA1, say) is not a task
        let long = format!("{}0", t(1));
        assert!(walked(&bulk(&long)).is_empty());
        assert!(walked(&bulk(&format!("meta-{}", t(1)))).len() == 1);
    }

    #[test]
    fn xreadgroup_entries_carry_their_ids_and_dedupe_per_task() {
        let entries = [
            entry(
                "1700000000000-0",
                &[
                    bulk("task"),
                    bulk(&t(1)),
                    bulk("payload"),
                    bulk(&payload(1)),
                ],
            ),
            entry("1700000000000-1", &[bulk("payload"), bulk(&payload(2))]),
            entry("1700000000001-0", &[bulk("payload"), bulk(&payload(3))]),
        ];
        let reply = array(&[array(&[bulk("q"), array(&entries)])]);
        assert_eq!(
            walked(&reply),
            [
                (t(1), "1700000000000-0".to_string()),
                (t(2), "1700000000000-1".to_string()),
                (t(3), "1700000000001-0".to_string()),
            ]
        );
        // RESP3 map of streams, as Redis 7 sends to a RESP3 client
        let map = format!("%1\r\n{}{}", bulk("q"), array(&entries[..1]));
        assert_eq!(walked(&map), [(t(1), "1700000000000-0".to_string())]);
    }

    #[test]
    fn xautoclaim_cursor_entries_and_deleted_ids() {
        let reply = array(&[
            bulk("0-0"),
            array(&[entry("5-1", &[bulk("payload"), bulk(&payload(7))])]),
            array(&[bulk("4-0")]),
        ]);
        assert_eq!(walked(&reply), [(t(7), "5-1".to_string())]);
    }

    #[test]
    fn an_evalsha_poll_may_return_anything() {
        let reply = array(&[
            bulk(&t(5)),
            format!(":{}\r\n", 3),
            bulk(&payload(5)),
            bulk(&payload(6)),
        ]);
        assert_eq!(walked(&reply), [plain(5), plain(6)]);
    }

    #[test]
    fn truncated_or_garbage_is_an_error() {
        assert!(parse(b"*2\r\n$1\r\na\r\n", 0).is_err());
        assert!(parse(b"?\r\n", 0).is_err());
    }
}
