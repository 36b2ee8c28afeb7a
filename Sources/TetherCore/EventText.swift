import Foundation

// What every command writes, written as text without an encoder's tree: each event's metadata, and the
// payloads of a sign-in and a refresh. The bytes are those of their synthesized `Encodable` conformances
// through `CompactJSONEncoder` (members in UTF-8 order of their names, absent optionals left out, ids in
// upper case, dates as their payloads' encoder writes them), which tests compare them with.

extension EventActor: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        var isFirst = true
        JSONText.writeMember("id", ifPresent: id, isFirst: &isFirst, to: &output)
        JSONText.writeMemberName("kind", isFirst: &isFirst, to: &output)
        JSONText.writeString(kind, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

extension EventMetadata: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        var isFirst = true
        if let actor {
            JSONText.writeMemberName("actor", isFirst: &isFirst, to: &output)
            actor.writeJSON(to: &output)
        }
        JSONText.writeMember("causationId", ifPresent: causationId, isFirst: &isFirst, to: &output)
        JSONText.writeMember("clientIP", ifPresent: clientIP, isFirst: &isFirst, to: &output)
        JSONText.writeMember("commandId", ifPresent: commandId, isFirst: &isFirst, to: &output)
        JSONText.writeMember("correlationId", ifPresent: correlationId, isFirst: &isFirst, to: &output)
        JSONText.writeMember("surface", ifPresent: surface, isFirst: &isFirst, to: &output)
        JSONText.writeMember("userAgent", ifPresent: userAgent, isFirst: &isFirst, to: &output)
        JSONText.writeObjectEnd(isEmpty: isFirst, to: &output)
    }
}

extension PersonalData: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        var isFirst = true
        JSONText.writeMember("codeHash", ifPresent: codeHash, isFirst: &isFirst, to: &output)
        JSONText.writeMember("customClaims", ifPresent: customClaims, isFirst: &isFirst, to: &output)
        JSONText.writeMember("displayName", ifPresent: displayName, isFirst: &isFirst, to: &output)
        JSONText.writeMember("email", ifPresent: email, isFirst: &isFirst, to: &output)
        JSONText.writeMember("installationId", ifPresent: installationId, isFirst: &isFirst, to: &output)
        JSONText.writeMember("passwordHash", ifPresent: passwordHash, isFirst: &isFirst, to: &output)
        JSONText.writeMember("phoneNumber", ifPresent: phoneNumber, isFirst: &isFirst, to: &output)
        JSONText.writeMember("photoURL", ifPresent: photoURL, isFirst: &isFirst, to: &output)
        JSONText.writeMember("providerToken", ifPresent: providerToken, isFirst: &isFirst, to: &output)
        JSONText.writeMember("totpSecret", ifPresent: totpSecret, isFirst: &isFirst, to: &output)
        JSONText.writeObjectEnd(isEmpty: isFirst, to: &output)
    }
}

