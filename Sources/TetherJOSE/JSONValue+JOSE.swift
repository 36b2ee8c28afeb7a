import TetherCore

extension JSONValue {
    /// Parses a complete JSON text with the JOSE parser (strict RFC 8259, bounded nesting): several
    /// times faster than decoding `JSONValue` with `JSONDecoder`, which guesses each member's type
    /// by throwing. Numbers are read as doubles, so an integer beyond ±9·10^15 reads as `.double`
    /// (stored payloads hold none; `JSONDecoder` would keep it exact).
    public init(parsing bytes: some Collection<UInt8>) throws {
        self.init(try JOSEValue(parsing: bytes))
    }

    /// The same value as TetherHTTP JSON: whole numbers that fit `Int` become `.int`, so ids and times stay exact.
    public init(_ value: JOSEValue) {
        switch value {
        case .null: self = .null
        case .bool(let bool): self = .bool(bool)
        case .number(let number):
            if number.rounded() == number, abs(number) < 9.0e15 { self = .int(Int(number)) } else { self = .double(number) }
        case .string(let string): self = .string(string)
        case .array(let elements): self = .array(elements.map(JSONValue.init))
        case .object(let object): self = .object(Dictionary(object))
        }
    }
}

extension JOSEValue {
    /// The same value as a JOSE value (for claims a caller supplied as request JSON).
    public init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let bool): self = .bool(bool)
        case .int(let int): self = .number(Double(int))
        case .double(let double): self = .number(double)
        case .string(let string): self = .string(string)
        case .array(let elements): self = .array(elements.map(JOSEValue.init))
        case .object(let members):
            var object = JOSEObject()
            for name in members.keys.sorted() { object[name] = JOSEValue(members[name]!) }
            self = .object(object)
        }
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    /// The members of a JOSE object; member order is dropped, as `JSONValue` objects do not keep it.
    public init(_ object: JOSEObject) {
        self.init(object.members.map { ($0.name, JSONValue($0.value)) }, uniquingKeysWith: { first, _ in first })
    }
}
