//! What one template construction may cost (docs/template-handles.md,
//! "Bounds"). A namespace is written by a prefix admin, but anyone may ask for
//! a handle built from it: without bounds a `<def>` that doubles its
//! parameter at each step builds gigabytes, and nesting overflows the stack.
//! Past a bound the construction stops and the request is refused; nothing
//! a namespace says makes the work grow faster than these counts.

use std::fmt;

/// Elements nested inside one another, cited templates included.
pub const MAX_DEPTH: usize = 64;
/// Values built, the most a request may carry (`<def>` values count apart).
pub const MAX_VALUES: usize = handled_proto::request::MAX_VALUES;
/// One substituted type or data: the largest native message.
pub const MAX_VALUE_BYTES: usize = handled_proto::envelope::MAX_MESSAGE_LEN;
/// All text substituted in one construction (`<def>` values included): the
/// largest JSON API request body, so any record a client can store can be
/// built.
pub const MAX_BUILT_BYTES: usize = 4 << 20;
/// Units of work: an element visited, a parameter copied into a new scope,
/// 64 bytes copied or 16 bytes matched by an expression, an index tried for a
/// new value; each about 20 ns here, so the bound is about 20 ms of a core.
pub const MAX_WORK: usize = 1_000_000;

/// The bound a construction ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Depth,
    Values,
    ValueBytes,
    BuiltBytes,
    Work,
}

impl Bound {
    /// The `/metrics` label.
    pub fn label(self) -> &'static str {
        match self {
            Bound::Depth => "depth",
            Bound::Values => "values",
            Bound::ValueBytes => "value_bytes",
            Bound::BuiltBytes => "built_bytes",
            Bound::Work => "work",
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Depth => write!(f, "nests elements deeper than {MAX_DEPTH}"),
            Bound::Values => write!(f, "builds more than {MAX_VALUES} values"),
            Bound::ValueBytes => write!(f, "builds a value of more than {MAX_VALUE_BYTES} bytes"),
            Bound::BuiltBytes => write!(f, "builds more than {MAX_BUILT_BYTES} bytes"),
            Bound::Work => write!(f, "takes more than {MAX_WORK} steps"),
        }
    }
}

/// What a construction has used so far, across the passes that fetch cited
/// templates.
#[derive(Debug, Default)]
pub struct Budget {
    work: usize,
    built_bytes: usize,
}

impl Budget {
    /// `units` more work.
    pub fn work(&mut self, units: usize) -> Result<(), Bound> {
        self.work = self.work.saturating_add(units);
        match self.work > MAX_WORK {
            true => Err(Bound::Work),
            false => Ok(()),
        }
    }

    /// The work counted so far.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        self.work
    }

    /// `len` bytes substituted: counted against the total and as work.
    pub fn built(&mut self, len: usize) -> Result<(), Bound> {
        self.built_bytes = self.built_bytes.saturating_add(len);
        if self.built_bytes > MAX_BUILT_BYTES {
            return Err(Bound::BuiltBytes);
        }
        self.work(1 + len / 64)
    }

    /// One more level of nesting below `depth`.
    pub fn nest(depth: usize) -> Result<usize, Bound> {
        match depth >= MAX_DEPTH {
            true => Err(Bound::Depth),
            false => Ok(depth + 1),
        }
    }
}
