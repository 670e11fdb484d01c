//! The command line and what it becomes: a checked [`Config`] and each rank's environment.
//!
//! Every rule about the arguments (at least one rank, a node rank below the node count, a
//! master port that all nodes agree on) is checked here, so the supervisor never sees a
//! configuration it cannot run.

use std::ffi::OsString;
use std::net::{Ipv4Addr, TcpListener};
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

/// The arguments as written; [`Args::into_config`] checks the rules clap cannot express.
#[derive(Debug, Parser)]
#[command(
    name = "rtx-run",
    version,
    about = "Start the ranks of a distributed rtx program, like torchrun",
    long_about = "Starts --nproc-per-node copies of PROGRAM on this node with torchrun's \
                  environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, \
                  MASTER_ADDR, MASTER_PORT). When one rank fails, the others get SIGTERM, then \
                  SIGKILL after the grace period, and rtx-run exits with the failing rank's \
                  code (128 + N for a rank killed by signal N)."
)]
pub struct Args {
    /// Ranks (processes) to start on this node, usually one per GPU.
    #[arg(
        long,
        alias = "nproc_per_node",
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub nproc_per_node: u32,

    /// Nodes taking part, each running its own rtx-run.
    #[arg(
        long,
        value_name = "M",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub nnodes: u32,

    /// This node's place among the nodes, from 0; node 0 hosts rank 0.
    #[arg(long, alias = "node_rank", value_name = "R", default_value_t = 0)]
    pub node_rank: u32,

    /// Address of node 0, where rank 0 serves the rendezvous.
    #[arg(
        long,
        alias = "master_addr",
        value_name = "A",
        default_value = "127.0.0.1"
    )]
    pub master_addr: String,

    /// Port of the rendezvous on node 0 [default on one node: a free port; required on several].
    #[arg(
        long,
        alias = "master_port",
        value_name = "P",
        value_parser = clap::value_parser!(u16).range(1..)
    )]
    pub master_port: Option<u16>,

    /// Seconds the other ranks get to exit after SIGTERM before they are SIGKILLed.
    #[arg(
        long,
        alias = "grace_seconds",
        value_name = "S",
        default_value = "5",
        value_parser = parse_seconds
    )]
    pub grace_seconds: Duration,

    /// Prefix each line the ranks print with `[rank N] `.
    #[arg(long)]
    pub prefix_output: bool,

    /// The program every rank runs, and its arguments (after `--` if they start with `-`).
    #[arg(
        value_name = "PROGRAM",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// A checked launch: what to run and where this node's ranks sit in the world.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Ranks started on this node.
    pub nproc_per_node: u32,
    /// Nodes in the job.
    pub nnodes: u32,
    /// This node's index among them.
    pub node_rank: u32,
    /// Host of the rendezvous (node 0).
    pub master_addr: String,
    /// Port of the rendezvous, chosen already when it was left to rtx-run.
    pub master_port: u16,
    /// Time between SIGTERM and SIGKILL when the ranks are stopped.
    pub grace: Duration,
    /// Whether the ranks' output lines are prefixed with their rank.
    pub prefix_output: bool,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl Args {
    /// Checks the rules between arguments and picks a free master port when none is needed
    /// from the user.
    pub fn into_config(self) -> Result<Config, clap::Error> {
        let mut cmd = Args::command();
        if self.node_rank >= self.nnodes {
            return Err(cmd.error(
                ErrorKind::ValueValidation,
                format!(
                    "--node-rank {} is out of range: with --nnodes {} the node ranks are 0 to {}",
                    self.node_rank,
                    self.nnodes,
                    self.nnodes - 1
                ),
            ));
        }
        let master_port = match self.master_port {
            Some(port) => port,
            // Nodes cannot agree on a port each one picks itself, so only one node may pick.
            None if self.nnodes > 1 => {
                return Err(cmd.error(
                    ErrorKind::MissingRequiredArgument,
                    format!(
                        "--master-port is required with --nnodes {}: every node must be given \
                         the same rendezvous port on the master node",
                        self.nnodes
                    ),
                ));
            }
            None => free_port().map_err(|e| {
                cmd.error(
                    ErrorKind::Io,
                    format!("cannot find a free port for MASTER_PORT: {e}"),
                )
            })?,
        };
        let mut command = self.command.into_iter();
        let program = command.next().expect("clap requires PROGRAM");
        Ok(Config {
            nproc_per_node: self.nproc_per_node,
            nnodes: self.nnodes,
            node_rank: self.node_rank,
            master_addr: self.master_addr,
            master_port,
            grace: self.grace_seconds,
            prefix_output: self.prefix_output,
            program,
            args: command.collect(),
        })
    }
}

