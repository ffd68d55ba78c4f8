//! The strings of one cluster object held in one allocation: a watch cache
//! of thousands of small objects then pays for one text and one list of
//! ends per object, not for an allocation (and its rounding) per string.

/// Heap bytes an allocation of `n` bytes costs: the allocator's rounding
/// (allocations come in 16-byte steps).
pub(super) fn heap_len(n: usize) -> usize {
    n.next_multiple_of(16)
}

/// Strings back to back in one text, and where each ends.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Packed {
    text: Box<str>,
    /// Where each string ends in `text`. One object's strings are far
    /// below 4 GiB (a watch event is at most 8 MiB, a file is read within
    /// the reader's budget), so an end fits in 32 bits.
    ends: Box<[u32]>,
}

impl Packed {
    pub(crate) fn new<S: AsRef<str>>(strings: impl IntoIterator<Item = S>) -> Self {
        let mut text = String::new();
        let mut ends = Vec::new();
        for s in strings {
            text.push_str(s.as_ref());
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        }
        Self {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The `i`th string (empty past the last).
    pub(crate) fn get(&self, i: usize) -> &str {
        let start = match i {
            0 => 0,
            i => self
                .ends
                .get(i - 1)
                .map_or(self.text.len(), |e| *e as usize),
        };
        let end = self.ends.get(i).map_or(start, |e| *e as usize);
        self.text.get(start..end).unwrap_or_default()
    }

    /// The strings `from..to`, in order.
    pub(crate) fn slice(
        &self,
        from: usize,
        to: usize,
    ) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        (from..to.min(self.len())).map(|i| self.get(i))
    }

    /// The bytes it holds on the heap, each allocation rounded up to the
    /// allocator's 16-byte steps.
    pub(crate) fn heap_bytes(&self) -> usize {
        heap_len(self.text.len()) + heap_len(4 * self.ends.len())
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.slice(0, self.len())).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_string_comes_back_as_it_went_in() {
        let strings = ["sa", "", "s3-secret", "é✓", ""];
        let packed = Packed::new(strings);
        assert_eq!(packed.len(), 5);
        let back: Vec<&str> = packed.slice(0, 5).collect();
        assert_eq!(back, strings);
        assert_eq!(packed.slice(2, 4).collect::<Vec<_>>(), ["s3-secret", "é✓"]);
        assert_eq!(packed.get(9), "");
        assert_eq!(packed.slice(4, 99).count(), 1);
        assert_eq!(Packed::new::<&str>([]).len(), 0);
        assert_eq!(Packed::new::<&str>([]).heap_bytes(), 0);
    }
}
