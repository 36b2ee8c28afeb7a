/// A JSON value inside a JOSE header, JWT claim set or JWK.
///
/// Numbers are IEEE doubles, which hold every NumericDate exactly. Objects
/// keep member order (needed to sign exactly what was built) and never have
/// duplicate names: the parser refuses them, as RFC 7515 §5.2 allows.
public enum JOSEValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A finite number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JOSEValue])
    /// An object.
    case object(JOSEObject)

    /// The string, if this is one.
    public var stringValue: String? {
        if case .string(let value) = self { value } else { nil }
    }

    /// The number, if this is one.
    public var numberValue: Double? {
        if case .number(let value) = self { value } else { nil }
    }

    /// The Boolean, if this is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { value } else { nil }
    }

    /// The elements, if this is an array.
    public var arrayValue: [JOSEValue]? {
        if case .array(let value) = self { value } else { nil }
    }

    /// The object, if this is one.
    public var objectValue: JOSEObject? {
        if case .object(let value) = self { value } else { nil }
    }
}

/// A JSON object with ordered, unique member names.
public struct JOSEObject: Sendable, Hashable {
    /// The members in document (or insertion) order.
    public private(set) var members: [(name: String, value: JOSEValue)]

    /// An empty object.
    public init() {
        members = []
    }

    /// An object from members whose names must be unique.
    init(uniqueMembers: [(name: String, value: JOSEValue)]) {
        members = uniqueMembers
    }

    /// The value of member `name`; setting `nil` removes it, setting a new name appends it.
    public subscript(name: String) -> JOSEValue? {
        get {
            // Linear search beats hashing for the handful of members JOSE objects have; comparing
            // lengths first skips String's slower unequal-contents path for most members.
            let length = name.utf8.count
            for member in members where member.name.utf8.count == length && member.name == name { return member.value }
            return nil
        }
        set {
            let index = members.firstIndex { $0.name == name }
            switch (index, newValue) {
            case (let index?, let value?): members[index].value = value
            case (let index?, nil): members.remove(at: index)
            case (nil, let value?): members.append((name, value))
            case (nil, nil): break
            }
        }
    }

    /// The member names in order.
    public var names: [String] { members.map(\.name) }

    /// The number of members.
    public var count: Int { members.count }

    /// The same members with equal values, in any order (JSON object members are unordered).
    public static func == (lhs: JOSEObject, rhs: JOSEObject) -> Bool {
        lhs.members.count == rhs.members.count && lhs.members.allSatisfy { rhs[$0.name] == $0.value }
    }

    /// Hashes the member names, order-independently like `==`.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        for name in members.map(\.name).sorted() { hasher.combine(name) }
    }
}

extension JOSEObject: ExpressibleByDictionaryLiteral {
    /// An object literal; a repeated name keeps its last value.
    public init(dictionaryLiteral elements: (String, JOSEValue)...) {
        self.init()
        for (name, value) in elements { self[name] = value }
    }
}

extension JOSEValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    /// A string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal.
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .number(value) }
    /// A Boolean literal.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An array literal.
    public init(arrayLiteral elements: JOSEValue...) { self = .array(elements) }
    /// An object literal.
    public init(dictionaryLiteral elements: (String, JOSEValue)...) {
        var object = JOSEObject()
        for (name, value) in elements { object[name] = value }
        self = .object(object)
    }
    /// `null`.
    public init(nilLiteral: ()) { self = .null }
}
