//! The lifecycle file: what producers and consumers send for each task, as JSON written by
//! regtrack's Python side, checked (and its placeholders compiled) before any connection.

use crate::template::{self, Command, Place};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A step: commands written together (pipelined), one round trip.
pub type StepText = Vec<Vec<String>>;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DequeueText {
    pub command: Vec<String>,
    #[serde(default)]
    pub empty_wait_ms: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleText {
    #[serde(default = "default_data_size")]
    pub data_size: usize,
    pub producers: usize,
    pub consumers: usize,
    pub max_queued: u64,
    /// The task's own work (µs): a consumer waits this long after taking a task, before
    /// its process steps, as a worker runs the task's function (no CPU spent).
    #[serde(default)]
    pub work_us: f64,
    #[serde(default)]
    pub scripts: BTreeMap<String, String>,
    pub enqueue: Vec<StepText>,
    pub dequeue: DequeueText,
    pub process: Vec<StepText>,
    #[serde(default)]
    pub batch: Vec<StepText>,
}

fn default_data_size() -> usize {
    128
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    lifecycle: LifecycleText,
}

/// One step, compiled.
#[derive(Debug, Clone)]
pub struct Step {
    pub commands: Vec<Command>,
}

/// The checked lifecycle, its commands compiled.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub data_size: usize,
    pub producers: usize,
    pub consumers: usize,
    pub max_queued: u64,
    pub scripts: BTreeMap<String, String>,
    pub enqueue: Vec<Step>,
    pub dequeue: Step,
    pub empty_wait_ns: u64,
    pub work_ns: u64,
    pub process: Vec<Step>,
    pub batch: Vec<Step>,
}

