//! Distributed training (`rtx::dist`) with ranks as processes: this test binary re-runs itself
//! as each rank (`--exact dist::rank_child` with torchrun's variables set), and every rank
//! checks every collective and reduction against a reference computed in one process from all
//! ranks' known inputs. Faults: a rank that exits or hangs makes the others fail naming it;
//! a bad environment is named. The sampler's shares are checked without processes.

use rtx::data::DistributedSampler;
use rtx::dist::{self, ReduceOp};
use rtx::prelude::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "dist::rank_child";

// ---- The child side: one rank ----

/// Runs the scenario named by `RTX_DIST_CHILD` as one rank and writes its outcome to
/// `RTX_DIST_OUT`: `ok`, or the error's `rank` field and message. Does nothing in a normal run.
#[test]
fn rank_child() {
    let Ok(scenario) = std::env::var("RTX_DIST_CHILD") else {
        return;
    };
    let out = std::env::var("RTX_DIST_OUT").unwrap();
    let victim: usize = std::env::var("RTX_DIST_VICTIM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    let result = match scenario.as_str() {
        "collectives" => collectives(),
        "exit" | "hang" => fault(&scenario, victim),
        "size" | "order" => disagree(&scenario),
        "init" => dist::init().map(drop),
        ddp if ddp.starts_with("ddp_") => crate::ddp::scenario(ddp),
        other => panic!("unknown scenario {other}"),
    };
    let text = match result {
        Ok(()) => "ok".to_string(),
        Err(rtx::Error::Dist { rank, msg }) => format!("dist {rank:?}\n{msg}"),
        Err(e) => format!("other\n{e}"),
    };
    std::fs::write(out, text).unwrap();
}

/// Rank `rank`'s input element `i`: values of mixed signs and magnitudes, so the order of a
/// float sum changes its rounding, and integer products overflow (and wrap).
fn input<E: Element>(rank: usize, i: usize) -> E {
    let k = ((rank * 31 + i * 17) % 23) as f64 - 11.0;
    if E::DTYPE.is_float() {
        let scale = [0.001, 0.37, 1.0, 13.0][(rank + i) % 4];
        E::from_f64(k * scale + 0.25)
    } else {
        let big = if E::DTYPE == DType::I64 {
            10_000_019
        } else {
            1009
        };
        E::from_i64(k as i64 * big + (rank * 7 + i) as i64)
    }
}

fn inputs<E: Element>(rank: usize, n: usize) -> Vec<E> {
    (0..n).map(|i| input(rank, i)).collect()
}

/// The reduction of `parts` (one per rank), computed here without rtx: floats accumulate in
/// f32 (f64 for f64) in rank order and round once, integers wrap in their own width.
fn reference<E: Element>(parts: &[Vec<E>], op: ReduceOp) -> Vec<E> {
    let n = parts.len();
    (0..parts[0].len())
        .map(|i| {
            if E::DTYPE.is_float() {
                let wide = E::DTYPE == DType::F64;
                let round = |x: f64| if wide { x } else { x as f32 as f64 };
                let mut acc = parts[0][i].to_f64();
                for p in &parts[1..] {
                    let x = p[i].to_f64();
                    acc = round(match op {
                        ReduceOp::Sum | ReduceOp::Avg => acc + x,
                        ReduceOp::Product => acc * x,
                        ReduceOp::Max => acc.max(x),
                        ReduceOp::Min => acc.min(x),
                    });
                }
                if op == ReduceOp::Avg {
                    acc = round(acc / n as f64);
                }
                E::from_f64(acc)
            } else {
                let narrow = |x: i64| {
                    if E::DTYPE == DType::I32 {
                        x as i32 as i64
                    } else {
                        x
                    }
                };
                let mut acc = parts[0][i].to_i64();
                for p in &parts[1..] {
                    let x = p[i].to_i64();
                    acc = narrow(match op {
                        ReduceOp::Sum | ReduceOp::Avg => acc.wrapping_add(x),
                        ReduceOp::Product => acc.wrapping_mul(x),
                        ReduceOp::Max => acc.max(x),
                        ReduceOp::Min => acc.min(x),
                    });
                }
                E::from_i64(acc)
            }
        })
        .collect()
}

/// The raw bytes, so that results must match bit for bit (-0.0 is not 0.0).
fn bits<E: Element>(v: &[E]) -> Vec<u8> {
    rtx_backends::bytes_of(v).to_vec()
}

