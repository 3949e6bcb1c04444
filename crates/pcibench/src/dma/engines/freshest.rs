//! Progress in a failure report, from the freshest source (issue #34). A driver learns progress
//! from what the card writes back to host memory (a status writeback, a completed count, a
//! semaphore), which on real hardware comes once per several descriptors (QDMA writes its status
//! after a burst or at an interval, PG302 "Status Writeback"; XDMA's poll-mode writeback holds the
//! count of the descriptor with its Completed bit, PG195 "Poll Mode"). An error or a stall can come
//! between two writebacks, so a report from the last writeback alone would say nothing moved when
//! the engine's own counter (QDMA's hardware context cidx, XDMA's completed-descriptor count at
//! channel +0x48) says it did. Reports name the counter's figure, and the writeback's where the
//! two differ.

/// "32 of 40 descriptors completed" where the engine's counter and the last writeback agree (or
/// there is no counter); else "32 of 40 descriptors completed by the hardware context; the last
/// status writeback said 0". `counter` is (descriptors done by the counter's word, its name).
pub(crate) fn completed(total: u64, written_back: u64, writeback: &str, counter: Option<(u64, &str)>) -> String {
    let (done, note) = freshest(total, written_back, writeback, counter);
    format!("{done} of {total} descriptors completed{note}")
}

/// The freshest count of descriptors done, and what to say after "k of n descriptors" when it
/// comes from the counter rather than the writeback (" by the hardware context; the last status
/// writeback said 0"; empty when they agree). A counter behind the writeback (read before the
/// writeback landed) is not the fresher; one past the transfer (it counts since reset) never
/// claims more than was asked.
pub(crate) fn freshest(total: u64, written_back: u64, writeback: &str, counter: Option<(u64, &str)>) -> (u64, String) {
    match counter {
        Some((done, by)) if done > written_back => {
            (done.min(total), format!(" by {by}; the last {writeback} said {written_back}"))
        }
        _ => (written_back, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::completed;

    #[test]
    fn the_counter_is_named_beside_the_writeback_only_when_it_is_further_along() {
        let hw = Some((32, "the hardware context"));
        assert_eq!(
            completed(40, 0, "status writeback", hw),
            "32 of 40 descriptors completed by the hardware context; the last status writeback said 0"
        );
        assert_eq!(completed(40, 32, "status writeback", hw), "32 of 40 descriptors completed");
        assert_eq!(completed(40, 33, "status writeback", hw), "33 of 40 descriptors completed");
        assert_eq!(completed(40, 5, "writeback", None), "5 of 40 descriptors completed");
        // A counter past the transfer (it counts since reset) never claims more than was asked.
        assert_eq!(
            completed(4, 1, "writeback", Some((9, "the count"))),
            "4 of 4 descriptors completed by the count; the last writeback said 1"
        );
    }
}