extension AccountEvent.SignedIn: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"outcome":"#, to: &output)
        JSONText.writeString(outcome, to: &output)
        JSONText.writeVerbatim(#","provider":"#, to: &output)
        JSONText.writeString(provider, to: &output)
        JSONText.writeVerbatim(#","sessionId":"#, to: &output)
        JSONText.writeUppercased(sessionId, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

extension AccountEvent.SessionStarted: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"amr":"#, to: &output)
        JSONText.writeStrings(amr, to: &output)
        JSONText.writeVerbatim(#","authTime":""#, to: &output)
        ISO8601Milliseconds.write(authTime, to: &output)
        output.append(UInt8(ascii: "\""))
        if let expiresAt {
            JSONText.writeVerbatim(#","expiresAt":""#, to: &output)
            ISO8601Milliseconds.write(expiresAt, to: &output)
            output.append(UInt8(ascii: "\""))
        }
        var isFirst = false  // after amr and authTime
        JSONText.writeMember("installationId", ifPresent: installationId, isFirst: &isFirst, to: &output)
        JSONText.writeMember("jkt", ifPresent: jkt, isFirst: &isFirst, to: &output)
        if let personal {
            JSONText.writeVerbatim(#","personal":"#, to: &output)
            personal.writeJSON(to: &output)
        }
        JSONText.writeVerbatim(#","refreshTokenHash":"#, to: &output)
        JSONText.writeString(refreshTokenHash, to: &output)
        JSONText.writeMember("secondFactorId", ifPresent: secondFactorId, isFirst: &isFirst, to: &output)
        JSONText.writeVerbatim(#","secretKind":"#, to: &output)
        JSONText.writeString(secretKind.rawValue, to: &output)
        JSONText.writeVerbatim(#","sessionId":"#, to: &output)
        JSONText.writeUppercased(sessionId, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

extension AccountEvent.SessionRefreshed: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        JSONText.writeVerbatim(#"{"generation":"#, to: &output)
        JSONText.writeInteger(generation, to: &output)
        JSONText.writeVerbatim(#","previousTokenHash":"#, to: &output)
        JSONText.writeString(previousTokenHash, to: &output)
        JSONText.writeVerbatim(#","refreshTokenHash":"#, to: &output)
        JSONText.writeString(refreshTokenHash, to: &output)
        JSONText.writeVerbatim(#","sessionId":"#, to: &output)
        JSONText.writeUppercased(sessionId, to: &output)
        output.append(UInt8(ascii: "}"))
    }
}

// The same payloads read back without a `Decoder` (``JSONObjectReader``): their members in any order, with any
// white space and unknown members between them; nil where the reader gives up (a name escaped or given twice, a value of
// another form, personal data), and ``AccountEventCodec/decode(_:)`` then decodes through ``CompactJSONDecoder``.

extension AccountEvent.SignedIn {
    private static let names: [StaticString] = ["outcome", "provider", "sessionId"]

    init?(plainJSON data: Data) {
        guard let read = JSONObjectReader.read(data, { reader -> Self? in
            var outcome: String?, provider: String?, sessionId: UUID?
            while let member = try reader.nextMember(Self.names) {
                switch member {
                case 0: outcome = try reader.string()
                case 1: provider = try reader.string()
                default: sessionId = try reader.id()
                }
            }
            guard let outcome, let provider, let sessionId else { return nil }
            return Self(provider: provider, sessionId: sessionId, outcome: outcome)
        }) else { return nil }
        self = read
    }
}

extension AccountEvent.SessionStarted {
    private static let names: [StaticString] = [
        "amr", "authTime", "expiresAt", "installationId", "jkt", "personal", "refreshTokenHash", "secondFactorId", "secretKind",
        "sessionId",
    ]

    init?(plainJSON data: Data) {
        guard let read = JSONObjectReader.read(data, { reader -> Self? in
            var amr: [String]?, authTime: Date?, expiresAt: Date?, installationId: String?, jkt: String?
            var refreshTokenHash: String?, secondFactorId: UUID?, secretKind: SessionSecretKind?, sessionId: UUID?
            while let member = try reader.nextMember(Self.names) {
                switch member {
                case 0: amr = try reader.strings()
                case 1: authTime = try reader.date()
                case 2: expiresAt = try reader.optionalDate()
                case 3: installationId = try reader.optionalString()
                case 4: jkt = try reader.optionalString()
                case 5: guard try reader.null() else { return nil }  // sealed personal data: the decoder's
                case 6: refreshTokenHash = try reader.string()
                case 7: secondFactorId = try reader.null() ? nil : try reader.id()
                case 8: secretKind = SessionSecretKind(rawValue: try reader.string())
                default: sessionId = try reader.id()
                }
            }
            guard let amr, let authTime, let refreshTokenHash, let secretKind, let sessionId else { return nil }
            return Self(
                sessionId: sessionId, refreshTokenHash: refreshTokenHash, authTime: authTime, amr: amr, jkt: jkt,
                secretKind: secretKind, installationId: installationId, expiresAt: expiresAt, secondFactorId: secondFactorId, personal: nil)
        }) else { return nil }
        self = read
    }
}

extension AccountEvent.SessionEnded {
    private static let names: [StaticString] = ["reason", "sessionId"]

    /// A sign-out's payload (written by the encoder, with the same plain form).
    init?(plainJSON data: Data) {
        guard let read = JSONObjectReader.read(data, { reader -> Self? in
            var reason: String?, sessionId: UUID?
            while let member = try reader.nextMember(Self.names) {
                switch member {
                case 0: reason = try reader.string()
                default: sessionId = try reader.id()
                }
            }
            guard let reason, let sessionId else { return nil }
            return Self(sessionId: sessionId, reason: reason)
        }) else { return nil }
        self = read
    }
}

extension AccountEvent.SessionRefreshed {
    private static let names: [StaticString] = ["generation", "previousTokenHash", "refreshTokenHash", "sessionId"]

    init?(plainJSON data: Data) {
        guard let read = JSONObjectReader.read(data, { reader -> Self? in
            var generation: Int?, previousTokenHash: String?, refreshTokenHash: String?, sessionId: UUID?
            while let member = try reader.nextMember(Self.names) {
                switch member {
                case 0: generation = try reader.integer()
                case 1: previousTokenHash = try reader.string()
                case 2: refreshTokenHash = try reader.string()
                default: sessionId = try reader.id()
                }
            }
            guard let generation, let previousTokenHash, let refreshTokenHash, let sessionId else { return nil }
            return Self(sessionId: sessionId, previousTokenHash: previousTokenHash, refreshTokenHash: refreshTokenHash, generation: generation)
        }) else { return nil }
        self = read
    }
}
