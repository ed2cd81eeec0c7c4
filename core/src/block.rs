//! Blocks: consecutive ids of one tick taken in one atomic step.

/// A run of consecutive ids of one tick, handed out by one atomic step (`next_ids` and the
/// bindings' bulk calls fill their buffers from blocks).
///
/// ```
/// use clockflake::{Generator, Layout, Options};
/// let gen = Generator::new(Layout::CLOCKSEQ, 7, Options::default())?;
/// let t = 1_735_689_600_000;
/// let block = gen.next_block_at(t, 100)?; // the very first id of a generator: a block of one
/// let block = gen.next_block_at(t, 100)?;
/// assert_eq!((block.len(), block.tick_ms()), (100, t));
/// # Ok::<(), clockflake::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdBlock {
    next: u64,
    remaining: u64,
    step: u64,
    tick_ms: u64,
}

impl IdBlock {
    /// No ids.
    pub(crate) const EMPTY: IdBlock = IdBlock {
        next: 0,
        remaining: 0,
        step: 0,
        tick_ms: 0,
    };

    /// `count` ids from `first`, `step` apart, of the tick starting at `tick_ms`.
    #[inline(always)]
    pub(crate) const fn within_tick(first: u64, count: u64, step: u64, tick_ms: u64) -> IdBlock {
        IdBlock {
            next: first,
            remaining: count,
            step,
            tick_ms,
        }
    }

    /// The block's tick: when it starts, in Unix ms on the generator's clock (every id of the
    /// block carries this time). 0 for an empty block.
    pub const fn tick_ms(&self) -> u64 {
        self.tick_ms
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