fn tensor<E: Element>(v: Vec<E>) -> Tensor<(usize,), E> {
    let n = v.len();
    Tensor::from_vec(v, (n,), Device::Cpu)
}

/// Every collective on element type `E`, against the reference, for buffers that split into
/// the world's chunks unevenly (37), with fewer elements than ranks (3), and empty (0).
fn check_type<E: Element>(pg: &dist::ProcessGroup) -> rtx::Result<()> {
    let (rank, world) = (pg.rank(), pg.world_size());
    let name = E::DTYPE.name();
    for n in [37, 3, 0] {
        let all: Vec<Vec<E>> = (0..world).map(|r| inputs(r, n)).collect();
        for op in ReduceOp::ALL {
            let mut t = tensor(all[rank].clone());
            if op == ReduceOp::Avg && !E::DTYPE.is_float() {
                assert!(pg.all_reduce(&mut t, op).is_err(), "{name} avg");
                continue;
            }
            pg.all_reduce(&mut t, op)?;
            let want = reference(&all, op);
            assert_eq!(
                bits(&t.to_vec()),
                bits(&want),
                "all_reduce {name} {op:?} n={n}"
            );
            assert_eq!(t.dims(), &[n]);

            // reduce_scatter: rank q's block j is the input of (q, j * n + i).
            let blocks: Vec<Tensor<(usize,), E>> = (0..world)
                .map(|j| tensor((0..n).map(|i| input(rank, j * n + i)).collect()))
                .collect();
            let got = pg.reduce_scatter(&blocks, op)?;
            let per_rank: Vec<Vec<E>> = (0..world)
                .map(|q| (0..n).map(|i| input(q, rank * n + i)).collect())
                .collect();
            let want = reference(&per_rank, op);
            assert_eq!(
                bits(&got.to_vec()),
                bits(&want),
                "reduce_scatter {name} {op:?} n={n}"
            );
        }
        for root in [0, world - 1] {
            let mut t = tensor(all[rank].clone());
            pg.broadcast(&mut t, root)?;
            assert_eq!(
                bits(&t.to_vec()),
                bits(&all[root]),
                "broadcast {name} from {root}"
            );
        }
        let gathered = pg.all_gather(&tensor(all[rank].clone()))?;
        assert_eq!(gathered.len(), world);
        for (q, g) in gathered.iter().enumerate() {
            assert_eq!(
                bits(&g.to_vec()),
                bits(&all[q]),
                "all_gather {name} from {q}"
            );
        }
    }
    Ok(())
}

fn collectives() -> rtx::Result<()> {
    let pg = dist::init()?;
    let env = dist::Env::from_env()?;
    assert_eq!((pg.rank(), pg.world_size()), (env.rank, env.world_size));
    check_type::<f32>(&pg)?;
    check_type::<f64>(&pg)?;
    check_type::<f16>(&pg)?;
    check_type::<bf16>(&pg)?;
    check_type::<i32>(&pg)?;
    check_type::<i64>(&pg)?;

    // A strided view is sent in logical order; a 2-D tensor keeps its shape; a view sharing
    // the old storage keeps the old values.
    let base: Tensor<Rank2<2, 3>> =
        Tensor::from_vec(inputs(pg.rank(), 6), (Const, Const), Device::Cpu);
    let mut t = base.t();
    pg.all_reduce(&mut t, ReduceOp::Max)?;
    let all: Vec<Vec<f32>> = (0..pg.world_size())
        .map(|r| {
            Tensor::<Rank2<2, 3>>::from_vec(inputs(r, 6), (Const, Const), Device::Cpu)
                .t()
                .to_vec()
        })
        .collect();
    assert_eq!(t.dims(), &[3, 2]);
    assert_eq!(bits(&t.to_vec()), bits(&reference(&all, ReduceOp::Max)));
    assert_eq!(base.to_vec(), inputs::<f32>(pg.rank(), 6));

    // Arguments every rank gets wrong alike fail before anything is sent.
    assert!(pg.broadcast(&mut t, pg.world_size()).is_err());
    assert!(
        pg.reduce_scatter(&[tensor(vec![1.0f32])], ReduceOp::Sum)
            .is_err()
            || pg.world_size() == 1
    );
    pg.barrier()
}

