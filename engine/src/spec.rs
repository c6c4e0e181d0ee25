//! The workload spec file: regtrack's LoadSpec (regtrack/core/records.py) as JSON, checked
//! before any connection is made.

use serde::Deserialize;

/// One command of the rotation, as MixCommand: sent `ratio` times in a row.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub args: Vec<String>,
    #[serde(default = "one")]
    pub ratio: u32,
    #[serde(default = "random_pattern")]
    pub key_pattern: String,
}

fn one() -> u32 {
    1
}

fn random_pattern() -> String {
    "R".to_string()
}

/// What every connection sends: GETs of `key_prefix` + a number in [key_min, key_max]
/// when `commands` is empty, else the rotation of `commands`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    #[serde(default)]
    pub key_prefix: String,
    pub key_min: u64,
    pub key_max: u64,
    #[serde(default)]
    pub data_size: usize,
    #[serde(default)]
    pub commands: Vec<CommandSpec>,
}

/// Commands that wait for data or for replicas, or turn the connection into a subscriber:
/// replies would stop arriving in order, on time.
const BLOCKING: &[&str] = &[
    "BLPOP",
    "BRPOP",
    "BRPOPLPUSH",
    "BLMOVE",
    "BZPOPMIN",
    "BZPOPMAX",
    "BLMPOP",
    "BZMPOP",
    "WAIT",
    "WAITAOF",
    "SUBSCRIBE",
    "PSUBSCRIBE",
    "SSUBSCRIBE",
    "MONITOR",
];

/// The one-line reason a command cannot be in an open loop, if any.
fn refused(args: &[String]) -> Option<String> {
    let name = args[0].to_uppercase();
    let blocks = BLOCKING.contains(&name.as_str())
        || (matches!(name.as_str(), "XREAD" | "XREADGROUP")
            && args[1..].iter().any(|a| a.eq_ignore_ascii_case("BLOCK")));
    blocks.then(|| {
        format!(
            "{name} blocks or holds its connection: an open loop cannot hold a blocked \
             connection (send it from a closed-loop load generator)"
        )
    })
}

impl Spec {
    /// Read and check a spec file; Err is the one line to print (exit 2).
    pub fn load(path: &str) -> Result<Spec, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read spec {path}: {e}"))?;
        let spec: Spec = serde_json::from_str(&text)
            .map_err(|e| format!("spec {path} is not a load spec: {e}"))?;
        spec.check().map_err(|e| format!("spec {path}: {e}"))?;
        Ok(spec)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.key_min > self.key_max {
            return Err(format!(
                "key_min {} is above key_max {}",
                self.key_min, self.key_max
            ));
        }
        if self.data_size > 512 * 1024 * 1024 {
            return Err(format!(
                "data_size {} is above Redis's 512 MiB",
                self.data_size
            ));
        }
        for command in &self.commands {
            if command.args.is_empty() || command.args[0].is_empty() {
                return Err("a command has no name (args is empty)".to_string());
            }
            if command.ratio == 0 {
                return Err(format!("{}: ratio must be 1 or more", command.args[0]));
            }
            if !matches!(command.key_pattern.as_str(), "R" | "S" | "G" | "P") {
                return Err(format!(
                    "{}: key_pattern {:?} is not one of R, S, G, P",
                    command.args[0], command.key_pattern
                ));
            }
            if let Some(reason) = refused(&command.args) {
                return Err(reason);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Spec, String> {
        let spec: Spec = serde_json::from_str(text).map_err(|e| e.to_string())?;
        spec.check().map(|_| spec)
    }

    #[test]
    fn a_get_sweep_needs_only_the_key_range() {
        let spec = parsed(r#"{"key_min": 1, "key_max": 10}"#).unwrap();
        assert!(spec.commands.is_empty());
        assert_eq!(spec.key_prefix, "");
    }

    #[test]
    fn command_defaults_are_ratio_1_and_random_keys() {
        let spec = parsed(
            r#"{"key_min":1,"key_max":2,"commands":[{"args":["SET","k__key__","__data__"]}]}"#,
        )
        .unwrap();
        assert_eq!(spec.commands[0].ratio, 1);
        assert_eq!(spec.commands[0].key_pattern, "R");
    }

    #[test]
    fn blocking_commands_are_refused() {
        for args in [
            r#"["BLPOP","q","0"]"#,
            r#"["XREAD","BLOCK","0","STREAMS","s","$"]"#,
            r#"["wait","1","0"]"#,
        ] {
            let text = format!(r#"{{"key_min":1,"key_max":2,"commands":[{{"args":{args}}}]}}"#);
            let err = parsed(&text).unwrap_err();
            assert!(
                err.contains("an open loop cannot hold a blocked connection"),
                "{err}"
            );
        }
        let text = r#"{"key_min":1,"key_max":2,"commands":[{"args":["XREAD","STREAMS","s","0"]}]}"#;
        assert!(parsed(text).is_ok());
    }

    #[test]
    fn bad_specs_say_why() {
        assert!(parsed(r#"{"key_min": 5, "key_max": 1}"#)
            .unwrap_err()
            .contains("above key_max"));
        let bad_pattern =
            r#"{"key_min":1,"key_max":2,"commands":[{"args":["GET","k"],"key_pattern":"Z"}]}"#;
        assert!(parsed(bad_pattern).unwrap_err().contains("key_pattern"));
        assert!(parsed(r#"{"key_min":1,"key_max":2,"clients":4}"#).is_err());
        let zero = r#"{"key_min":1,"key_max":2,"commands":[{"args":["GET","k"],"ratio":0}]}"#;
        assert!(parsed(zero).unwrap_err().contains("ratio"));
    }
}
