//! One connection's command sequence and key draws, as regtrack's built-in driver makes them
//! (regtrack/bench/loadgen/builtin.py `_Rotation`), so a workload file means the same
//! commands under every load generator. Templates are split once at their placeholders, so
//! encoding a command allocates nothing.

use crate::resp;
use crate::spec::Spec;
use rand::Rng;
use rand_pcg::Pcg64;

/// One argument of a command as written in the spec.
#[derive(Debug, Clone)]
enum Arg {
    Literal(Vec<u8>),
    /// `__data__`: the payload, data_size bytes of `x`.
    Data,
    /// Text around `__key__` (at least two pieces): one key number fills every gap.
    Key(Vec<Vec<u8>>),
}

#[derive(Debug, Clone)]
struct Template {
    /// The command's name in capitals, to count error replies by.
    name: String,
    args: Vec<Arg>,
    pattern: u8,
}

impl Template {
    fn new(args: &[String], pattern: u8) -> Template {
        let args: Vec<Arg> = args
            .iter()
            .map(|arg| {
                if arg == "__data__" {
                    Arg::Data
                } else if arg.contains("__key__") {
                    Arg::Key(
                        arg.split("__key__")
                            .map(|p| p.as_bytes().to_vec())
                            .collect(),
                    )
                } else {
                    Arg::Literal(arg.as_bytes().to_vec())
                }
            })
            .collect();
        let name = match args.first() {
            Some(Arg::Literal(bytes)) => String::from_utf8_lossy(bytes).to_uppercase(),
            _ => "?".to_string(),
        };
        Template {
            name,
            args,
            pattern,
        }
    }
}

/// The key-number state of one connection (kept apart from the templates so both can be
/// borrowed at once).
struct Keys {
    min: u64,
    max: u64,
    lockstep_first: u64,
    lockstep_span: u64,
    sequential: u64,
    rng: Pcg64,
}

impl Keys {
    fn draw(&mut self, pattern: u8, round: u64) -> u64 {
        let (low, high) = (self.min, self.max);
        match pattern {
            // lockstep: the same number for every command of one cycle
            b'P' => self.lockstep_first + round % self.lockstep_span,
            b'S' => {
                self.sequential = low + (self.sequential - low + 1) % (high - low + 1);
                self.sequential
            }
            b'G' => {
                let middle = (low as f64 + high as f64) / 2.0;
                let sigma = if high == low {
                    1.0
                } else {
                    (high - low) as f64 / 6.0
                };
                let draw = middle + sigma * self.gauss();
                draw.clamp(low as f64, high as f64).trunc() as u64
            }
            _ => self.rng.gen_range(low..=high),
        }
    }

