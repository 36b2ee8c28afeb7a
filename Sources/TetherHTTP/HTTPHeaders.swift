/// An ordered list of HTTP header fields with case-insensitive name lookup.
///
/// Order and repeated names are kept because some headers (`Set-Cookie`,
/// `Via`) are meaningful only as a list; lookups compare names ASCII
/// case-insensitively without allocating.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// One header field as it appeared on the wire or was added.
    public typealias Element = (name: String, value: String)

    struct Field: Sendable, Equatable {
        var name: String
        var value: String
    }

    private var fields: [Field]

    /// Creates an empty header list.
    public init() {
        fields = []
    }

    /// Creates a header list from name-value pairs, keeping their order.
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    /// Creates a header list from a literal such as `["Content-Type": "text/plain"]`.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The number of fields, counting repeated names separately.
    public var count: Int { fields.count }

    /// Whether the list holds no field at all.
    public var isEmpty: Bool { fields.isEmpty }

    /// The first value for `name`; setting replaces every field of that name, `nil` removes them.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.equalsIgnoringASCIICase(name) }?.value }
        set {
            if let newValue {
                replaceOrAdd(name: name, value: newValue)
            } else {
                remove(name: name)
            }
        }
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.equalsIgnoringASCIICase(name) }.map(\.value)
    }

    /// Whether at least one field is named `name`.
    public func contains(_ name: String) -> Bool {
        fields.contains { $0.name.equalsIgnoringASCIICase(name) }
    }

    /// Appends a field, keeping any existing fields of the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Appends every field of `other`, after the existing ones.
    public mutating func add(contentsOf other: HTTPHeaders) {
        fields.append(contentsOf: other.fields)
    }

    /// Replaces the first field named `name` and drops the others, or appends one.
    public mutating func replaceOrAdd(name: String, value: String) {
        guard let first = fields.firstIndex(where: { $0.name.equalsIgnoringASCIICase(name) }) else {
            add(name: name, value: value)
            return
        }
        fields[first].value = value
        var index = first + 1
        while index < fields.endIndex {
            if fields[index].name.equalsIgnoringASCIICase(name) {
                fields.remove(at: index)
            } else {
                index += 1
            }
        }
    }

    /// Removes every field named `name`.
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.equalsIgnoringASCIICase(name) }
    }

    /// Iterates the fields in order.
    public func makeIterator() -> Iterator {
        Iterator(base: fields.makeIterator())
    }

    /// Iterator over the fields of an ``HTTPHeaders`` value.
    public struct Iterator: IteratorProtocol {
        var base: IndexingIterator<[Field]>

        /// The next field, or `nil` after the last one.
        public mutating func next() -> Element? {
            base.next().map { ($0.name, $0.value) }
        }
    }
}

extension HTTPHeaders: CustomStringConvertible {
    /// The fields as they would appear in a message head, one per line.
    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}

extension StringProtocol {
    /// The text without the white space at either end (characters whose first scalar is Unicode White_Space:
    /// spaces, tabs, line breaks), without bridging to `NSString`: what `trimmingCharacters(in:
    /// .whitespacesAndNewlines)` answers, but that a space carrying a combining mark goes whole.
    public func trimmingWhiteSpace() -> SubSequence {
        let start = firstIndex { !$0.isWhitespace } ?? endIndex
        let end = lastIndex { !$0.isWhitespace }.map { index(after: $0) } ?? start
        return self[start..<end]
    }

    /// ASCII case-insensitive equality, which is what HTTP field names and methods need.
    func equalsIgnoringASCIICase(_ other: some StringProtocol) -> Bool {
        let lhs = utf8, rhs = other.utf8
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).allSatisfy { $0.asciiLowercased == $1.asciiLowercased }
    }
}

extension UInt8 {
    var asciiLowercased: UInt8 {
        (0x41...0x5A).contains(self) ? self | 0x20 : self
    }
}
