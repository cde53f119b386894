//! `apijet-bench`: the benchmark kit as a binary of its own, so that the server never links
//! it (nor the test kit it uses). `apijet bench ARGS` runs this binary with ARGS.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = apijet_bench::BenchArgs::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("apijet bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(apijet_bench::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("apijet bench: {e}");
            ExitCode::FAILURE
        }
    }
}
