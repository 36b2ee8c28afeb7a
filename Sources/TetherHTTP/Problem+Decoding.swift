import Foundation
import TetherCore

extension Problem {
    /// What to say of a body that names a member twice (`CompactJSONDecoder(refusesDuplicateNames:)`'s refusal): the
    /// text is JSON, which Tether takes only with each name once, so it is said as such, not as invalid JSON.
    public static func memberGivenTwice(_ error: DecodingError) -> String? {
        guard case .dataCorrupted(let context) = error, context.codingPath.isEmpty,
              let name = context.debugDescription.range(of: "the member name ") else { return nil }
        return "The request body names a member twice: \(context.debugDescription[name.lowerBound...])"
    }

    /// A 400 `invalid_request` that says which member of the JSON body is wrong and why.
    ///
    /// The `pointer` extension member is an RFC 6901 JSON Pointer to the
    /// offending member, so clients can attach the message to a form field.
    public init(decodingError error: DecodingError) {
        let context: DecodingError.Context
        let detail: String
        switch error {
        case .keyNotFound(let key, let keyContext):
            context = keyContext
            let parent = Self.pointer(to: keyContext.codingPath)
            detail =
                parent.isEmpty
                ? "The member '\(key.stringValue)' is required."
                : "The member '\(key.stringValue)' is required in '\(parent)'."
            self = .badRequest(detail: detail, extensions: ["pointer": .string(parent + "/" + key.stringValue)])
            return
        case .typeMismatch(let type, let mismatchContext):
            context = mismatchContext
            detail = "\(Self.describe(context.codingPath)) must be \(Self.jsonKind(of: type))."
        case .valueNotFound(let type, let missingContext):
            context = missingContext
            detail = "\(Self.describe(context.codingPath)) must be \(Self.jsonKind(of: type)), not null."
        case .dataCorrupted(let corruptedContext):
            context = corruptedContext
            detail =
                context.codingPath.isEmpty
                ? Self.memberGivenTwice(error) ?? "The request body is not valid JSON."
                : "\(Self.describe(context.codingPath)) is invalid: \(context.debugDescription)"
        @unknown default:
            self = .badRequest(detail: "The request body could not be decoded.")
            return
        }
        let pointer = Self.pointer(to: context.codingPath)
        self = .badRequest(detail: detail, extensions: pointer.isEmpty ? [:] : ["pointer": .string(pointer)])
    }

    private static func describe(_ path: [any CodingKey]) -> String {
        path.isEmpty ? "The request body" : "The member '\(pointer(to: path))'"
    }

    private static func pointer(to path: [any CodingKey]) -> String {
        path.map { key in
            let token = key.intValue.map(String.init) ?? key.stringValue
            return "/" + token.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
        }.joined()
    }

    private static func jsonKind(of type: Any.Type) -> String {
        switch type {
        case is String.Type, is Substring.Type: "a string"
        case is Bool.Type: "a boolean"
        case is any BinaryInteger.Type: "an integer"
        case is any FloatingPoint.Type, is Decimal.Type: "a number"
        case is any Sequence.Type where !(type is any DictionaryProtocol.Type): "an array"
        default: "an object"
        }
    }
}

/// Marks dictionaries so that `jsonKind(of:)` can tell them from other sequences.
private protocol DictionaryProtocol {}
extension Dictionary: DictionaryProtocol {}

/// The JSON coders TetherHTTP uses when the caller does not bring its own.
enum JSONCoding {
    /// Sorted keys make bodies byte-stable; unescaped slashes keep URLs readable.
    static let encoder = CompactJSONEncoder(dates: .iso8601Seconds)

    /// Strict RFC 8259 text (UTF-8 only) with `JSONDecoder`'s errors and coding paths, which the
    /// problem details above are made from.
    static let decoder = CompactJSONDecoder(refusesDuplicateNames: true)
}
