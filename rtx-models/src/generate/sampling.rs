//! Choosing the next token from logits: [`Sampling`] settings and the seeded [`Sampler`].

use rtx::{Error, Result};

/// How the next token is chosen from the logits.
///
/// The steps run in llama.cpp's and `transformers`' order: the repetition penalty on the raw
/// logits, then (unless greedy) the temperature, top-k, top-p and min-p, and a draw from what
/// is left, renormalized.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// Divides the logits; 0 (or less) is greedy decoding: always the most likely token.
    pub temperature: f32,
    /// Keeps the `top_k` most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keeps the most likely tokens whose probabilities add up to `top_p` (nucleus sampling);
    /// 1 keeps all.
    pub top_p: f32,
    /// Drops tokens less likely than `min_p` times the most likely one; 0 keeps all.
    pub min_p: f32,
    /// Makes every token already in the context less likely: a positive logit is divided by
    /// it and a negative one multiplied (the CTRL paper's rule, as `transformers` applies it);
    /// 1 does nothing.
    pub repetition_penalty: f32,
    /// Seeds the draws.
    pub seed: u64,
}

impl Default for Sampling {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no
    /// repetition penalty, seed 0.
    fn default() -> Self {
        Sampling {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Greedy decoding: the most likely token every step (ties to the lowest id).
    pub fn greedy() -> Self {
        Sampling {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        }
    }

    /// These settings with `temperature`.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature;
        self
    }

    /// These settings with `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// These settings with `repetition_penalty`.
    pub fn with_repetition_penalty(mut self, penalty: f32) -> Self {
        self.repetition_penalty = penalty;
        self
    }

    /// An error naming the first setting out of range.
    fn check(&self) -> Result<()> {
        let bad = |msg: String| {
            Err(Error::BadArgument {
                op: "Sampling",
                msg,
            })
        };
        if self.temperature.is_nan() {
            return bad("the temperature is NaN".into());
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p is {}; it must be in (0, 1]", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p is {}; it must be in [0, 1]", self.min_p));
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return bad(format!(
                "the repetition penalty is {}; it must be positive (1 is none)",
                self.repetition_penalty
            ));
        }
        Ok(())
    }
}

/// Chooses tokens from logits by a [`Sampling`], with its own seeded random generator.
#[derive(Clone, Debug)]
pub struct Sampler {
    settings: Sampling,
    rng: SplitMix64,
}

impl Sampler {
    /// A sampler drawing with `settings`, its generator seeded by `settings.seed`.
    ///
    /// # Errors
    /// [`Error::BadArgument`] naming a setting out of range (top-p outside (0, 1], ...).
    pub fn new(settings: Sampling) -> Result<Sampler> {
        settings.check()?;
        Ok(Sampler {
            rng: SplitMix64(settings.seed),
            settings,
        })
    }

    /// The settings.
    pub fn settings(&self) -> &Sampling {
        &self.settings
    }

    /// The next token from one position's `logits` (one per vocabulary entry), `context`
    /// being the tokens so far (prompt and generated), which the repetition penalty reads.
    ///
    /// # Panics
    /// When `logits` is empty.
    pub fn sample(&mut self, logits: &[f32], context: &[u32]) -> u32 {
        assert!(!logits.is_empty(), "Sampler::sample: no logits");
        let s = &self.settings;
        let mut logits = logits.to_vec();
        if s.repetition_penalty != 1.0 {
            let mut seen = vec![false; logits.len()];
            for &id in context {
                let Some(l) = logits.get_mut(id as usize) else {
                    continue;
                };
                if !std::mem::replace(&mut seen[id as usize], true) {
                    *l = if *l > 0.0 {
                        *l / s.repetition_penalty
                    } else {
                        *l * s.repetition_penalty
                    };
                }
            }
        }
        if s.temperature <= 0.0 {
            return argmax(&logits);
        }
        // Candidates most likely first; top-k cuts before sorting, as most logits never
        // matter.
        let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
        let by_logit = |a: &u32, b: &u32| {
            logits[*b as usize]
                .total_cmp(&logits[*a as usize])
                .then(a.cmp(b))
        };
        if s.top_k > 0 && s.top_k < ids.len() {
            ids.select_nth_unstable_by(s.top_k - 1, by_logit);
            ids.truncate(s.top_k);
        }
        ids.sort_unstable_by(by_logit);
        let top = logits[ids[0] as usize];
        // Softmax with the temperature, relative to the largest logit (so exp never
        // overflows): the first weight is exactly 1.
        let mut p: Vec<f64> = ids
            .iter()
            .map(|&i| (f64::from(logits[i as usize] - top) / f64::from(s.temperature)).exp())
            .collect();
        let total: f64 = p.iter().sum();
        p.iter_mut().for_each(|x| *x /= total);
        let mut keep = p.len();
        if s.top_p < 1.0 {
            // The shortest prefix whose mass reaches top_p (at least one token).
            let mut mass = 0.0;
            keep = p
                .iter()
                .position(|&x| {
                    mass += x;
                    mass >= f64::from(s.top_p)
                })
                .map_or(p.len(), |i| i + 1);
        }
        if s.min_p > 0.0 {
            let floor = p[0] * f64::from(s.min_p);
            keep = keep.min(p.iter().take_while(|&&x| x >= floor).count().max(1));
        }
        let kept = &p[..keep];
        let mut u = self.rng.next_f64() * kept.iter().sum::<f64>();
        for (i, &x) in kept.iter().enumerate() {
            if u < x {
                return ids[i];
            }
            u -= x;
        }
        ids[keep - 1]
    }
}

