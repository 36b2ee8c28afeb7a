extension PostgresQuery {
    /// Joins consecutive writes to distinct tables into one statement of data-modifying CTEs
    /// (`WITH w0 AS (…), w1 AS (…) …`), so a command's writes cost PostgreSQL fewer statements.
    ///
    /// The parts of one statement run with one snapshot and do not see each other's rows, so a
    /// write joins a statement only when no part of it touches the same table; a new statement
    /// starts otherwise, and anything but an `INSERT INTO`, `UPDATE` or `DELETE FROM` stands alone.
    /// Foreign keys between the parts are checked at the end of the statement, when all have run.
    public static func combiningWrites(_ statements: [PostgresQuery]) -> [PostgresQuery] {
        var combined: [PostgresQuery] = []
        var group: [PostgresQuery] = []
        var tables: Set<Substring> = []
        func flush() {
            if let joined = join(group) { combined.append(joined) }
            group = []
            tables = []
        }
        for statement in statements {
            guard let table = writtenTable(of: statement.sql) else {
                flush()
                combined.append(statement)
                continue
            }
            if tables.contains(table) { flush() }
            group.append(statement)
            tables.insert(table)
        }
        flush()
        return combined
    }

    /// `WITH w0 AS (first), … last` for a group; the one statement itself for a group of one.
    private static func join(_ group: [PostgresQuery]) -> PostgresQuery? {
        guard let last = group.last else { return nil }
        guard group.count > 1 else { return last }
        var joined = PostgresQuery(unsafeSQL: "WITH ")
        for (index, part) in group.dropLast().enumerated() {
            joined.append(PostgresQuery(unsafeSQL: (index == 0 ? "" : ", ") + "w\(index) AS ("))
            joined.append(part)
            joined.append(PostgresQuery(unsafeSQL: ")"))
        }
        joined.append(PostgresQuery(unsafeSQL: " "))
        joined.append(last)
        return joined
    }

    /// The table an `INSERT INTO t`, `UPDATE t` or `DELETE FROM t` statement writes; nil for any other.
    /// Reads the first three words' UTF-8 bytes, letters compared without case: every command's writes
    /// pass here, and splitting the text into `Character`s and upper-casing words cost more than the rest.
    static func writtenTable(of sql: String) -> Substring? {
        let utf8 = sql.utf8
        var index = utf8.startIndex
        func isSeparator(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "(")
        }
        func nextWord() -> Range<String.Index>? {
            while index < utf8.endIndex, isSeparator(utf8[index]) { utf8.formIndex(after: &index) }
            guard index < utf8.endIndex else { return nil }
            let start = index
            while index < utf8.endIndex, !isSeparator(utf8[index]) { utf8.formIndex(after: &index) }
            return start..<index
        }
        func isWord(_ range: Range<String.Index>, _ word: StaticString) -> Bool {
            guard utf8.distance(from: range.lowerBound, to: range.upperBound) == word.utf8CodeUnitCount else { return false }
            // ASCII letters: setting bit 5 lowers an upper-case one; the words compared are in upper case.
            return zip(utf8[range], UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)).allSatisfy { byte, letter in
                byte == letter || byte == letter | 0x20
            }
        }
        guard let first = nextWord() else { return nil }
        if isWord(first, "INSERT") || isWord(first, "DELETE") {
            guard let second = nextWord(), isWord(second, isWord(first, "INSERT") ? "INTO" : "FROM"), let table = nextWord() else { return nil }
            return sql[table]
        }
        if isWord(first, "UPDATE") {
            return nextWord().map { sql[$0] }
        }
        return nil
    }
}
