import Foundation

// What every command writes, written as text without an encoder's tree: each event's metadata, and the
// payloads of a sign-in and a refresh. The bytes are those of their synthesized `Encodable` conformances
// through `CompactJSONEncoder` (members in UTF-8 order of their names, absent optionals left out, ids in
// upper case, dates as their payloads' encoder writes them), which tests compare them with.

extension EventActor: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        var isFirst = true
        if let id {
            JSONText.writeMemberName("id", isFirst: &isFirst, to: &output)
            JSONText.writeString(id, to: &output)
        }
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
        if let causationId {
            JSONText.writeMemberName("causationId", isFirst: &isFirst, to: &output)
            JSONText.writeUppercased(causationId, to: &output)
        }
        if let clientIP {
            JSONText.writeMemberName("clientIP", isFirst: &isFirst, to: &output)
            JSONText.writeString(clientIP, to: &output)
        }
        if let commandId {
            JSONText.writeMemberName("commandId", isFirst: &isFirst, to: &output)
            JSONText.writeUppercased(commandId, to: &output)
        }
        if let correlationId {
            JSONText.writeMemberName("correlationId", isFirst: &isFirst, to: &output)
            JSONText.writeUppercased(correlationId, to: &output)
        }
        if let surface {
            JSONText.writeMemberName("surface", isFirst: &isFirst, to: &output)
            JSONText.writeString(surface, to: &output)
        }
        if let userAgent {
            JSONText.writeMemberName("userAgent", isFirst: &isFirst, to: &output)
            JSONText.writeString(userAgent, to: &output)
        }
        JSONText.writeObjectEnd(isEmpty: isFirst, to: &output)
    }
}

extension PersonalData: JSONTextWritable {
    public func writeJSON(to output: inout [UInt8]) {
        var isFirst = true
        for (name, value) in [
            ("codeHash", codeHash), ("customClaims", customClaims), ("displayName", displayName), ("email", email),
            ("passwordHash", passwordHash), ("phoneNumber", phoneNumber), ("photoURL", photoURL),
            ("providerToken", providerToken), ("totpSecret", totpSecret),
        ] as [(StaticString, String?)] {
            guard let value else { continue }
            JSONText.writeMemberName(name, isFirst: &isFirst, to: &output)
            JSONText.writeString(value, to: &output)
        }
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
        JSONText.writeArray(amr, to: &output) { JSONText.writeString($0, to: &$1) }
        JSONText.writeVerbatim(#","authTime":""#, to: &output)
        ISO8601Milliseconds.write(authTime, to: &output)
        output.append(UInt8(ascii: "\""))
        if let expiresAt {
            JSONText.writeVerbatim(#","expiresAt":""#, to: &output)
            ISO8601Milliseconds.write(expiresAt, to: &output)
            output.append(UInt8(ascii: "\""))
        }
        if let installationId {
            JSONText.writeVerbatim(#","installationId":"#, to: &output)
            JSONText.writeString(installationId, to: &output)
        }
        if let jkt {
            JSONText.writeVerbatim(#","jkt":"#, to: &output)
            JSONText.writeString(jkt, to: &output)
        }
        if let personal {
            JSONText.writeVerbatim(#","personal":"#, to: &output)
            personal.writeJSON(to: &output)
        }
        JSONText.writeVerbatim(#","refreshTokenHash":"#, to: &output)
        JSONText.writeString(refreshTokenHash, to: &output)
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
