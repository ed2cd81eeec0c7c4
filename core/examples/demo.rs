//! `make demo`: a handful of ids from the real clock, decoded, and a clock step back handled.

use clockflake::{Error, Generator, Layout, Options};

fn show(layout: &Layout, label: &str, id: u64) -> Result<(), Error> {
    println!("  {label:<22} {id:>20}  {}", layout.decode(id)?);
    Ok(())
}

fn main() -> Result<(), Error> {
    let layout = Layout::CLOCKSEQ;
    let gen = Generator::new(layout, 7, Options::default())?;
    println!("rust core, layout clockseq, worker 7, real clock:");
    for _ in 0..3 {
        show(&layout, "next_id()", gen.next_id()?)?;
    }
    let now = clockflake::Clock::now_ms(clockflake::MonotonicClock::global());
    println!("the clock steps back one hour (explicit times):");
    show(&layout, "next_id_at(now)", gen.next_id_at(now)?)?;
    show(
        &layout,
        "next_id_at(now - 1h)",
        gen.next_id_at(now - 3_600_000)?,
    )?;
    let textbook_would_fail = gen.state();
    println!(
        "  state: clock_seq={} high_water_ms={:?}",
        textbook_would_fail.clock_seq,
        &textbook_would_fail.high_water_ms[..layout.clock_seqs() as usize]
    );
    for (name, preset) in Layout::PRESETS {
        match Generator::new(preset, 1, Options::default())?.next_id() {
            Ok(id) => show(&preset, name, id)?,
            Err(error) => println!("  {name:<22} refused: {} ({error})", error.code()),
        }
    }
    Ok(())
}
