//! The global arrival stream: the intended send time of every request, fixed before the
//! run and independent of replies (an open loop).

use rand::Rng;
use rand_pcg::Pcg64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced: request i at i / rate.
    Constant,
    /// A Poisson process: exponential gaps of mean 1 / rate from a seeded PRNG.
    Poisson,
}

impl Arrival {
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Constant => "constant",
            Arrival::Poisson => "poisson",
        }
    }
}

/// Offsets (ns from the start) of request 0, 1, 2, ...
pub struct Schedule {
    arrival: Arrival,
    period_ns: f64,
    index: u64,
    offset_ns: f64,
    rng: Pcg64,
}

impl Schedule {
    pub fn new(arrival: Arrival, rate: f64, rng: Pcg64) -> Schedule {
        Schedule {
            arrival,
            period_ns: 1e9 / rate,
            index: 0,
            offset_ns: 0.0,
            rng,
        }
    }

    /// The offset of the next request. Constant offsets are computed from the index (no
    /// accumulated rounding); Poisson ones add an exponential gap to the last.
    pub fn next_offset(&mut self) -> u64 {
        let offset = match self.arrival {
            Arrival::Constant => self.index as f64 * self.period_ns,
            Arrival::Poisson => {
                if self.index > 0 {
                    let u: f64 = self.rng.gen::<f64>(); // [0, 1): 1 - u is never 0
                    self.offset_ns += -(1.0 - u).ln() * self.period_ns;
                }
                self.offset_ns
            }
        };
        self.index += 1;
        offset.round() as u64
    }
}

/// How long before each due time the loop stops sleeping and polls its sockets instead
/// (--spin-us), at most a quarter of the mean time between arrivals (so the spin costs at
/// most a quarter of a CPU; 0 at capacity). A CPU woken by its timer can start running
/// 0.2-0.5 ms late on a VM (the hypervisor must schedule the halted vCPU first), which
/// writes the request due then late: a stall of the engine's, and that request is left
/// out. A loop that is already running sends it on time.
pub fn spin_lead_ns(spin_us: f64, rate: f64) -> u64 {
    if rate <= 0.0 || spin_us <= 0.0 {
        return 0;
    }
    (spin_us * 1e3).min(0.25e9 / rate).round() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn offsets(arrival: Arrival, rate: f64, seed: u64, n: usize) -> Vec<u64> {
        let mut s = Schedule::new(arrival, rate, Pcg64::seed_from_u64(seed));
        (0..n).map(|_| s.next_offset()).collect()
    }

    #[test]
    fn constant_spacing_is_exact_and_does_not_drift() {
        let o = offsets(Arrival::Constant, 50_000.0, 1, 1_000_001);
        assert_eq!(&o[..4], &[0, 20_000, 40_000, 60_000]);
        assert!(o.windows(2).all(|w| w[1] - w[0] == 20_000));
        assert_eq!(o[1_000_000], 20_000_000_000);
        // a rate whose period is not whole nanoseconds still lands on i / rate
        let o = offsets(Arrival::Constant, 3.0, 1, 4);
        assert_eq!(o, [0, 333_333_333, 666_666_667, 1_000_000_000]);
    }

    #[test]
    fn poisson_gaps_have_mean_one_over_rate_and_exponential_spread() {
        let n = 200_000;
        let o = offsets(Arrival::Poisson, 10_000.0, 42, n + 1);
        let gaps: Vec<f64> = o.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        assert!((mean - 100_000.0).abs() < 1_000.0, "mean gap {mean} ns");
        // exponential: standard deviation equals the mean; P(gap > mean) = 1/e
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.02,
            "cv {}",
            var.sqrt() / mean
        );
        let above = gaps.iter().filter(|&&g| g > mean).count() as f64 / n as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.01, "{above}");
    }

    #[test]
    fn same_seed_same_schedule_other_seed_another() {
        let a = offsets(Arrival::Poisson, 1000.0, 9, 1000);
        assert_eq!(a, offsets(Arrival::Poisson, 1000.0, 9, 1000));
        assert_ne!(a, offsets(Arrival::Poisson, 1000.0, 10, 1000));
        assert_eq!(a[0], 0);
    }

    #[test]
    fn the_spin_is_the_option_up_to_a_quarter_of_the_mean_gap() {
        assert_eq!(spin_lead_ns(1000.0, 200.0), 1_000_000); // 5 ms apart: 1 ms
        assert_eq!(spin_lead_ns(1000.0, 2000.0), 125_000); // 500 us apart: a quarter
        assert_eq!(spin_lead_ns(0.0, 200.0), 0); // off
        assert_eq!(spin_lead_ns(1000.0, 0.0), 0); // capacity: never sleeps for a schedule
    }
}