/// Rank `victim` exits (or hangs) right after joining; the others' all-reduce must fail
/// naming it.
fn fault(how: &str, victim: usize) -> rtx::Result<()> {
    let pg = dist::init()?;
    pg.barrier()?;
    if pg.rank() == victim {
        if how == "hang" {
            std::thread::sleep(Duration::from_secs(60));
        }
        std::process::exit(0);
    }
    let mut t = tensor(vec![1.0f32; 1000]);
    let start = Instant::now();
    let result = pg.all_reduce(&mut t, ReduceOp::Sum);
    // How long the failing call took, for the parent to hold against the timeout.
    let out = std::env::var("RTX_DIST_OUT").unwrap();
    std::fs::write(format!("{out}.ms"), start.elapsed().as_millis().to_string()).unwrap();
    // The group stays failed: a second call gives the same error at once.
    if let Err(e) = &result {
        assert_eq!(pg.barrier().unwrap_err(), *e);
    }
    result
}

/// Rank `RTX_DIST_ODD` passes a longer tensor (`size`) or calls another collective (`order`)
/// than the others.
fn disagree(how: &str) -> rtx::Result<()> {
    let odd: usize = std::env::var("RTX_DIST_ODD").unwrap().parse().unwrap();
    let pg = dist::init()?;
    pg.barrier()?;
    let mut t = tensor(vec![1.0f32; if pg.rank() == odd { 5 } else { 4 }]);
    if how == "order" && pg.rank() == odd {
        return pg.barrier();
    }
    pg.all_reduce(&mut t, ReduceOp::Sum)
}

// ---- The parent side: launching ranks ----

/// A port nothing listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("dist")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What each rank reported, and how long the slowest reporting rank took.
pub(crate) struct Outcome {
    dir: PathBuf,
    reports: Vec<Option<String>>,
    pub(crate) logs: Vec<String>,
    elapsed: Duration,
}

impl Outcome {
    pub(crate) fn report(&self, rank: usize) -> &str {
        self.reports[rank].as_deref().unwrap_or_else(|| {
            panic!(
                "rank {rank} reported nothing; its log:\n{}",
                self.logs[rank]
            )
        })
    }
}

