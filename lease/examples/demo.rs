//! `make demo-lease`: lease worker ids from a `file://` directory (the embedded default, no
//! server), print them and a few decoded ids.

use clockflake::Layout;
use clockflake_lease::{open, LeaseError, LeaseOptions};

fn show(layout: &Layout, label: &str, id: u64) -> Result<(), LeaseError> {
    println!("  {label:<10} {id:>20}  {}", layout.decode(id)?);
    Ok(())
}

fn main() -> Result<(), LeaseError> {
    let dir = std::env::temp_dir().join(format!("clockflake-lease-demo-{}", std::process::id()));
    let uri = format!("file://{}?app=orders", dir.display());
    let layout = Layout::CLOCKSEQ;
    println!("lease, {uri}:");
    let first = open(&uri, layout, LeaseOptions::default())?;
    let second = open(&uri, layout, LeaseOptions::default())?;
    println!(
        "  two generators leased worker ids {} and {}",
        first.worker_id(),
        second.worker_id()
    );
    for _ in 0..3 {
        show(&layout, "first", first.next_id()?)?;
    }
    show(&layout, "second", second.next_id()?)?;
    first.close()?;
    println!("  first closed; its worker id is recycled, continuing above its stored marks:");
    let third = open(&uri, layout, LeaseOptions::default())?;
    show(&layout, "third", third.next_id()?)?;
    match first.next_id() {
        Ok(id) => println!("  unexpected id {id} from a closed generator"),
        Err(error) => println!("  the closed one refuses: {} ({error})", error.code()),
    }
    drop((second, third));
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
