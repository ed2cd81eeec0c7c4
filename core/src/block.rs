//! Blocks: consecutive ids of one tick taken in one atomic step, with the window in which a
//! caller may hand them out.

/// A run of consecutive ids of one tick, handed out by one atomic step, with the window in
/// which a caller may hand them out one by one.
///
/// The window starts as the block's tick on the generator's clock; an issuer with more rules
/// narrows it ([`IdBlock::served_within`]: a lease moves it onto the system clock and ends it
/// before the lease's deadline). A caller serving ids later, one at a time, checks only
/// [`IdBlock::servable_at`] with its clock's reading, and knows nothing of those rules.
///
/// ```
/// use clockflake::{Generator, Layout, Options};
/// let gen = Generator::new(Layout::CLOCKSEQ, 7, Options::default())?;
/// let t = 1_735_689_600_000;
/// let block = gen.next_block_at(t, 100)?; // the very first id of a generator: a block of one
/// let block = gen.next_block_at(t, 100)?;
/// assert_eq!((block.len(), block.tick_ms()), (100, t));
/// assert!(block.servable_at(t) && !block.servable_at(t + 1) && !block.servable_at(t - 1));
/// # Ok::<(), clockflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdBlock {
    next: u64,
    remaining: u64,
    step: u64,
    tick_ms: u64,
    serve_from_ms: u64,
    serve_until_ms: u64,
}

impl IdBlock {
    /// No ids, never servable.
    pub(crate) const EMPTY: IdBlock = IdBlock {
        next: 0,
        remaining: 0,
        step: 0,
        tick_ms: 0,
        serve_from_ms: 0,
        serve_until_ms: 0,
    };

    /// `count` ids from `first`, `step` apart, of the tick `[tick_ms, tick_ms + unit_ms)`,
    /// servable within that tick.
    #[inline(always)]
    pub(crate) const fn within_tick(
        first: u64,
        count: u64,
        step: u64,
        tick_ms: u64,
        unit_ms: u64,
    ) -> IdBlock {
        IdBlock {
            next: first,
            remaining: count,
            step,
            tick_ms,
            serve_from_ms: tick_ms,
            serve_until_ms: tick_ms + unit_ms,
        }
    }

    /// The block's tick: when it starts, in Unix ms on the generator's clock (every id of the
    /// block carries this time). 0 for an empty block.
    pub const fn tick_ms(&self) -> u64 {
        self.tick_ms
    }

    /// The first Unix ms at which the block may be served (its tick's start, or where the
    /// issuer moved it).
    pub const fn serve_from_ms(&self) -> u64 {
        self.serve_from_ms
    }

    /// The first Unix ms at which the block may no longer be served (its tick's end, or earlier
    /// where the issuer said so).
    pub const fn serve_until_ms(&self) -> u64 {
        self.serve_until_ms
    }

    /// Whether a caller whose clock reads `now_ms` may still hand out the block's ids.
    #[inline(always)]
    pub const fn servable_at(&self, now_ms: u64) -> bool {
        self.serve_from_ms <= now_ms && now_ms < self.serve_until_ms
    }

    /// The same ids, to be served only while the caller's clock reads in `[from_ms, until_ms)`
    /// (an issuer's rule on top of the generator's: another clock, a deadline).
    pub const fn served_within(mut self, from_ms: u64, until_ms: u64) -> IdBlock {
        self.serve_from_ms = from_ms;
        self.serve_until_ms = until_ms;
        self
    }

    /// The id the block hands out next, without taking it (`None` once it is used up). Every
    /// id of a block has the same tick and clock sequence as this one.
    pub fn peek(&self) -> Option<u64> {
        (self.remaining != 0).then_some(self.next)
    }
}

impl Iterator for IdBlock {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        if self.remaining == 0 {
            return None;
        }
        let id = self.next;
        self.remaining -= 1;
        self.next = self.next.wrapping_add(self.step);
        Some(id)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (len, Some(len))
    }
}

impl ExactSizeIterator for IdBlock {}
