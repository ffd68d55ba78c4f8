//! What both listeners do when accept() fails: typically the process is
//! out of file descriptors (EMFILE) or the system is (ENFILE), and the
//! listening socket stays readable, so trying again at once would spin.

use std::time::Duration;

/// The first pause after a failed accept.
const FIRST: Duration = Duration::from_millis(10);
/// The longest pause: a slot freed is used within it.
const LONGEST: Duration = Duration::from_millis(500);

/// Pauses that double after each failed accept, from [`FIRST`] to
/// [`LONGEST`], and start over after an accept succeeds.
#[derive(Debug, Default)]
pub(crate) struct Backoff(Option<Duration>);

impl Backoff {
    /// The pause before the next try.
    pub(crate) fn next(&mut self) -> Duration {
        let pause = self.0.map_or(FIRST, |p| (p * 2).min(LONGEST));
        self.0 = Some(pause);
        pause
    }

    pub(crate) fn reset(&mut self) {
        self.0 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_to_the_longest_and_start_over_after_a_success() {
        let mut backoff = Backoff::default();
        let pauses: Vec<u64> = (0..8).map(|_| backoff.next().as_millis() as u64).collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 500, 500]);
        backoff.reset();
        assert_eq!(backoff.next(), FIRST);
    }
}
