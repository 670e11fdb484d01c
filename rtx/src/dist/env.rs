//! The environment torchrun (and `rtx-run`) sets for each rank, read and checked once.
//!
//! Invariant: an [`Env`] that exists is consistent: `rank < world_size`, `world_size >= 1`,
//! `local_rank < world_size`, and the master's address and port are set.

use crate::error::{Error, Result};
use std::time::Duration;

/// The timeout used when `RTX_DIST_TIMEOUT` is not set: PyTorch's default for its store.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What one rank learns from its environment: who it is, how many there are, and where rank 0
/// serves the store.
///
/// ```
/// use rtx::dist::Env;
/// let vars = [("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "node0"), ("MASTER_PORT", "1")];
/// let var = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
/// let env = Env::from_lookup(var).unwrap();
/// assert_eq!((env.rank, env.world_size, env.local_rank), (1, 2, 1));
/// assert_eq!(env.master_port, 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env {
    /// This process's rank, `0..world_size` (`RANK`).
    pub rank: usize,
    /// The number of ranks (`WORLD_SIZE`).
    pub world_size: usize,
    /// This process's rank on its node, which picks its GPU (`LOCAL_RANK`; `RANK` when unset,
    /// as on one node).
    pub local_rank: usize,
    /// The host of rank 0's store (`MASTER_ADDR`).
    pub master_addr: String,
    /// The port of rank 0's store (`MASTER_PORT`).
    pub master_port: u16,
}

impl Env {
    /// Reads `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` and `MASTER_PORT` from the
    /// process environment.
    ///
    /// # Errors
    /// [`Error::Dist`] naming the variable that is missing or does not parse (its value
    /// quoted), or saying that `RANK` is not below `WORLD_SIZE`.
    pub fn from_env() -> Result<Env> {
        Env::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Env::from_env`] over any source of variables (tests, or a launcher's own map).
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Env> {
        let world_size: usize = parse(&var, "WORLD_SIZE")?;
        let rank: usize = parse(&var, "RANK")?;
        if world_size == 0 {
            return Err(env_error(
                None,
                "WORLD_SIZE is 0: a group needs at least one rank",
            ));
        }
        if rank >= world_size {
            return Err(env_error(
                Some(rank),
                &format!(
                    "RANK={rank} is not below WORLD_SIZE={world_size}: ranks are 0..{world_size}"
                ),
            ));
        }
        let local_rank = match var("LOCAL_RANK") {
            Some(_) => parse(&var, "LOCAL_RANK")?,
            None => rank,
        };
        if local_rank >= world_size {
            return Err(env_error(
                Some(rank),
                &format!("LOCAL_RANK={local_rank} is not below WORLD_SIZE={world_size}"),
            ));
        }
        let master_addr = required(&var, "MASTER_ADDR")?;
        if master_addr.trim().is_empty() {
            return Err(env_error(Some(rank), "MASTER_ADDR is set but empty"));
        }
        let master_port = parse(&var, "MASTER_PORT")?;
        Ok(Env {
            rank,
            world_size,
            local_rank,
            master_addr,
            master_port,
        })
    }
}

/// The collective timeout: `RTX_DIST_TIMEOUT` in seconds (a decimal such as `2.5` is allowed),
/// else [`DEFAULT_TIMEOUT`].
///
/// # Errors
/// [`Error::Dist`] quoting the value when it is not a positive number of seconds.
///
/// ```
/// let t = rtx::dist::timeout_from_env()?; // 300 s unless RTX_DIST_TIMEOUT says otherwise
/// assert!(t.as_secs_f64() > 0.0);
/// # Ok::<(), rtx::Error>(())
/// ```
pub fn timeout_from_env() -> Result<Duration> {
    let Ok(text) = std::env::var("RTX_DIST_TIMEOUT") else {
        return Ok(DEFAULT_TIMEOUT);
    };
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
        _ => Err(env_error(
            None,
            &format!("RTX_DIST_TIMEOUT={text:?} is not a positive number of seconds"),
        )),
    }
}

/// The value of `name`, or an error naming it.
fn required(var: &impl Fn(&str) -> Option<String>, name: &str) -> Result<String> {
    var(name).ok_or_else(|| {
        env_error(
            None,
            &format!(
                "environment variable {name} is not set (torchrun and rtx-run set RANK, \
                 WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT for each rank)"
            ),
        )
    })
}

/// The value of `name` parsed as a number, or an error quoting it.
fn parse<T: std::str::FromStr>(var: &impl Fn(&str) -> Option<String>, name: &str) -> Result<T> {
    let text = required(var, name)?;
    text.trim().parse().map_err(|_| {
        env_error(
            None,
            &format!("environment variable {name}={text:?} is not a non-negative integer in range"),
        )
    })
}

fn env_error(rank: Option<usize>, msg: &str) -> Error {
    Error::Dist {
        rank,
        msg: format!("distributed environment: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Result<Env> {
        Env::from_lookup(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    const OK: [(&str, &str); 5] = [
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "node0"),
        ("MASTER_PORT", "1234"),
    ];

    fn without(name: &str) -> Vec<(&'static str, &'static str)> {
        OK.iter().copied().filter(|(n, _)| *n != name).collect()
    }

    fn with(name: &'static str, value: &'static str) -> Vec<(&'static str, &'static str)> {
        let mut v = without(name);
        v.push((name, value));
        v
    }

    fn message(r: Result<Env>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn a_full_environment_is_read() {
        let e = env(&OK).unwrap();
        assert_eq!(
            e,
            Env {
                rank: 3,
                world_size: 4,
                local_rank: 1,
                master_addr: "node0".into(),
                master_port: 1234
            }
        );
        assert_eq!(env(&without("LOCAL_RANK")).unwrap().local_rank, 3);
    }

    #[test]
    fn every_missing_variable_is_named() {
        for name in ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"] {
            let m = message(env(&without(name)));
            assert!(m.contains(&format!("{name} is not set")), "{m}");
        }
    }

    #[test]
    fn bad_values_are_quoted() {
        let m = message(env(&with("RANK", "two")));
        assert!(m.contains("RANK=\"two\""), "{m}");
        let m = message(env(&with("MASTER_PORT", "70000")));
        assert!(m.contains("MASTER_PORT=\"70000\""), "{m}");
        let m = message(env(&with("WORLD_SIZE", "-1")));
        assert!(m.contains("WORLD_SIZE=\"-1\""), "{m}");
    }

    #[test]
    fn rank_must_be_below_world_size() {
        let r = env(&with("RANK", "4"));
        assert!(matches!(r, Err(Error::Dist { rank: Some(4), .. })));
        assert!(message(r).contains("RANK=4 is not below WORLD_SIZE=4"));
        assert!(message(env(&with("WORLD_SIZE", "0"))).contains("WORLD_SIZE is 0"));
        assert!(message(env(&with("LOCAL_RANK", "9"))).contains("LOCAL_RANK=9"));
        assert!(message(env(&with("MASTER_ADDR", " "))).contains("MASTER_ADDR is set but empty"));
    }
}