/// Runs `world` ranks of `scenario` with extra variables `vars` (a `None` value removes one),
/// waits for every rank but `victim` to finish, then kills the rest.
pub(crate) fn launch(
    name: &str,
    world: usize,
    scenario: &str,
    victim: Option<usize>,
    vars: &[(&str, Option<&str>)],
) -> Outcome {
    let d = dir(name);
    let port = free_port().to_string();
    let exe = std::env::current_exe().unwrap();
    let start = Instant::now();
    let mut children: Vec<_> = (0..world)
        .map(|rank| {
            let mut cmd = Command::new(&exe);
            cmd.args(["--exact", CHILD, "--test-threads=1", "--nocapture"])
                .env("RTX_DIST_CHILD", scenario)
                .env("RTX_DIST_OUT", d.join(format!("rank{rank}.txt")))
                .env("RANK", rank.to_string())
                .env("LOCAL_RANK", rank.to_string())
                .env("WORLD_SIZE", world.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .env("RTX_DIST_TIMEOUT", "10")
                .env(
                    "RTX_DIST_VICTIM",
                    victim.map_or(String::new(), |v| v.to_string()),
                )
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(d.join(format!("rank{rank}.log"))).unwrap())
                .stderr(std::fs::File::create(d.join(format!("rank{rank}.err"))).unwrap());
            for (k, v) in vars {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            cmd.spawn().unwrap()
        })
        .collect();
    let deadline = start + Duration::from_secs(60);
    let mut elapsed = Duration::ZERO;
    for (rank, child) in children.iter_mut().enumerate() {
        if Some(rank) == victim {
            continue;
        }
        while child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "rank {rank} of {scenario} still runs after 60 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        elapsed = elapsed.max(start.elapsed());
    }
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let read = |f: String| std::fs::read_to_string(d.join(f)).ok();
    Outcome {
        dir: d.clone(),
        reports: (0..world).map(|r| read(format!("rank{r}.txt"))).collect(),
        logs: (0..world)
            .map(|r| {
                let log = read(format!("rank{r}.log")).unwrap_or_default();
                log + &read(format!("rank{r}.err")).unwrap_or_default()
            })
            .collect(),
        elapsed,
    }
}

fn every_collective_matches_the_reference(world: usize) {
    let out = launch(
        &format!("collectives-{world}"),
        world,
        "collectives",
        None,
        &[],
    );
    for rank in 0..world {
        assert_eq!(
            out.report(rank),
            "ok",
            "rank {rank}; its log:\n{}",
            out.logs[rank]
        );
    }
}

#[test]
fn every_collective_and_reduction_matches_the_reference_on_2_ranks() {
    every_collective_matches_the_reference(2);
}

#[test]
fn every_collective_and_reduction_matches_the_reference_on_4_ranks() {
    every_collective_matches_the_reference(4);
}

/// Every rank but `victim` reported an error whose `rank` is `victim` and whose message names
/// it, after a failing call that took between `min` and `max`.
fn all_blame(out: &Outcome, world: usize, victim: usize, (min, max): (Duration, Duration)) {
    for rank in (0..world).filter(|&r| r != victim) {
        let ms: u64 = std::fs::read_to_string(out.dir.join(format!("rank{rank}.txt.ms")))
            .unwrap()
            .parse()
            .unwrap();
        let took = Duration::from_millis(ms);
        assert!(
            took >= min && took < max,
            "rank {rank} failed after {took:?}"
        );
        let report = out.report(rank);
        assert!(
            report.starts_with(&format!("dist Some({victim})\n"))
                && report.contains(&format!("rank {victim} ")),
            "rank {rank} should blame rank {victim}: {report}\nlog:\n{}",
            out.logs[rank]
        );
    }
}

#[test]
fn a_rank_that_exits_makes_the_others_fail_naming_it() {
    // Fast, not after the 10 s timeout: a closed connection is noticed at once.
    let out = launch("exit-4", 4, "exit", Some(1), &[]);
    let fast = (Duration::ZERO, Duration::from_secs(2));
    all_blame(&out, 4, 1, fast);
    assert!(
        out.reports[0]
            .as_deref()
            .unwrap()
            .contains("closed its connection")
    );
    assert!(out.elapsed < Duration::from_secs(8), "{:?}", out.elapsed);
    let out = launch("exit-2", 2, "exit", Some(0), &[]);
    all_blame(&out, 2, 0, fast);
}

#[test]
fn a_rank_that_hangs_makes_the_others_time_out_naming_it() {
    let out = launch(
        "hang-4",
        4,
        "hang",
        Some(2),
        &[("RTX_DIST_TIMEOUT", Some("1.5"))],
    );
    // Not before the timeout, and within it plus the quarter the ranks take to agree (and
    // some slack for a loaded machine).
    let bounds = (
        Duration::from_millis(1500),
        Duration::from_millis(1500 + 375 + 1000),
    );
    all_blame(&out, 4, 2, bounds);
    for rank in [0, 1, 3] {
        let report = out.report(rank);
        assert!(
            report.contains("1.5 s") || report.contains("because of rank 2"),
            "{report}"
        );
    }
    // And the processes end: rank 0 keeps the store up for the others at most the timeout.
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
}

#[test]
fn ranks_that_disagree_fail_at_once_instead_of_hanging() {
    let out = launch("size-3", 3, "size", None, &[("RTX_DIST_ODD", Some("1"))]);
    for rank in 0..3 {
        let r = out.report(rank);
        assert!(
            r.starts_with("dist Some(") && r.contains("where this rank expects"),
            "{r}"
        );
    }
    let out = launch("order-2", 2, "order", None, &[("RTX_DIST_ODD", Some("0"))]);
    for rank in 0..2 {
        let r = out.report(rank);
        assert!(
            r.contains("call the same collectives in the same order"),
            "{r}"
        );
    }
    // Well inside the 10 s timeout: nobody waited for it.
    assert!(out.elapsed < Duration::from_secs(8), "{:?}", out.elapsed);
}

#[test]
fn a_bad_environment_is_named() {
    let out = launch("env-rank", 2, "init", None, &[("RANK", Some("2"))]);
    for rank in 0..2 {
        let r = out.report(rank);
        assert!(r.contains("RANK=2 is not below WORLD_SIZE=2"), "{r}");
    }
    let out = launch("env-addr", 1, "init", None, &[("MASTER_ADDR", None)]);
    let r = out.report(0);
    assert!(r.contains("MASTER_ADDR is not set"), "{r}");
    let out = launch(
        "env-timeout",
        1,
        "init",
        None,
        &[("RTX_DIST_TIMEOUT", Some("soon"))],
    );
    let r = out.report(0);
    assert!(r.contains("RTX_DIST_TIMEOUT=\"soon\""), "{r}");
}

#[test]
fn a_group_of_one_needs_no_peers() {
    let pg = dist::init_with(dist::InitOptions::new(0, 1, "127.0.0.1", 0)).unwrap();
    let mut t = tensor(vec![bf16::from_f32(1.5), bf16::from_f32(-2.0)]);
    pg.all_reduce(&mut t, ReduceOp::Avg).unwrap();
    assert_eq!(t.to_vec(), [bf16::from_f32(1.5), bf16::from_f32(-2.0)]);
    assert_eq!(pg.all_gather(&t).unwrap().len(), 1);
    pg.barrier().unwrap();
    let e = dist::init_with(dist::InitOptions::new(3, 2, "127.0.0.1", 0)).unwrap_err();
    assert!(matches!(e, rtx::Error::Dist { rank: Some(3), .. }), "{e}");
}

#[test]
fn ranks_that_never_come_and_a_store_that_is_not_there_are_named() {
    let short = Duration::from_millis(300);
    // Rank 0 of 3 alone: it serves the store, then waits for ranks 1 and 2 in vain.
    let start = Instant::now();
    let e =
        dist::init_with(dist::InitOptions::new(0, 3, "127.0.0.1", 0).timeout(short)).unwrap_err();
    assert!(start.elapsed() >= short);
    assert!(matches!(e, rtx::Error::Dist { rank: Some(1), .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("ranks 1, 2 did not connect within 0.3 s"),
        "{e}"
    );
    // Rank 1 with no rank 0: the store's address and the timeout are named.
    let port = free_port();
    let e = dist::init_with(dist::InitOptions::new(1, 2, "127.0.0.1", port).timeout(short))
        .unwrap_err();
    let store = format!("the store at 127.0.0.1:{port}");
    assert!(matches!(e, rtx::Error::Dist { rank: Some(0), .. }), "{e:?}");
    assert!(
        e.to_string().contains(&store) && e.to_string().contains("0.3 s"),
        "{e}"
    );
}

// ---- The sampler ----

fn shares(len: usize, world: usize, seed: u64, epoch: u64, drop_last: bool) -> Vec<Vec<usize>> {
    (0..world)
        .map(|r| {
            let mut s = DistributedSampler::new(len, r, world)
                .unwrap()
                .seed(seed)
                .drop_last(drop_last);
            s.set_epoch(epoch);
            s.indices()
        })
        .collect()
}

#[test]
fn sampler_shares_are_disjoint_covering_equal_and_seeded() {
    for (len, world) in [(12, 4), (10, 4), (7, 2), (3, 4), (100, 3)] {
        // Padded: every item seen, equal counts, and only the padding repeats.
        let s = shares(len, world, 9, 3, false);
        let per = len.div_ceil(world);
        assert!(s.iter().all(|x| x.len() == per), "{len}/{world}: {s:?}");
        let mut all: Vec<usize> = s.concat();
        all.sort();
        let mut distinct = all.clone();
        distinct.dedup();
        assert_eq!(distinct, (0..len).collect::<Vec<_>>(), "{len}/{world}");
        assert_eq!(all.len() - distinct.len(), per * world - len);

        // Dropping the tail: disjoint, equal counts, nothing repeated.
        let s = shares(len, world, 9, 3, true);
        assert!(s.iter().all(|x| x.len() == len / world));
        let mut all = s.concat();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), len / world * world, "{len}/{world}");
    }
    // The same seed and epoch give the same shares; another epoch or seed reorders them.
    assert_eq!(shares(50, 4, 1, 2, false), shares(50, 4, 1, 2, false));
    assert_ne!(shares(50, 4, 1, 2, false), shares(50, 4, 1, 3, false));
    assert_ne!(shares(50, 4, 1, 2, false), shares(50, 4, 2, 2, false));
    // Without shuffling, rank r takes r, r + world, ...
    let plain = DistributedSampler::new(10, 1, 4).unwrap().no_shuffle();
    assert_eq!(plain.indices(), vec![1, 5, 9]);
}
