//! A process that holds a lease and issues ids, for the multi-process tests (and by hand).
//!
//! ```text
//! clockflake-lease-probe --uri URI [--count N] [--offset-ms MS] [--every-ms MS]
//!                        [--for-ms MS] [--binary] [--single-worker] [--hold-ms MS]
//! ```
//! Text mode prints `worker N`, then `id ID` per id, flushed per line when `--every-ms` is
//! given; `--binary` writes the ids as little-endian u64 (the `worker N` line goes to stderr).
//! A refusal with a time to retry at (a renewal still under way on a loaded machine) is retried
//! then, as a caller would; any other refusal prints `error CODE message` and exits with
//! status 3. `--count 0` runs until killed or refused (or `--for-ms` has passed).
//! `--offset-ms` runs the generator on a clock that far off the system's.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clockflake::{Field, Layout};
use clockflake_lease::{open, wall_ms, LeaseError, LeaseOptions};

struct Args {
    uri: String,
    count: u64,
    offset_ms: i64,
    every_ms: u64,
    binary: bool,
    single_worker: bool,
    hold_ms: u64,
    for_ms: u64,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        uri: String::new(),
        count: 0,
        offset_ms: 0,
        every_ms: 0,
        binary: false,
        single_worker: false,
        hold_ms: 0,
        for_ms: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| text.parse::<i64>().map_err(|e| format!("{text}: {e}"));
        match flag.as_str() {
            "--uri" => args.uri = value()?,
            "--count" => args.count = number(value()?)?.max(0) as u64,
            "--offset-ms" => args.offset_ms = number(value()?)?,
            "--every-ms" => args.every_ms = number(value()?)?.max(0) as u64,
            "--for-ms" => args.for_ms = number(value()?)?.max(0) as u64,
            "--hold-ms" => args.hold_ms = number(value()?)?.max(0) as u64,
            "--binary" => args.binary = true,
            "--single-worker" => args.single_worker = true,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if args.uri.is_empty() {
        return Err("--uri is required".to_owned());
    }
    Ok(args)
}

fn run(args: &Args) -> Result<(), LeaseError> {
    let layout = if args.single_worker {
        // No worker bits: one worker id, so a rival can only ever take this one.
        Layout::new(
            &[
                (Field::Timestamp, 41),
                (Field::ClockSeq, 3),
                (Field::Sequence, 12),
            ],
            1,
            Layout::CLOCKSEQ.epoch_ms(),
        )?
    } else {
        Layout::CLOCKSEQ
    };
    let mut options = LeaseOptions::default();
    if args.offset_ms != 0 {
        let offset = args.offset_ms;
        options.clock = Some(Arc::new(move || wall_ms().saturating_add_signed(offset)));
    }
    let gen = open(&args.uri, layout, options)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let worker_line = format!("worker {}\n", gen.worker_id());
    if args.binary {
        eprint!("{worker_line}");
    } else {
        let _ = out.write_all(worker_line.as_bytes());
        let _ = out.flush();
    }
    let mut issued = 0u64;
    let started = std::time::Instant::now();
    let running = |issued: u64| {
        (args.count == 0 || issued < args.count)
            && (args.for_ms == 0 || started.elapsed() < Duration::from_millis(args.for_ms))
    };
    while running(issued) {
        let id = match gen.next_id() {
            Ok(id) => id,
            Err(error) => {
                if let Some(at_ms) = error.retry_at_ms() {
                    let wait_ms = at_ms.saturating_sub(gen.now_ms()).clamp(1, 1000);
                    std::thread::sleep(Duration::from_millis(wait_ms));
                    continue;
                }
                let line = format!("error {} {error}\n", error.code());
                let _ = out.write_all(line.as_bytes());
                let _ = out.flush();
                return Err(error);
            }
        };
        issued += 1;
        if args.binary {
            let _ = out.write_all(&id.to_le_bytes());
            if issued.is_multiple_of(1000) {
                let _ = out.flush();
            }
        } else {
            let _ = writeln!(out, "id {id}");
        }
        if args.every_ms > 0 {
            let _ = out.flush();
            std::thread::sleep(Duration::from_millis(args.every_ms));
        }
    }
    let _ = out.flush();
    drop(out);
    std::thread::sleep(Duration::from_millis(args.hold_ms));
    gen.close()
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("clockflake-lease-probe: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error {} {error}", error.code());
            ExitCode::from(3)
        }
    }
}
