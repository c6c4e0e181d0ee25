//! The commands of a lifecycle file with their `${...}` placeholders, split once at load
//! time and expanded into RESP bytes as each command is written.
//!
//! `${task}` the task id; `${payload}` data_size bytes holding the task id; `${id}` the
//! task's handle from the dequeue reply (a stream entry id, else the task id); `${now}` unix
//! seconds with 3 decimals; `${now_ms}` unix ms; `${rand}` 32 fresh hex digits (seeded);
//! `${consumer}` the consumer connection's index; `${sha:NAME}` the SHA1 of script NAME;
//! `${fill:17,128,950}` filler bytes (`x`) of one of the listed sizes, drawn uniformly per
//! expansion with the connection's seeded rng (a value whose size varied in the traffic
//! a capture sampled: its sizes at evenly spaced quantiles).

use crate::resp;
use rand::Rng;
use rand_pcg::Pcg64;
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a command is: what its placeholders may refer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On a producer, for one task: no handle yet, no consumer.
    Enqueue,
    /// The consumer's pop or poll: no task yet.
    Dequeue,
    /// On the consumer, for one task of a dequeue reply.
    Process,
    /// On the consumer, once per non-empty dequeue: `${id}` or `${task}` as a whole
    /// argument is one argument per task of the dequeue.
    Batch,
}

impl Place {
    pub fn name(self) -> &'static str {
        match self {
            Place::Enqueue => "enqueue",
            Place::Dequeue => "dequeue",
            Place::Process => "process",
            Place::Batch => "batch",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Lit(Vec<u8>),
    Task,
    Payload,
    Id,
    Now,
    NowMs,
    Rand,
    Consumer,
    /// Filler of one of these sizes, drawn per expansion.
    Fill(Vec<usize>),
    /// Replaced by the script's SHA1 (a literal) once the scripts are loaded.
    Sha(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    One(Vec<Piece>),
    /// Batch only: one argument per task of the dequeue (its id when `true`, else task id).
    EachTask {
        handle: bool,
    },
}

/// One command, ready to expand.
#[derive(Debug, Clone)]
pub struct Command {
    /// The command's name in capitals (its first argument as written), to count errors by.
    pub name: String,
    args: Vec<Arg>,
}

/// A task as the consumer found it: its id (32 hex) and its handle (entry id or task id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    pub task: [u8; 32],
    pub handle: Vec<u8>,
}

/// What the placeholders of one command expand to.
pub struct Ctx<'a> {
    /// The task of an enqueue or process command (its handle unused in enqueue).
    pub task: Option<&'a TaskRef>,
    /// The tasks of the dequeue (batch commands).
    pub batch: &'a [TaskRef],
    pub consumer: usize,
    pub data_size: usize,
    pub rng: &'a mut Pcg64,
}

const KNOWN: &str = "${task} ${payload} ${id} ${now} ${now_ms} ${rand} ${consumer} \
     ${sha:NAME} ${hex:BYTES} ${fill:SIZES}";

/// At most this many sizes in one `${fill:...}`, each at most FILL_MAX bytes (Redis's
/// default proto-max-bulk-len, as data_size).
pub const FILL_SIZES: usize = 64;
pub const FILL_MAX: usize = 512 * 1024 * 1024;

