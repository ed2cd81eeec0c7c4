//! The worker's state record in a row's columns: read into a [`State`] (what is corrupt is
//! refused as `INVALID_STATE`), and its marks as the `high_water_ms` column.

use clockflake::{State, MAX_CLOCK_SEQS};
use tokio_postgres::Row;

use crate::LeaseError;

/// The record of `row`, named `location` in a refusal; `leased_before`: the row was granted
/// before the grant at hand (its first grant wrote an empty record, so all-NULL columns mean
/// lost marks).
pub(super) fn state_of(
    row: &Row,
    location: &str,
    worker_id: u64,
    leased_before: bool,
) -> Result<Option<State>, LeaseError> {
    let fingerprint: Option<i64> = row.get("layout_fingerprint");
    let clock_seq: Option<i32> = row.get("clock_seq");
    let marks: Option<Vec<Option<i64>>> = row.get("high_water_ms");
    let (fingerprint, clock_seq, marks) = match (fingerprint, clock_seq, marks) {
        (None, None, None) if leased_before => {
            return Err(LeaseError::corrupt(
                location,
                "the row was leased before (epoch > 0) but its state record is NULL: its \
                 high-water marks were lost (a reset or restored row?); see the README's \
                 restore procedure",
            ))
        }
        (None, None, None) => return Ok(None),
        (Some(f), Some(c), Some(m)) => (f, c, m),
        _ => {
            return Err(LeaseError::corrupt(
                location,
                "layout_fingerprint, clock_seq and high_water_ms must be all set or all NULL",
            ))
        }
    };
    let clock_seq = u64::try_from(clock_seq)
        .map_err(|_| LeaseError::corrupt(location, format!("negative clock_seq {clock_seq}")))?;
    if marks.len() != MAX_CLOCK_SEQS {
        return Err(LeaseError::corrupt(
            location,
            format!(
                "high_water_ms: expected {MAX_CLOCK_SEQS} entries, found {}",
                marks.len()
            ),
        ));
    }
    if fingerprint == 0 && marks.iter().all(Option::is_none) {
        // The empty record of a first grant (fingerprint 0): never used, any layout may
        // start here.
        return Ok(None);
    }
    let mut high_water_ms = [None; MAX_CLOCK_SEQS];
    for (slot, mark) in high_water_ms.iter_mut().zip(marks) {
        if let Some(ms) = mark {
            *slot = Some(u64::try_from(ms).map_err(|_| {
                LeaseError::corrupt(location, format!("negative high-water mark {ms}"))
            })?);
        }
    }
    Ok(Some(State {
        // Stored as its two's-complement bit pattern (bigint is signed).
        layout_fingerprint: fingerprint as u64,
        worker_id,
        clock_seq,
        high_water_ms,
    }))
}

/// The `high_water_ms` column of `state` (bigint is signed: a mark past `i64::MAX` is written
/// as `i64::MAX`).
pub(super) fn marks_of(state: &State) -> Vec<Option<i64>> {
    state
        .high_water_ms
        .iter()
        .map(|mark| mark.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
        .collect()
}
