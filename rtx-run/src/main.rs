//! The `rtx-run` binary: parses the command line, runs the job, exits with its code.

use clap::Parser;
use rtx_run::{Args, run};

fn main() {
    // clap prints a bad command line's error with the usage and exits 2.
    let config = Args::parse().into_config().unwrap_or_else(|e| e.exit());
    match run(&config) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // The ranks are already killed and reaped: `run` kills them on its way out.
            eprintln!("rtx-run: {e}");
            std::process::exit(1);
        }
    }
}