/// `${fill:17,128,950}`: the sizes, 1 to FILL_SIZES whole numbers of bytes.
fn fill_sizes(list: &str) -> Result<Vec<usize>, String> {
    let bad = |why: &str| {
        let shown: String = list.chars().take(40).collect();
        format!("${{fill:{shown}}}: {why}; give sizes in bytes separated by commas, e.g. ${{fill:17,128,950}}")
    };
    let sizes = list
        .split(',')
        .map(|s| match s.parse::<usize>() {
            Ok(n) if n <= FILL_MAX => Ok(n),
            Ok(_) => Err(bad("a size over 512 MiB")),
            Err(_) => Err(bad("not a list of whole numbers")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if sizes.len() > FILL_SIZES {
        return Err(bad(&format!("{} sizes, at most {FILL_SIZES}", sizes.len())));
    }
    Ok(sizes)
}

/// `${hex:99de}`: bytes no text can carry (a msgpack header), given as pairs of hex digits.
fn hex_bytes(digits: &str) -> Result<Vec<u8>, String> {
    let bad =
        || format!("${{hex:{digits}}}: give bytes as pairs of hex digits, e.g. ${{hex:99de}}");
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return Err(bad());
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(digits.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect()
}

fn piece(name: &str, place: Place, scripts: &BTreeMap<String, String>) -> Result<Piece, String> {
    let p = match name {
        "task" => Piece::Task,
        "payload" => Piece::Payload,
        "id" => Piece::Id,
        "now" => Piece::Now,
        "now_ms" => Piece::NowMs,
        "rand" => Piece::Rand,
        "consumer" => Piece::Consumer,
        _ if name.starts_with("hex:") => Piece::Lit(hex_bytes(&name[4..])?),
        _ if name.starts_with("fill:") => Piece::Fill(fill_sizes(&name[5..])?),
        _ => match name.strip_prefix("sha:") {
            Some(script) if scripts.contains_key(script) => Piece::Sha(script.to_string()),
            Some(script) => {
                return Err(format!(
                    "${{sha:{script}}}: no script {script:?} in \"scripts\""
                ))
            }
            None => return Err(format!("unknown placeholder ${{{name}}} (known: {KNOWN})")),
        },
    };
    let refused = match (&p, place) {
        (Piece::Id, Place::Enqueue) => Some("a task has no handle before it is dequeued"),
        (Piece::Consumer, Place::Enqueue) => Some("producers are not consumers"),
        (Piece::Task | Piece::Payload | Piece::Id, Place::Dequeue) => {
            Some("the dequeue is not for one task")
        }
        (Piece::Payload, Place::Batch) => Some("a batch is not one task"),
        (Piece::Task | Piece::Id, Place::Batch) => {
            Some("in a batch it must be a whole argument (one argument per task of the dequeue)")
        }
        _ => None,
    };
    match refused {
        Some(why) => Err(format!("${{{name}}} is refused in {}: {why}", place.name())),
        None => Ok(p),
    }
}

fn compile_arg(
    text: &str,
    place: Place,
    scripts: &BTreeMap<String, String>,
) -> Result<Arg, String> {
    if place == Place::Batch && (text == "${id}" || text == "${task}") {
        return Ok(Arg::EachTask {
            handle: text == "${id}",
        });
    }
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        if at > 0 {
            pieces.push(Piece::Lit(rest.as_bytes()[..at].to_vec()));
        }
        let Some(close) = rest[at..].find('}') else {
            return Err(format!("unclosed placeholder in {text:?}"));
        };
        pieces.push(piece(&rest[at + 2..at + close], place, scripts)?);
        rest = &rest[at + close + 1..];
    }
    if !rest.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Lit(rest.as_bytes().to_vec()));
    }
    Ok(Arg::One(pieces))
}

impl Command {
    /// Split `args` at their placeholders; Err: the one line saying what is wrong.
    pub fn compile(
        args: &[String],
        place: Place,
        scripts: &BTreeMap<String, String>,
    ) -> Result<Command, String> {
        if args.is_empty() || args[0].is_empty() {
            return Err("a command has no name (an empty list)".to_string());
        }
        let args = args
            .iter()
            .map(|a| compile_arg(a, place, scripts))
            .collect::<Result<Vec<_>, _>>()?;
        let name = match &args[0] {
            Arg::One(pieces) => pieces
                .iter()
                .map(|p| match p {
                    Piece::Lit(b) => String::from_utf8_lossy(b).to_uppercase(),
                    _ => "?".to_string(),
                })
                .collect(),
            Arg::EachTask { .. } => "?".to_string(),
        };
        Ok(Command { name, args })
    }

    /// Whether it sends the task id (`${task}` or `${payload}`) somewhere.
    pub fn carries_task(&self) -> bool {
        self.args.iter().any(|a| match a {
            Arg::One(pieces) => pieces
                .iter()
                .any(|p| matches!(p, Piece::Task | Piece::Payload)),
            Arg::EachTask { .. } => true,
        })
    }

    /// Replace every `${sha:NAME}` by the SHA1 SCRIPT LOAD gave.
    pub fn resolve_shas(&mut self, shas: &BTreeMap<String, String>) {
        for a in &mut self.args {
            if let Arg::One(pieces) = a {
                for p in pieces.iter_mut() {
                    if let Piece::Sha(name) = p {
                        *p = Piece::Lit(shas[name.as_str()].as_bytes().to_vec());
                    }
                }
            }
        }
    }

    /// The command as RESP bytes, its placeholders expanded, appended to `out`.
    pub fn encode(&self, ctx: &mut Ctx, out: &mut Vec<u8>) {
        let n: usize = self
            .args
            .iter()
            .map(|a| match a {
                Arg::One(_) => 1,
                Arg::EachTask { .. } => ctx.batch.len(),
            })
            .sum();
        resp::array_header(n, out);
        let mut scratch = Vec::new();
        for a in &self.args {
            match a {
                Arg::EachTask { handle } => {
                    for t in ctx.batch {
                        resp::bulk(if *handle { &t.handle } else { &t.task }, out);
                    }
                }
                Arg::One(pieces) => {
                    scratch.clear();
                    for p in pieces {
                        expand(p, ctx, &mut scratch);
                    }
                    resp::bulk(&scratch, out);
                }
            }
        }
    }
}

fn expand(p: &Piece, ctx: &mut Ctx, out: &mut Vec<u8>) {
    let task = || {
        ctx.task
            .expect("checked at load: a task command has its task")
    };
    match p {
        Piece::Lit(bytes) => out.extend_from_slice(bytes),
        Piece::Task => out.extend_from_slice(&task().task),
        Piece::Id => out.extend_from_slice(&task().handle),
        Piece::Payload => payload(&task().task, ctx.data_size, out),
        Piece::Now => {
            let t = unix();
            out.extend_from_slice(format!("{}.{:03}", t.as_secs(), t.subsec_millis()).as_bytes())
        }
        Piece::NowMs => out.extend_from_slice(unix().as_millis().to_string().as_bytes()),
        Piece::Rand => {
            let (a, b): (u64, u64) = (ctx.rng.gen(), ctx.rng.gen());
            out.extend_from_slice(format!("{a:016x}{b:016x}").as_bytes());
        }
        Piece::Consumer => out.extend_from_slice(ctx.consumer.to_string().as_bytes()),
        Piece::Fill(sizes) => {
            let size = match sizes.len() {
                1 => sizes[0],
                n => sizes[ctx.rng.gen_range(0..n)],
            };
            out.resize(out.len() + size, b'x');
        }
        Piece::Sha(name) => unreachable!("script {name} resolved before the run"),
    }
}

fn unix() -> std::time::Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The head and tail of a payload around the task id and the padding.
const PAYLOAD_HEAD: &[u8] = b"{\"id\":\"";
const PAYLOAD_MID: &[u8] = b"\",\"pad\":\"";
const PAYLOAD_TAIL: &[u8] = b"\"}";
/// The smallest data_size: a payload with the task id and no padding.
pub const MIN_PAYLOAD: usize = PAYLOAD_HEAD.len() + 32 + PAYLOAD_MID.len() + PAYLOAD_TAIL.len();

/// `{"id":"<task>","pad":"xxx..."}`, exactly `size` bytes (size >= MIN_PAYLOAD).
pub fn payload(task: &[u8; 32], size: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(PAYLOAD_HEAD);
    out.extend_from_slice(task);
    out.extend_from_slice(PAYLOAD_MID);
    out.resize(out.len() + size.saturating_sub(MIN_PAYLOAD), b'x');
    out.extend_from_slice(PAYLOAD_TAIL);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn scripts() -> BTreeMap<String, String> {
        [("fetch".to_string(), "return 1".to_string())].into()
    }

    fn compiled(args: &[&str], place: Place) -> Result<Command, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Command::compile(&args, place, &scripts())
    }

    const TASK: [u8; 32] = *b"7a5c00000000000100000000000000ff";

    fn expanded(c: &Command, batch: &[TaskRef]) -> Vec<Vec<u8>> {
        let t = TaskRef {
            task: TASK,
            handle: b"1700000000000-3".to_vec(),
        };
        let mut rng = Pcg64::seed_from_u64(1);
        let mut ctx = Ctx {
            task: Some(&t),
            batch,
            consumer: 7,
            data_size: 100,
            rng: &mut rng,
        };
        let mut out = Vec::new();
        c.encode(&mut ctx, &mut out);
        resp::decode_command(&out)
    }

    #[test]
    fn placeholders_expand_anywhere_and_several_per_argument() {
        let c = compiled(
            &[
                "SET",
                "meta-${task}",
                "${id}/${consumer}/${task}",
                "${payload}",
            ],
            Place::Process,
        )
        .unwrap();
        assert_eq!(c.name, "SET");
        let args = expanded(&c, &[]);
        assert_eq!(args[1], [b"meta-".as_slice(), &TASK].concat());
        assert_eq!(args[2], [b"1700000000000-3/7/".as_slice(), &TASK].concat());
        assert_eq!(args[3].len(), 100);
        let text = String::from_utf8(args[3].clone()).unwrap();
        assert!(text.starts_with(r#"{"id":"7a5c00000000000100000000000000ff","pad":"xx"#));
        assert!(text.ends_with("x\"}"), "{text}");
        assert!(c.carries_task());
    }

    #[test]
    fn times_random_and_literal_dollars() {
        let c = compiled(
            &["ZADD", "z", "${now}", "${now_ms}", "${rand}", "$5", "{x}"],
            Place::Process,
        )
        .unwrap();
        let args = expanded(&c, &[]);
        let now = String::from_utf8(args[2].clone()).unwrap();
        let (secs, millis) = now.split_once('.').unwrap();
        assert!(secs.parse::<u64>().unwrap() > 1_600_000_000 && millis.len() == 3);
        let ms: u64 = String::from_utf8(args[3].clone()).unwrap().parse().unwrap();
        assert!(ms / 1000 >= secs.parse::<u64>().unwrap());
        assert_eq!(args[4].len(), 32);
        assert!(args[4].iter().all(|b| b.is_ascii_hexdigit()));
        assert_eq!((&args[5][..], &args[6][..]), (&b"$5"[..], &b"{x}"[..]));
        assert!(!c.carries_task());
    }

    #[test]
    fn a_batch_argument_is_one_per_task() {
        let c = compiled(&["XACK", "q", "g", "${id}"], Place::Batch).unwrap();
        let batch = [
            TaskRef {
                task: TASK,
                handle: b"1-0".to_vec(),
            },
            TaskRef {
                task: TASK,
                handle: b"1-1".to_vec(),
            },
        ];
        let args = expanded(&c, &batch);
        assert_eq!(
            args,
            [&b"XACK"[..], b"q", b"g", b"1-0", b"1-1"].map(|a| a.to_vec())
        );
    }

    #[test]
    fn hex_gives_bytes_no_text_can_carry() {
        let c = compiled(&["EVALSHA", "x${hex:99de00ff}y", "0"], Place::Enqueue).unwrap();
        assert_eq!(expanded(&c, &[])[1], [b'x', 0x99, 0xde, 0x00, 0xff, b'y']);
        for bad in ["${hex:9}", "${hex:zz}", "${hex:}"] {
            let e = compiled(&["SET", "k", bad], Place::Enqueue).unwrap_err();
            assert!(e.contains("pairs of hex digits"), "{e}");
        }
    }

    #[test]
    fn fill_draws_one_listed_size_per_expansion_uniformly() {
        let c = compiled(
            &["HSET", "h", "f", "${fill:0,10,300}", "g", "a${fill:5}b"],
            Place::Enqueue,
        )
        .unwrap();
        let t = TaskRef {
            task: TASK,
            handle: Vec::new(),
        };
        let mut rng = Pcg64::seed_from_u64(7);
        let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
        let mut drawn = Vec::new();
        for _ in 0..3000 {
            let mut ctx = Ctx {
                task: Some(&t),
                batch: &[],
                consumer: 0,
                data_size: 100,
                rng: &mut rng,
            };
            let mut out = Vec::new();
            c.encode(&mut ctx, &mut out);
            let args = resp::decode_command(&out);
            assert!(args[3].iter().all(|&b| b == b'x'));
            assert_eq!(args[5], b"axxxxxb");
            *seen.entry(args[3].len()).or_default() += 1;
            drawn.push(args[3].len());
        }
        // Only the listed sizes, each about a third of the time (binomial sd 26).
        assert_eq!(seen.keys().copied().collect::<Vec<_>>(), [0, 10, 300]);
        assert!(
            seen.values().all(|&n| (880..=1120).contains(&n)),
            "{seen:?}"
        );
        // The same seed draws the same sizes (a run is repeatable).
        let mut again = Pcg64::seed_from_u64(7);
        let first: Vec<usize> = (0..20)
            .map(|_| {
                let mut ctx = Ctx {
                    task: Some(&t),
                    batch: &[],
                    consumer: 0,
                    data_size: 100,
                    rng: &mut again,
                };
                let mut out = Vec::new();
                c.encode(&mut ctx, &mut out);
                resp::decode_command(&out)[3].len()
            })
            .collect();
        assert_eq!(first, drawn[..20]);
        assert!(!c.carries_task());
    }

    #[test]
    fn a_bad_fill_is_one_line_at_load() {
        let many = vec!["1"; FILL_SIZES + 1].join(",");
        let cases = [
            ("${fill:}", "not a list of whole numbers"),
            ("${fill:10,,20}", "not a list of whole numbers"),
            ("${fill:10, 20}", "not a list of whole numbers"),
            ("${fill:-1}", "not a list of whole numbers"),
            ("${fill:1e3}", "not a list of whole numbers"),
            ("${fill:600000000}", "over 512 MiB"),
        ];
        for (arg, why) in cases {
            let e = compiled(&["SET", "k", arg], Place::Process).unwrap_err();
            assert!(
                e.contains(why) && e.contains("e.g. ${fill:17,128,950}"),
                "{arg}: {e}"
            );
            assert!(!e.contains('\n'));
        }
        let arg = format!("${{fill:{many}}}");
        let e = compiled(&["SET", "k", &arg], Place::Process).unwrap_err();
        assert!(e.contains("65 sizes, at most 64"), "{e}");
        // allowed anywhere, the dequeue too (it needs no task)
        assert!(compiled(&["EVAL", "return 1", "0", "${fill:3,4}"], Place::Dequeue).is_ok());
    }

    #[test]
    fn shas_resolve_to_the_loaded_sha1() {
        let mut c = compiled(&["EVALSHA", "${sha:fetch}", "0"], Place::Dequeue).unwrap();
        c.resolve_shas(&[("fetch".to_string(), "ab".repeat(20))].into());
        assert_eq!(expanded(&c, &[])[1], "ab".repeat(20).as_bytes());
    }

    #[test]
    fn bad_placeholders_say_why() {
        let err = |args: &[&str], place| compiled(args, place).unwrap_err();
        assert!(err(&["SET", "${taks}"], Place::Process).contains("unknown placeholder ${taks}"));
        assert!(err(&["SET", "${task"], Place::Process).contains("unclosed"));
        assert!(err(&["EVALSHA", "${sha:nope}"], Place::Process).contains("no script \"nope\""));
        assert!(err(&["LPUSH", "q", "${id}"], Place::Enqueue).contains("refused in enqueue"));
        assert!(err(&["BRPOP", "${task}", "1"], Place::Dequeue).contains("refused in dequeue"));
        assert!(err(&["XACK", "q", "g", "x${id}"], Place::Batch).contains("whole argument"));
        assert!(err(&[], Place::Process).contains("no name"));
    }
}