impl Config {
    /// Parses and checks a command line (the first item is the program name, as in `argv`).
    pub fn try_parse_from<I, T>(argv: I) -> Result<Config, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        Args::try_parse_from(argv)?.into_config()
    }

    /// The global rank of this node's `local` rank.
    pub fn rank(&self, local: u32) -> u64 {
        u64::from(self.node_rank) * u64::from(self.nproc_per_node) + u64::from(local)
    }

    /// The environment torchrun gives a rank, for this node's `local` rank.
    pub fn rank_env(&self, local: u32) -> Vec<(&'static str, String)> {
        let world = u64::from(self.nnodes) * u64::from(self.nproc_per_node);
        vec![
            ("RANK", self.rank(local).to_string()),
            ("WORLD_SIZE", world.to_string()),
            ("LOCAL_RANK", local.to_string()),
            ("LOCAL_WORLD_SIZE", self.nproc_per_node.to_string()),
            ("GROUP_RANK", self.node_rank.to_string()),
            ("MASTER_ADDR", self.master_addr.clone()),
            ("MASTER_PORT", self.master_port.to_string()),
        ]
    }
}

/// A port that is free now, from the kernel (binding port 0).
///
/// Bound on every interface, since rank 0 may serve the rendezvous on any of them. The port is
/// released before rank 0 binds it, so another program could take it in between; torchrun
/// accepts the same race.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))?
        .local_addr()?
        .port())
}

/// Parses a non-negative number of seconds, fractions allowed (`0.5`).
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("`{text}` is not a non-negative, finite number of seconds"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Config, clap::Error> {
        Config::try_parse_from(std::iter::once("rtx-run").chain(args.split_whitespace()))
    }

    #[test]
    fn ranks_of_the_second_node_follow_the_first_nodes() {
        let c = parse("--nproc-per-node 4 --nnodes 3 --node-rank 1 --master-addr 10.0.0.1 --master-port 29500 -- prog").unwrap();
        let env = c.rank_env(2);
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).unwrap().1.as_str();
        assert_eq!(get("RANK"), "6");
        assert_eq!(get("WORLD_SIZE"), "12");
        assert_eq!(get("LOCAL_RANK"), "2");
        assert_eq!(get("LOCAL_WORLD_SIZE"), "4");
        assert_eq!(get("GROUP_RANK"), "1");
        assert_eq!(get("MASTER_ADDR"), "10.0.0.1");
        assert_eq!(get("MASTER_PORT"), "29500");
    }

    #[test]
    fn one_node_picks_a_port_and_defaults_to_localhost() {
        let c = parse("prog a -b --c").unwrap();
        assert_eq!(c.nproc_per_node, 1);
        assert_eq!(c.master_addr, "127.0.0.1");
        assert_ne!(c.master_port, 0);
        assert_eq!(c.grace, Duration::from_secs(5));
        assert_eq!(c.program, "prog");
        // Everything after PROGRAM is the program's, flags included.
        assert_eq!(c.args, ["a", "-b", "--c"]);
    }

    #[test]
    fn torchrun_spellings_and_fractional_grace_are_accepted() {
        let c = parse("--nproc_per_node 2 --grace-seconds 0.25 -- prog").unwrap();
        assert_eq!(c.nproc_per_node, 2);
        assert_eq!(c.grace, Duration::from_millis(250));
    }

    #[test]
    fn bad_arguments_are_errors_that_say_what_is_wrong() {
        let msg = |args: &str| parse(args).unwrap_err().to_string();
        assert!(
            msg("--nnodes 2 --node-rank 2 --master-port 1 prog").contains("node ranks are 0 to 1")
        );
        assert!(msg("--nnodes 2 --node-rank 1 prog").contains("--master-port is required"));
        assert!(msg("--nproc-per-node 0 prog").contains("--nproc-per-node"));
        assert!(msg("--nproc-per-node 2").contains("PROGRAM"));
        assert!(msg("--grace-seconds=-1 prog").contains("non-negative"));
        assert!(msg("--master-port 70000 prog").contains("--master-port"));
    }
}
