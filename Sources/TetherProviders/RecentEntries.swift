import Synchronization

/// The most recent entries of a dev outbox, oldest first: older ones are dropped past `capacity`.
final class RecentEntries<Entry: Sendable>: Sendable {
    let capacity: Int
    private let entries = Mutex<[Entry]>([])

    init(capacity: Int) {
        self.capacity = capacity
    }

    func append(_ entry: Entry) {
        entries.withLock { entries in
            entries.append(entry)
            if entries.count > capacity { entries.removeFirst(entries.count - capacity) }
        }
    }

    /// The kept entries that pass `filter`, oldest first.
    func all(where filter: (Entry) -> Bool = { _ in true }) -> [Entry] {
        entries.withLock { $0.filter(filter) }
    }

    func removeAll() {
        entries.withLock { $0.removeAll() }
    }
}
