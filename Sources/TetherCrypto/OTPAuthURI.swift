/// A TOTP enrollment as an `otpauth://totp/…` URI, the format authenticator apps scan from QR codes.
///
/// Layout: `otpauth://totp/Issuer:account?secret=BASE32&issuer=Issuer&algorithm=SHA1&digits=6&period=30`.
/// Label and parameter values are percent-encoded (everything but RFC 3986
/// unreserved characters); the secret is unpadded base32.
public struct OTPAuthURI: Sendable, Equatable {
    /// The TOTP parameters and secret.
    public var totp: TOTP
    /// Who issued the account, shown by the app above the code.
    public var issuer: String?
    /// The account (user name or email) within the issuer.
    public var accountName: String

    /// Collects the parts; neither issuer nor account may contain `:`, the label separator.
    public init(totp: TOTP, issuer: String?, accountName: String) throws {
        guard !accountName.isEmpty, !accountName.contains(":"), issuer.map({ !$0.isEmpty && !$0.contains(":") }) ?? true else {
            throw CryptoError.invalidInput.with(detail: "otpauth issuer and account must be non-empty and free of ':'")
        }
        self.totp = totp
        self.issuer = issuer
        self.accountName = accountName
    }

    /// Parses an `otpauth://totp/` URI strictly: malformed escapes, duplicate
    /// parameters, a missing or non-canonical secret, or a label issuer that
    /// disagrees with the `issuer` parameter are errors.
    public init(parsing text: String) throws {
        let prefix = "otpauth://totp/"
        guard text.prefix(prefix.count).lowercased() == prefix else { throw Self.invalid("not an otpauth://totp/ URI") }
        let rest = text.dropFirst(prefix.count)
        let labelPart = rest.prefix { $0 != "?" }
        let queryPart = rest.dropFirst(labelPart.count + 1)
        let label = try Self.percentDecoded(labelPart)

        var parameters: [String: String] = [:]
        for pair in queryPart.split(separator: "&", omittingEmptySubsequences: true) {
            let name = pair.prefix { $0 != "=" }
            guard name.count < pair.count else { throw Self.invalid("parameter without value") }
            let key = try Self.percentDecoded(name)
            guard parameters[key] == nil else { throw Self.invalid("duplicate parameter \(key)") }
            parameters[key] = try Self.percentDecoded(pair.dropFirst(name.count + 1))
        }

        var labelIssuer: String?
        var account = label
        if let colon = label.firstIndex(of: ":") {
            labelIssuer = String(label[..<colon])
            account = String(label[label.index(after: colon)...].drop { $0 == " " })
        }
        if let labelIssuer, let parameterIssuer = parameters["issuer"], labelIssuer != parameterIssuer {
            throw Self.invalid("label issuer and issuer parameter differ")
        }
        guard let secretText = parameters["secret"] else { throw Self.invalid("missing secret") }
        let algorithm: DigestAlgorithm
        switch parameters["algorithm"] ?? "SHA1" {
        case "SHA1": algorithm = .sha1
        case "SHA256": algorithm = .sha256
        case "SHA512": algorithm = .sha512
        default: throw Self.invalid("unsupported algorithm")
        }
        let digits = try Self.integer(parameters["digits"] ?? "6")
        let period = try Self.integer(parameters["period"] ?? "30")
        let totp = try TOTP(secret: Base32.decode(secretText), algorithm: algorithm, digits: digits, period: period)
        try self.init(totp: totp, issuer: parameters["issuer"] ?? labelIssuer, accountName: account)
    }

    /// The URI text.
    public var stringValue: String {
        let label = (issuer.map { Self.percentEncoded($0) + ":" } ?? "") + Self.percentEncoded(accountName)
        var query = "secret=" + Base32.encode(totp.secret)
        if let issuer { query += "&issuer=" + Self.percentEncoded(issuer) }
        query += "&algorithm=\(totp.algorithm.rawValue)&digits=\(totp.digits)&period=\(totp.period)"
        return "otpauth://totp/\(label)?\(query)"
    }

    private static func invalid(_ detail: String) -> CryptoError {
        CryptoError.invalidEncoding.with(detail: "otpauth URI: \(detail)")
    }

    private static func integer(_ text: String) throws -> Int {
        guard !text.isEmpty, text.utf8.count <= 4, text.utf8.allSatisfy({ (48...57).contains($0) }), let value = Int(text) else {
            throw invalid("not a small decimal number: \(text)")
        }
        return value
    }

    /// RFC 3986 percent-encoding of everything outside the unreserved set.
    private static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                output.append(byte)
            default:
                output += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Strict percent-decoding: `%` must be followed by two hex digits and the result must be UTF-8.
    private static func percentDecoded(_ text: Substring) throws -> String {
        var output: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                output.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                throw invalid("malformed percent escape")
            }
            output.append(high << 4 | low)
        }
        let decoded = String(decoding: output, as: UTF8.self)
        guard decoded.utf8.elementsEqual(output) else { throw invalid("percent escapes are not UTF-8") }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
