//! The one compare-and-set check every backend makes ([`holds`]): handles
//! ([`crate::Expect`]), documents ([`crate::DocExpect`]) and the embedded
//! store's encoded forms alike, each comparing in its own representation.

/// What a compare-and-set requires of the current state, over any
/// representation `T` of that state.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Precondition<'a, T: ?Sized> {
    /// Nothing is stored.
    Absent,
    /// Something equal to this is stored (as `same` compares).
    Present(&'a T),
    /// No condition.
    Any,
}

/// Does the current state `current` meet `expect`? `same` compares an
/// expected state with a stored one (exact equality, or as a backend's
/// storage can tell them apart).
pub(crate) fn holds<T: ?Sized, C: ?Sized>(
    expect: Precondition<'_, T>,
    current: Option<&C>,
    same: impl FnOnce(&T, &C) -> bool,
) -> bool {
    match (expect, current) {
        (Precondition::Any, _) => true,
        (Precondition::Absent, current) => current.is_none(),
        (Precondition::Present(want), Some(current)) => same(want, current),
        (Precondition::Present(_), None) => false,
    }
}

impl crate::Expect {
    pub(crate) fn precondition(&self) -> Precondition<'_, crate::HandleRecord> {
        match self {
            crate::Expect::Absent => Precondition::Absent,
            crate::Expect::Present(r) => Precondition::Present(r),
            crate::Expect::Any => Precondition::Any,
        }
    }
}

impl crate::DocExpect {
    pub(crate) fn precondition(&self) -> Precondition<'_, crate::Document> {
        match self {
            crate::DocExpect::Absent => Precondition::Absent,
            crate::DocExpect::Present(d) => Precondition::Present(d),
            crate::DocExpect::Any => Precondition::Any,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check() {
        let eq = |a: &u8, b: &u8| a == b;
        assert!(holds(Precondition::Any, None::<&u8>, eq));
        assert!(holds(Precondition::Any, Some(&1), eq));
        assert!(holds(Precondition::Absent, None::<&u8>, eq));
        assert!(!holds(Precondition::Absent, Some(&1), eq));
        assert!(holds(Precondition::Present(&1), Some(&1), eq));
        assert!(!holds(Precondition::Present(&1), Some(&2), eq));
        assert!(!holds(Precondition::Present(&1), None::<&u8>, eq));
    }
}