fn steps(
    texts: &[StepText],
    place: Place,
    scripts: &BTreeMap<String, String>,
) -> Result<Vec<Step>, String> {
    let mut out = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let at = format!("{} step {}", place.name(), i + 1);
        if text.is_empty() {
            return Err(format!("{at} has no command"));
        }
        let commands = text
            .iter()
            .enumerate()
            .map(|(j, c)| {
                Command::compile(c, place, scripts)
                    .map_err(|e| format!("{at} command {}: {e}", j + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push(Step { commands });
    }
    Ok(out)
}

impl Lifecycle {
    /// Read and check a lifecycle file; Err is the one line to print (exit 2).
    pub fn load(path: &str) -> Result<Lifecycle, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read lifecycle {path}: {e}"))?;
        Lifecycle::parse(&text).map_err(|e| format!("lifecycle {path}: {e}"))
    }

    pub fn parse(text: &str) -> Result<Lifecycle, String> {
        let file: File = serde_json::from_str(text).map_err(|e| format!("not a lifecycle: {e}"))?;
        Lifecycle::check(file.lifecycle)
    }

    fn check(t: LifecycleText) -> Result<Lifecycle, String> {
        for (name, n) in [("producers", t.producers), ("consumers", t.consumers)] {
            if n == 0 || n > 10_000 {
                return Err(format!("{name} {n} must be 1 to 10000"));
            }
        }
        if t.max_queued == 0 {
            return Err("max_queued must be 1 or more".to_string());
        }
        if t.data_size < template::MIN_PAYLOAD || t.data_size > 512 * 1024 * 1024 {
            return Err(format!(
                "data_size {} must be {} (a payload with the task id) to 512 MiB",
                t.data_size,
                template::MIN_PAYLOAD
            ));
        }
        for (name, body) in &t.scripts {
            if name.is_empty() || name.contains('}') || body.trim().is_empty() {
                return Err(format!("script {name:?} needs a name and a body"));
            }
        }
        if !(t.dequeue.empty_wait_ms.is_finite() && t.dequeue.empty_wait_ms >= 0.0) {
            return Err("dequeue.empty_wait_ms must be 0 or more".to_string());
        }
        if !(t.work_us.is_finite() && (0.0..=60e6).contains(&t.work_us)) {
            return Err("work_us must be 0 to 60000000 (a minute)".to_string());
        }
        if t.enqueue.is_empty() {
            return Err("enqueue has no step".to_string());
        }
        let enqueue = steps(&t.enqueue, Place::Enqueue, &t.scripts)?;
        let dequeue = Command::compile(&t.dequeue.command, Place::Dequeue, &t.scripts)
            .map_err(|e| format!("dequeue: {e}"))?;
        let process = steps(&t.process, Place::Process, &t.scripts)?;
        let batch = steps(&t.batch, Place::Batch, &t.scripts)?;
        let carried = enqueue
            .iter()
            .any(|s| s.commands.iter().any(Command::carries_task));
        if !carried {
            return Err(
                "enqueue sends neither ${task} nor ${payload}: no consumer could tell the task"
                    .to_string(),
            );
        }
        Ok(Lifecycle {
            data_size: t.data_size,
            producers: t.producers,
            consumers: t.consumers,
            max_queued: t.max_queued,
            scripts: t.scripts,
            enqueue,
            dequeue: Step {
                commands: vec![dequeue],
            },
            empty_wait_ns: (t.dequeue.empty_wait_ms * 1e6).round() as u64,
            work_ns: (t.work_us * 1e3).round() as u64,
            process,
            batch,
        })
    }

    /// Every compiled command, to resolve the scripts' SHA1s in.
    pub fn commands_mut(&mut self) -> impl Iterator<Item = &mut Command> {
        self.enqueue
            .iter_mut()
            .chain(std::iter::once(&mut self.dequeue))
            .chain(self.process.iter_mut())
            .chain(self.batch.iter_mut())
            .flat_map(|s| s.commands.iter_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CELERY: &str = r#"{"lifecycle": {
      "data_size": 950, "producers": 4, "consumers": 8, "max_queued": 1000,
      "scripts": {"fetch": "return redis.call('RPOP', KEYS[1])"},
      "enqueue": [ [["LPUSH", "celery", "${payload}"]] ],
      "dequeue": {"command": ["BRPOP", "celery", "1"], "empty_wait_ms": 0},
      "process": [ [["MULTI"], ["ZADD", "unacked_index", "${now}", "${task}"],
                    ["HSET", "unacked", "${task}", "${payload}"], ["EXEC"]],
                   [["SETEX", "celery-task-meta-${task}", "86400", "${payload}"]] ],
      "batch": [ ]
    }}"#;

    fn with(field: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(CELERY).unwrap();
        v["lifecycle"][field] = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    fn err(text: &str) -> String {
        Lifecycle::parse(text).unwrap_err()
    }

    #[test]
    fn the_celery_example_loads() {
        let l = Lifecycle::parse(CELERY).unwrap();
        assert_eq!((l.producers, l.consumers, l.max_queued), (4, 8, 1000));
        assert_eq!(l.process.len(), 2);
        assert_eq!(l.process[0].commands.len(), 4);
        assert_eq!(l.process[0].commands[3].name, "EXEC");
        assert!(l.batch.is_empty());
        assert_eq!(l.dequeue.commands[0].name, "BRPOP");
    }

    #[test]
    fn a_lifecycle_with_nothing_after_the_pop_is_accepted() {
        let l = Lifecycle::parse(&with("process", "[]")).expect("no process steps");
        assert!(l.process.is_empty());
    }

    #[test]
    fn each_mistake_is_one_line() {
        let cases = [
            (with("enqueue", "[]"), "enqueue has no step"),
            (with("process", "[[]]"), "process step 1 has no command"),
            (
                with("process", r#"[[["SET", "${nope}", "1"]]]"#),
                "unknown placeholder ${nope}",
            ),
            (
                with("process", r#"[[["EVALSHA", "${sha:other}", "0"]]]"#),
                "no script \"other\"",
            ),
            (
                with("enqueue", r#"[[["LPUSH", "q", "${id}"]]]"#),
                "refused in enqueue",
            ),
            (
                with("enqueue", r#"[[["LPUSH", "q", "x"]]]"#),
                "neither ${task} nor ${payload}",
            ),
            (
                with("dequeue", r#"{"command": ["BRPOP", "q", "1"], "wait": 1}"#),
                "unknown field",
            ),
            (
                with("dequeue", r#"{"command": []}"#),
                "dequeue: a command has no name",
            ),
            (with("producers", "0"), "producers 0"),
            (with("max_queued", "0"), "max_queued"),
            (with("data_size", "20"), "data_size 20"),
            (with("bogus", "1"), "unknown field `bogus`"),
            (
                with("batch", r#"[[["XACK", "q", "g", "${payload}"]]]"#),
                "refused in batch",
            ),
        ];
        for (text, words) in cases {
            let e = err(&text);
            assert!(e.contains(words), "{words}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let mut outer: serde_json::Value = serde_json::from_str(CELERY).unwrap();
        outer["x"] = 1.into();
        assert!(err(&outer.to_string()).contains("unknown field `x`"));
    }
}