/// The index of the largest value, the first one on ties.
fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// Sebastiano Vigna's SplitMix64: small, fast, and statistically fine for picking tokens.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logits() -> Vec<f32> {
        vec![1.0, 3.0, 2.0, -1.0, 2.9, 0.5]
    }

    #[test]
    fn greedy_takes_the_largest_logit_and_the_first_on_ties() {
        let mut s = Sampler::new(Sampling::greedy()).unwrap();
        assert_eq!(s.sample(&logits(), &[]), 1);
        assert_eq!(s.sample(&[0.5, 2.0, 2.0], &[]), 1);
    }

    #[test]
    fn top_k_of_one_is_greedy_at_any_temperature() {
        let settings = Sampling {
            temperature: 5.0,
            top_k: 1,
            ..Sampling::default()
        };
        let mut s = Sampler::new(settings).unwrap();
        assert!((0..50).all(|_| s.sample(&logits(), &[]) == 1));
    }

    #[test]
    fn a_seed_makes_draws_reproducible() {
        let settings = Sampling {
            temperature: 1.5,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        };
        let draw = |seed| {
            let mut s = Sampler::new(settings.clone().with_seed(seed)).unwrap();
            (0..400)
                .map(|_| s.sample(&logits(), &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        // At a high temperature every token turns up (the least likely, id 3, 2% of draws).
        let seen: std::collections::BTreeSet<u32> = draw(3).into_iter().collect();
        assert_eq!(seen.len(), 6, "{seen:?}");
    }

    #[test]
    fn top_p_and_min_p_keep_only_the_likely_tokens() {
        // Probabilities at temperature 1: ids 1 and 4 hold about 0.77 of the mass.
        let only_top_two = |settings: Sampling| {
            let mut s = Sampler::new(settings).unwrap();
            (0..200).all(|_| matches!(s.sample(&logits(), &[]), 1 | 4))
        };
        let base = Sampling {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Sampling::default()
        };
        assert!(only_top_two(Sampling {
            top_p: 0.7,
            ..base.clone()
        }));
        // min-p 0.5: id 2 (e^2 / e^3 = 0.37 of the top) is dropped, id 4 (0.9) is kept.
        assert!(only_top_two(Sampling {
            min_p: 0.5,
            ..base.clone()
        }));
        assert!(!only_top_two(base));
    }

    #[test]
    fn the_repetition_penalty_divides_positive_and_multiplies_negative_logits() {
        let mut s = Sampler::new(Sampling::greedy().with_repetition_penalty(2.0)).unwrap();
        // 3.0 / 2 = 1.5 falls below 2.9 and 2.0: id 4 wins; once id 4 is seen too, id 2 does.
        assert_eq!(s.sample(&logits(), &[1, 1]), 4);
        assert_eq!(s.sample(&logits(), &[1, 4]), 2);
        // A negative logit moves further down: -0.6 * 2 falls below -1.0.
        assert_eq!(s.sample(&[-1.0, -0.6], &[1]), 0);
    }

    #[test]
    fn settings_out_of_range_are_errors_naming_them() {
        let e = Sampler::new(Sampling {
            top_p: 0.0,
            ..Sampling::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("top_p"), "{e}");
        let e = Sampler::new(Sampling::greedy().with_repetition_penalty(0.0)).unwrap_err();
        assert!(e.to_string().contains("repetition penalty"), "{e}");
    }
}