    /// A standard normal draw (Box-Muller), as Python's random.gauss gives.
    fn gauss(&mut self) -> f64 {
        let u1: f64 = 1.0 - self.rng.gen::<f64>(); // (0, 1]: ln is finite
        let u2: f64 = self.rng.gen::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

pub struct Rotation {
    cycle: Vec<Template>,
    position: usize,
    rounds: u64,
    keys: Keys,
    payload: Vec<u8>,
}

impl Rotation {
    /// Connection `index` of `count`: its lockstep share of the key range is the index-th
    /// slice of `span / count` numbers, as in builtin.py.
    pub fn new(spec: &Spec, index: u64, count: u64, rng: Pcg64) -> Rotation {
        let mut cycle: Vec<Template> = Vec::new();
        for command in &spec.commands {
            let template = Template::new(&command.args, command.key_pattern.as_bytes()[0]);
            for _ in 0..command.ratio {
                cycle.push(template.clone());
            }
        }
        if cycle.is_empty() {
            let key = format!("{}__key__", spec.key_prefix);
            cycle.push(Template::new(&["GET".into(), key], b'R'));
        }
        let span = spec.key_max - spec.key_min + 1;
        let share = (span / count.max(1)).max(1);
        let keys = Keys {
            min: spec.key_min,
            max: spec.key_max,
            lockstep_first: spec.key_min + index * share,
            lockstep_span: share,
            sequential: spec.key_min,
            rng,
        };
        Rotation {
            cycle,
            position: 0,
            rounds: 0,
            keys,
            payload: vec![b'x'; spec.data_size],
        }
    }

    /// The name (in capitals) of the command at `index` of the cycle.
    pub fn name(&self, index: usize) -> &str {
        &self.cycle[index].name
    }

    /// Append the next command, RESP-encoded, to `buf`; returns its index in the cycle.
    pub fn encode_next(&mut self, buf: &mut Vec<u8>) -> usize {
        let index = self.position;
        let round = self.rounds;
        self.position += 1;
        if self.position == self.cycle.len() {
            self.position = 0;
            self.rounds += 1;
        }
        let template = &self.cycle[index];
        resp::array_header(template.args.len(), buf);
        let mut digits = [0u8; 20];
        for arg in &template.args {
            match arg {
                Arg::Literal(bytes) => resp::bulk(bytes, buf),
                Arg::Data => resp::bulk(&self.payload, buf),
                Arg::Key(pieces) => {
                    // a number per argument holding __key__, as builtin.py draws them
                    let key = self.keys.draw(template.pattern, round);
                    let number = resp::decimal(key, &mut digits);
                    let len: usize = pieces.iter().map(Vec::len).sum::<usize>()
                        + number.len() * (pieces.len() - 1);
                    resp::bulk_header(len, buf);
                    for (i, piece) in pieces.iter().enumerate() {
                        if i > 0 {
                            buf.extend_from_slice(number);
                        }
                        buf.extend_from_slice(piece);
                    }
                    buf.extend_from_slice(b"\r\n");
                }
            }
        }
        index
    }

    /// The next command's arguments (for tests: encoded, then read back).
    #[cfg(test)]
    pub fn next_args(&mut self) -> Vec<Vec<u8>> {
        let mut buf = Vec::new();
        self.encode_next(&mut buf);
        resp::decode_command(&buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn spec(text: &str) -> Spec {
        serde_json::from_str(text).unwrap()
    }

    fn rotation(spec: &Spec, index: u64, count: u64) -> Rotation {
        Rotation::new(spec, index, count, Pcg64::seed_from_u64(7))
    }

    fn strings(args: Vec<Vec<u8>>) -> Vec<String> {
        args.into_iter()
            .map(|a| String::from_utf8(a).unwrap())
            .collect()
    }

    #[test]
    fn empty_commands_is_a_get_sweep_of_the_prefix() {
        let s = spec(r#"{"key_prefix":"memtier-","key_min":1,"key_max":3}"#);
        let mut r = rotation(&s, 0, 1);
        for _ in 0..50 {
            let args = strings(r.next_args());
            assert_eq!(args[0], "GET");
            let n: u64 = args[1].strip_prefix("memtier-").unwrap().parse().unwrap();
            assert!((1..=3).contains(&n));
        }
    }

    #[test]
    fn each_command_ratio_times_in_a_row_then_the_next() {
        let s = spec(
            r#"{"key_min":1,"key_max":9,"data_size":4,"commands":[
            {"args":["SET","k__key__","__data__"],"ratio":2},{"args":["INCR","n"],"ratio":1}]}"#,
        );
        let mut r = rotation(&s, 0, 1);
        let names: Vec<String> = (0..6).map(|_| strings(r.next_args())[0].clone()).collect();
        assert_eq!(names, ["SET", "SET", "INCR", "SET", "SET", "INCR"]);
        let set = strings(r.next_args());
        assert_eq!(set[2], "xxxx", "__data__ is data_size bytes of x");
    }

    #[test]
    fn sequential_keys_step_from_key_min_plus_one_and_wrap() {
        // builtin.py: the counter starts at key_min and steps before it is used
        let s = spec(
            r#"{"key_min":1,"key_max":5,"commands":[{"args":["GET","k__key__"],"ratio":2,"key_pattern":"S"}]}"#,
        );
        let mut r = rotation(&s, 0, 1);
        let keys: Vec<String> = (0..7).map(|_| strings(r.next_args())[1].clone()).collect();
        assert_eq!(keys, ["k2", "k3", "k4", "k5", "k1", "k2", "k3"]);
    }

    #[test]
    fn lockstep_keys_are_one_number_per_cycle_in_the_connections_share() {
        let s = spec(
            r#"{"key_min":1,"key_max":100,"commands":[
            {"args":["SET","k__key__","v"],"key_pattern":"P"},{"args":["GET","k__key__"],"key_pattern":"P"}]}"#,
        );
        let mut r = rotation(&s, 1, 4); // share 25: numbers 26..=50
        let keys: Vec<String> = (0..6).map(|_| strings(r.next_args())[1].clone()).collect();
        assert_eq!(keys, ["k26", "k26", "k27", "k27", "k28", "k28"]);
        let mut last = rotation(&s, 3, 4);
        for _ in 0..60 {
            last.next_args();
        }
        assert_eq!(
            strings(last.next_args())[1],
            "k81",
            "round 30 wraps within 76..=100"
        );
    }

    #[test]
    fn random_keys_cover_the_range_uniformly() {
        let s = spec(r#"{"key_min":10,"key_max":19}"#);
        let mut r = rotation(&s, 0, 1);
        let mut counts = [0u32; 10];
        for _ in 0..20_000 {
            let key = strings(r.next_args())[1].parse::<u64>().unwrap();
            counts[(key - 10) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (1800..2200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn gaussian_keys_centre_on_the_middle_within_the_range() {
        let s = spec(
            r#"{"key_min":0,"key_max":600,"commands":[{"args":["GET","__key__"],"key_pattern":"G"}]}"#,
        );
        let mut r = rotation(&s, 0, 1);
        let keys: Vec<f64> = (0..20_000)
            .map(|_| strings(r.next_args())[1].parse::<f64>().unwrap())
            .collect();
        let mean = keys.iter().sum::<f64>() / keys.len() as f64;
        let within_sigma = keys
            .iter()
            .filter(|&&k| (200.0..400.0).contains(&k))
            .count();
        assert!((mean - 300.0).abs() < 3.0, "mean {mean}");
        // sigma = span / 6 = 100: about 68% within one sigma
        let share = within_sigma as f64 / keys.len() as f64;
        assert!((0.66..0.70).contains(&share), "{share}");
        assert!(keys.iter().all(|&k| (0.0..=600.0).contains(&k)));
    }

    #[test]
    fn same_seed_same_keys() {
        let s = spec(r#"{"key_min":1,"key_max":1000000}"#);
        let a: Vec<_> = {
            let mut r = rotation(&s, 0, 1);
            (0..100).map(|_| r.next_args()).collect()
        };
        let b: Vec<_> = {
            let mut r = rotation(&s, 0, 1);
            (0..100).map(|_| r.next_args()).collect()
        };
        assert_eq!(a, b);
    }
}
