import Foundation
import TetherCore

/// The rows one user's events leave in the account tables, computed in memory: what
/// ``AccountProjection/statements(for:userId:at:seal:)`` and ``AccountProjection/recordVersion(_:of:)`` do
/// to that user's rows, statement for statement, for `tether replay`'s bulk phase, which writes the
/// final rows with `COPY` instead of running the statements.
///
/// Every row of the account tables belongs to one user (sessions, refresh tokens and factors are
/// reached by ids that only their user's events name), so folding each user's events alone, in their
/// order, gives the tables the whole log gives. The values are kept as PostgreSQL would read them
/// from the statements' parameters (timestamps as the text the statements cast, or, for a session's
/// times from its payload, as the dates that text is written from; JSON as its text); ``CopyRows``
/// writes each in binary only where that gives what PostgreSQL reads from that text, and as the text
/// otherwise. The replay tests hold the two paths equal on a log of every event type. Personal data is
/// kept in clear while folding and sealed as the rows are written (``ReadModelSeal``: the same text the
/// statements store).
struct AccountRows: BulkFold {
    /// The columns the bulk phase writes, table by table, in `COPY` order; the replay refuses a
    /// table whose columns differ, rather than leave a new column at its default.
    static let columns: [String: [String]] = [
        "users": [
            "id", "email", "email_normalized", "email_verified", "display_name", "photo_url", "disabled", "created_at",
            "last_sign_in_at", "valid_since", "version", "erased_at", "custom_claims", "email_terms", "name_terms",
        ],
        "identities": [
            "user_id", "provider", "provider_uid", "email", "email_verified", "display_name", "photo_url", "password_hash", "linked_at",
            "email_forwarding", "search_terms",
        ],
        "sessions": [
            "id", "user_id", "refresh_token_hash", "generation", "jkt", "amr", "auth_time", "started_at", "last_refreshed_at",
            "ended_at", "end_reason", "secret_kind", "expires_at",
        ],
        "refresh_tokens": ["token_hash", "session_id", "generation"],
        "mfa_factors": ["id", "user_id", "type", "display_name", "phone_hint", "enrolled_at", "confirmed_at", "last_used_step"],
        "mfa_recovery_codes": ["user_id", "code_hash", "issued_at", "used_at"],
        "mfa_challenges": [
            "id", "user_id", "first_factor", "amr", "expires_at", "factor_id", "code_expires_at", "attempts", "issued_at",
            "ended_at", "end_reason",
        ],
    ]

    /// The most frequent events, whose rows take nothing from their sealed part (their optional
    /// `personal` and the client's address): the bulk phase folds them unopened. The replay tests
    /// compare the result with the live rows, which were made from the opened events.
    static let leavingSealed: Set<String> = ["SignedIn", "SessionStarted", "SessionRefreshed", "SessionEnded"]

    /// The events whose payload the fold reads nothing of: a sign-in takes only when it occurred (its user's
    /// `last_sign_in_at`) and its place in the stream. The bulk phase reads them without their `data`: they
    /// are half of a log's events, and printing their `jsonb` was a quarter of PostgreSQL's reading.
    static let leavingData: Set<String> = [signedIn]

    /// A sign-in's type, which ``apply(_:occurredAt:)`` takes without decoding.
    private static let signedIn = "SignedIn"

    struct User {
        var email: String?
        var emailVerified = false
        var displayName: String?
        var photoURL: String?
        var disabled = false
        var createdAt: String
        var lastSignInAt: String?
        var validSince: String?
        var version = 0
        var erasedAt: String?
        var customClaims: String?
    }

    struct Identity {
        var provider: String
        var uid: String
        var email: String?
        var emailVerified: Bool
        var displayName: String?
        var photoURL: String?
        var passwordHash: String?
        var linkedAt: String
        var emailForwarding: Bool?
    }

    struct Session {
        var id: UUID
        var refreshTokenHash: String
        var generation = 0
        var jkt: String?
        var amr: String
        /// From the payload, written as ``ISO8601Milliseconds/format(_:)`` writes it (``CopyRows/Line/add(eventTime:)``).
        var authTime: Date
        var startedAt: String
        var lastRefreshedAt: String?
        var endedAt: String?
        var endReason: String?
        var secretKind: String
        var expiresAt: Date?

        /// The session's row of `sessions`, its fields in `COPY` order.
        func write(to line: inout CopyRows.Line, userId: UUID) {
            line.add(id); line.add(userId); line.add(refreshTokenHash); line.add(int4: generation)
            line.add(jkt); line.add(jsonb: amr); line.add(eventTime: authTime)
            line.add(timestamp: startedAt); line.add(timestamp: lastRefreshedAt); line.add(timestamp: endedAt)
            line.add(endReason); line.add(secretKind); line.add(eventTime: expiresAt)
        }
    }

    struct Factor {
        var id: UUID
        var type: String
        var displayName: String?
        var phoneHint: String?
        var enrolledAt: String
        var confirmedAt: String?
        var lastUsedStep: Int64?
    }

    struct RecoveryCode {
        var hash: String
        var issuedAt: String
        var usedAt: String?
    }

    struct Challenge {
        var id: UUID
        var firstFactor: String
        var amr: String
        var expiresAt: String
        var factorId: UUID?
        var codeExpiresAt: String?
        var attempts = 0
        var issuedAt: String
        var endedAt: String?
        var endReason: String?
    }

    let userId: UUID
    let seal: ReadModelSeal
    var user: User?
    var identities: [Identity] = []
    var sessions: [Session] = []
    var refreshTokens: [(hash: String, sessionId: UUID, generation: Int)] = []
    var factors: [Factor] = []
    var recoveryCodes: [RecoveryCode] = []
    var challenges: [Challenge] = []

    init(userId: UUID, seal: ReadModelSeal) {
        self.userId = userId
        self.seal = seal
    }

    /// Applies one stored event of the user: what it does to the rows, if it is an account event, and
    /// the stream version the user's row reflects (recorded for every event, as the statements do).
    mutating func apply(_ event: RecordedEvent, occurredAt: String) throws {
        if event.type == Self.signedIn {
            signedIn(at: occurredAt) // read without its data (`leavingData`)
        } else if let decoded = try AccountEventCodec.decode(event) {
            try apply(decoded, at: occurredAt)
        }
        user?.version = event.version
    }

    private mutating func signedIn(at: String) {
        updateUser { $0.lastSignInAt = at }
    }

    private mutating func apply(_ event: AccountEvent, at: String) throws {
        switch event {
        case .userRegistered(let payload):
            user = User(
                email: payload.personal.email, emailVerified: payload.emailVerified, displayName: payload.personal.displayName,
                photoURL: payload.personal.photoURL, createdAt: at)
        case .identityLinked(let payload) where payload.uid == ExternalIdentity.erasedUID:
            break
        case .identityLinked(let payload):
            identities.append(Identity(
                provider: payload.provider, uid: payload.uid, email: payload.personal.email, emailVerified: payload.emailVerified,
                displayName: payload.personal.displayName, photoURL: payload.personal.photoURL, linkedAt: at))
            updateUser { user in
                user.displayName = user.displayName ?? payload.personal.displayName
                user.photoURL = user.photoURL ?? payload.personal.photoURL
                if user.email == nil { user.emailVerified = payload.emailVerified && payload.personal.email != nil }
                user.email = user.email ?? payload.personal.email
            }
        case .identityUnlinked(let payload):
            identities.removeAll { $0.provider == payload.provider }
        case .emailVerified(let payload):
            updateUser { user in
                user.emailVerified = true
                user.email = payload.personal.email ?? user.email
            }
        case .passwordSet(let payload):
            for index in identities.indices where identities[index].provider == "password" {
                identities[index].passwordHash = payload.personal.passwordHash
            }
        case .signedIn:
            signedIn(at: at)
        case .sessionStarted(let payload):
            sessions.append(Session(
                id: payload.sessionId, refreshTokenHash: payload.refreshTokenHash, jkt: payload.jkt,
                amr: String(decoding: JSONText.strings(payload.amr), as: UTF8.self), authTime: payload.authTime, startedAt: at,
                secretKind: payload.secretKind.rawValue, expiresAt: payload.expiresAt))
            refreshTokens.append((payload.refreshTokenHash, payload.sessionId, 0))
        case .sessionRefreshed(let payload):
            for index in sessions.indices where sessions[index].id == payload.sessionId {
                sessions[index].refreshTokenHash = payload.refreshTokenHash
                sessions[index].generation = payload.generation
                sessions[index].lastRefreshedAt = at
            }
            refreshTokens.append((payload.refreshTokenHash, payload.sessionId, payload.generation))
        case .sessionEnded(let payload):
            for index in sessions.indices where sessions[index].id == payload.sessionId && sessions[index].endedAt == nil {
                sessions[index].endedAt = at
                sessions[index].endReason = payload.reason
            }
        case .sessionsRevoked(let payload):
            updateUser { $0.validSince = ISO8601Milliseconds.format(payload.validSince) }
            for index in sessions.indices where sessions[index].endedAt == nil {
                sessions[index].endedAt = at
                sessions[index].endReason = "revoked"
            }
        case .profileUpdated(let payload):
            updateUser { user in
                user.displayName = payload.cleared.contains("displayName") ? nil : payload.personal.displayName ?? user.displayName
                user.photoURL = payload.cleared.contains("photoURL") ? nil : payload.personal.photoURL ?? user.photoURL
                if let verified = payload.emailVerified { user.emailVerified = verified && user.email != nil }
            }
        case .emailChanged(let payload):
            updateUser { user in
                user.email = payload.personal.email
                user.emailVerified = payload.emailVerified && payload.personal.email != nil
            }
        case .customClaimsSet(let payload):
            updateUser { $0.customClaims = payload.personal.customClaims.flatMap { $0 == "{}" ? nil : $0 } }
        case .providerEmailStatusChanged(let payload):
            for index in identities.indices where identities[index].provider == payload.provider {
                identities[index].emailForwarding = payload.forwarding
            }
        case .userDisabled:
            updateUser { $0.disabled = true }
        case .userEnabled:
            updateUser { $0.disabled = false }
        case .userErased:
            challenges = []
            recoveryCodes = []
            factors = []
            identities = []
            updateUser { user in
                user.email = nil
                user.emailVerified = false
                user.displayName = nil
                user.photoURL = nil
                user.customClaims = nil
                user.disabled = true
                user.erasedAt = at
            }
        default:
            try applyMFA(event, at: at)
        }
    }

    private mutating func applyMFA(_ event: AccountEvent, at: String) throws {
        switch event {
        case .mfaFactorEnrolled(let payload):
            factors.append(Factor(
                id: payload.factorId, type: payload.type.rawValue, displayName: payload.personal.displayName,
                phoneHint: payload.personal.phoneNumber.map(PhoneNumber.hint), enrolledAt: at))
        case .mfaFactorConfirmed(let payload):
            updateFactor(payload.factorId) { factor in
                factor.confirmedAt = at
                factor.lastUsedStep = payload.totpStep ?? factor.lastUsedStep
                factor.displayName = payload.personal?.displayName ?? factor.displayName
            }
        case .mfaFactorRemoved(let payload):
            factors.removeAll { $0.id == payload.factorId }
        case .mfaRecoveryCodesIssued(let payload):
            recoveryCodes = payload.codeHashes.map { RecoveryCode(hash: $0, issuedAt: at) }
        case .mfaChallengeIssued(let payload):
            challenges.append(Challenge(
                id: payload.challengeId, firstFactor: payload.firstFactor, amr: String(decoding: JSONText.strings(payload.amr), as: UTF8.self),
                expiresAt: ISO8601Milliseconds.format(payload.expiresAt), issuedAt: at))
        case .mfaCodeSent(let payload):
            if let challengeId = payload.challengeId {
                updateChallenge(challengeId) { challenge in
                    challenge.factorId = payload.factorId
                    challenge.codeExpiresAt = ISO8601Milliseconds.format(payload.expiresAt)
                }
            }
        case .mfaCodeAccepted(let payload):
            updateChallenge(payload.challengeId) { $0.codeExpiresAt = nil }
            if let step = payload.totpStep, let factorId = payload.factorId {
                updateFactor(factorId) { $0.lastUsedStep = step }
            }
        case .mfaCodeRejected(let payload):
            if let challengeId = payload.challengeId {
                updateChallenge(challengeId) { $0.attempts = payload.attempt }
            }
        case .mfaRecoveryCodeUsed(let payload):
            for index in recoveryCodes.indices where recoveryCodes[index].hash == payload.codeHash {
                recoveryCodes[index].usedAt = at
            }
        case .mfaChallengeEnded(let payload):
            updateChallenge(payload.challengeId) { challenge in
                challenge.endedAt = at
                challenge.endReason = payload.reason
            }
        default:
            break
        }
    }

    private mutating func updateUser(_ change: (inout User) -> Void) {
        if var row = user {
            change(&row)
            user = row
        }
    }

    private mutating func updateFactor(_ id: UUID, _ change: (inout Factor) -> Void) {
        for index in factors.indices where factors[index].id == id { change(&factors[index]) }
    }

    private mutating func updateChallenge(_ id: UUID, _ change: (inout Challenge) -> Void) {
        for index in challenges.indices where challenges[index].id == id { change(&challenges[index]) }
    }

    /// Appends the user's rows to `copy`, one `COPY` row per row, table by table.
    func write(to copy: inout CopyRows) throws {
        let id = userId
        if let user {
            let sealed = try [
                user.email, user.email.map(ExternalIdentity.normalize), user.displayName, user.photoURL, user.customClaims,
            ].map(seal.seal)
            let terms = [try AccountProjection.terms(user.email, seal), try AccountProjection.terms(user.displayName, seal)]
            copy.row("users") { line in
                line.add(id); line.add(sealed[0]); line.add(sealed[1]); line.add(user.emailVerified)
                line.add(sealed[2]); line.add(sealed[3]); line.add(user.disabled); line.add(timestamp: user.createdAt)
                line.add(timestamp: user.lastSignInAt); line.add(timestamp: user.validSince); line.add(int4: user.version)
                line.add(timestamp: user.erasedAt); line.add(sealed[4])
                line.add(textArray: terms[0]); line.add(textArray: terms[1])
            }
        }
        for identity in identities {
            let sealed = try [identity.uid, identity.email, identity.displayName, identity.photoURL, identity.passwordHash].map(seal.seal)
            let terms = try AccountProjection.identityTerms(identity.uid, identity.email, identity.displayName, seal)
            copy.row("identities") { line in
                line.add(id); line.add(identity.provider); line.add(sealed[0]); line.add(sealed[1]); line.add(identity.emailVerified)
                line.add(sealed[2]); line.add(sealed[3]); line.add(sealed[4]); line.add(timestamp: identity.linkedAt)
                line.add(identity.emailForwarding)
                line.add(textArray: terms)
            }
        }
        // The most numerous rows are written from where the arrays keep them, not copied out one by one.
        for index in sessions.indices {
            copy.row("sessions") { sessions[index].write(to: &$0, userId: id) }
        }
        for index in refreshTokens.indices {
            copy.row("refresh_tokens") { line in
                line.add(refreshTokens[index].hash); line.add(refreshTokens[index].sessionId); line.add(int4: refreshTokens[index].generation)
            }
        }
        for factor in factors {
            let sealed = try [factor.displayName, factor.phoneHint].map(seal.seal)
            copy.row("mfa_factors") { line in
                line.add(factor.id); line.add(id); line.add(factor.type); line.add(sealed[0]); line.add(sealed[1])
                line.add(timestamp: factor.enrolledAt); line.add(timestamp: factor.confirmedAt); line.add(int8: factor.lastUsedStep)
            }
        }
        for code in recoveryCodes {
            copy.row("mfa_recovery_codes") { line in
                line.add(id); line.add(code.hash); line.add(timestamp: code.issuedAt); line.add(timestamp: code.usedAt)
            }
        }
        for challenge in challenges {
            copy.row("mfa_challenges") { line in
                line.add(challenge.id); line.add(id); line.add(challenge.firstFactor); line.add(jsonb: challenge.amr)
                line.add(timestamp: challenge.expiresAt); line.add(challenge.factorId); line.add(timestamp: challenge.codeExpiresAt)
                line.add(int4: challenge.attempts); line.add(timestamp: challenge.issuedAt); line.add(timestamp: challenge.endedAt)
                line.add(challenge.endReason)
            }
        }
    }
}

/// Rows for `COPY … FROM STDIN`, gathered table by table: in binary format, or in text format when
/// not asked for binary and for the rows binary format cannot carry exactly (below).
///
/// In binary format PostgreSQL takes each value as it is stored (an id's 16 bytes, a timestamp's
/// microseconds) instead of parsing its text: for the sessions of a replay, a third of the time `COPY`
/// took. The values are given as the text the statements cast (or a payload's date, which that text is
/// written from), and each typed ``Line/add`` turns it into the binary form of its column's type only
/// where that gives exactly what PostgreSQL would read from the text. Where it cannot (a timestamp in
/// another form, a number out of range), the row is written in text format instead, for PostgreSQL to
/// read or refuse as it always did.
public struct CopyRows: Sendable {
    /// Each table's lines so far, as `COPY` reads them (tab-separated, `\N` for NULL, one row a line).
    public private(set) var tables: [String: [UInt8]] = [:]
    /// Each table's binary rows so far, after binary format's header (``binaryCopy(of:)`` adds its trailer).
    private var binaryTables: [String: [UInt8]] = [:]
    /// Rows gathered since the last ``removeAll()``.
    public private(set) var count = 0
    /// Whether rows are written in binary format where they can be.
    public let binary: Bool

    public init(binary: Bool = false) {
        self.binary = binary
    }

    /// One row being written: fields in the table's column order, each added with the method of its
    /// column's type.
    public struct Line {
        fileprivate var bytes: [UInt8]
        fileprivate var fields = 0
        fileprivate let isBinary: Bool
        /// A value binary format cannot carry exactly was added: the row goes in text format instead.
        fileprivate var refused = false

        /// A `text` value.
        public mutating func add(_ text: String?) {
            guard let text else { return addNull() }
            separate()
            if isBinary {
                var text = text
                text.withUTF8 { appendField($0) }
            } else {
                bytes.appendEscaped(text, Self.escape)
            }
        }

        /// What follows the backslash for a byte COPY's text format escapes.
        @inline(__always) private static func escape(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "\\"): UInt8(ascii: "\\")
            case UInt8(ascii: "\n"): UInt8(ascii: "n")
            case UInt8(ascii: "\r"): UInt8(ascii: "r")
            case UInt8(ascii: "\t"): UInt8(ascii: "t")
            default: nil
            }
        }

        /// A `uuid`: in text, in lower case as PostgreSQL writes it; in binary, its 16 bytes.
        public mutating func add(_ id: UUID?) {
            guard let id else { return addNull() }
            separate()
            if isBinary {
                appendLength(16)
                withUnsafeBytes(of: id.uuid) { bytes.append(contentsOf: $0) }
            } else {
                id.writeLowercased(to: &bytes)
            }
        }

        /// A `boolean`.
        public mutating func add(_ value: Bool) {
            guard !isBinary else { return addFixedWidth(UInt8(value ? 1 : 0)) }
            separate()
            bytes.append(value ? UInt8(ascii: "t") : UInt8(ascii: "f"))
        }

        public mutating func add(_ value: Bool?) {
            guard let value else { return addNull() }
            add(value)
        }

        /// An `integer` (32 bits).
        public mutating func add(int4 value: Int?) {
            guard let value else { return addNull() }
            guard isBinary else { return add(String(value)) }
            addFixedWidth(Int32(exactly: value))
        }

        /// A `bigint`.
        public mutating func add(int8 value: Int64?) {
            guard let value else { return addNull() }
            guard isBinary else { return add(String(value)) }
            addFixedWidth(value)
        }

        /// A `timestamptz`, as the text the statements cast: PostgreSQL's own (`2026-12-05 23:56:25.36+00`)
        /// or an event's (`2026-12-05T23:56:25.360Z`).
        public mutating func add(timestamp text: String?) {
            guard let text else { return addNull() }
            guard isBinary else { return add(text) }
            addFixedWidth(UTCTimestamp.microseconds(text, separators: Self.dateTimeSeparators, zoneRequired: true).map(Self.sincePostgresEpoch))
        }

        private static let dateTimeSeparators = [UInt8(ascii: " "), UInt8(ascii: "T")]

        /// A `timestamptz` from an event's payload, which the statements cast from its
        /// ``ISO8601Milliseconds/format(_:)`` text: in binary, the microseconds PostgreSQL reads from that text,
        /// made without it.
        public mutating func add(eventTime date: Date?) {
            guard let date else { return addNull() }
            guard isBinary else { return add(ISO8601Milliseconds.format(date)) }
            addFixedWidth(UTCTimestamp.microseconds(millisecondsOf: date).map(Self.sincePostgresEpoch))
        }

        /// Microseconds since 1970 as PostgreSQL stores a timestamp: counted from 2000-01-01 00:00 UTC.
        private static func sincePostgresEpoch(_ micros: Int64) -> Int64 {
            micros - 946_684_800_000_000
        }

        /// A `jsonb` value, as JSON text: binary format is a version byte (1), then the text.
        public mutating func add(jsonb text: String?) {
            guard let text else { return addNull() }
            guard isBinary else { return add(text) }
            separate()
            var json = text
            json.withUTF8 { utf8 in
                appendLength(utf8.count + 1)
                bytes.append(1)
                bytes.append(contentsOf: utf8)
            }
        }

        /// A `text[]` value: in text, its array literal; in binary, one dimension (none when empty) of
        /// elements of type `text` (oid 25), none NULL.
        public mutating func add(textArray array: PostgresArray?) {
            guard let array else { return addNull() }
            guard isBinary else { return add(array.literal) }
            separate()
            let lengthAt = bytes.count
            appendLength(0)
            appendBigEndian(UInt32(array.elements.isEmpty ? 0 : 1))
            appendBigEndian(UInt32(0)) // no NULL element
            appendBigEndian(UInt32(25))
            if !array.elements.isEmpty {
                appendBigEndian(UInt32(array.elements.count))
                appendBigEndian(UInt32(1)) // the lower bound
                for var element in array.elements { element.withUTF8 { appendField($0) } }
            }
            let length = UInt32(bytes.count - lengthAt - 4).bigEndian
            withUnsafeBytes(of: length) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
        }

        private mutating func addNull() {
            separate()
            if isBinary {
                appendBigEndian(UInt32(bitPattern: -1))
            } else {
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(ascii: "N"))
            }
        }

        /// A binary field of `value`'s big-endian bytes; nil when binary format cannot carry the value
        /// exactly, which refuses the row (it is written in text format instead).
        private mutating func addFixedWidth(_ value: (some FixedWidthInteger)?) {
            guard let value else {
                refused = true
                return
            }
            separate()
            appendLength(MemoryLayout.size(ofValue: value))
            appendBigEndian(value)
        }

        private mutating func appendField(_ value: UnsafeBufferPointer<UInt8>) {
            appendLength(value.count)
            bytes.append(contentsOf: value)
        }

        private mutating func appendLength(_ length: Int) {
            appendBigEndian(UInt32(length))
        }

        private mutating func appendBigEndian(_ value: some FixedWidthInteger) {
            withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }

        private mutating func separate() {
            if fields > 0, !isBinary { bytes.append(UInt8(ascii: "\t")) }
            fields += 1
        }
    }

    /// Appends one row of `table`, its fields written by `fill` (called a second time, for a text row,
    /// when the table is binary and binary format cannot carry the row).
    public mutating func row(_ table: String, _ fill: (inout Line) -> Void) {
        count += 1
        if binary, Self.appendBinary(to: &binaryTables[table, default: Self.binaryHeader], fill) { return }
        Self.append(to: &tables[table, default: []], fill)
    }

    /// Appends a line to `bytes` (a table's lines, changed where the dictionary keeps them: one look-up, no copy).
    private static func append(to bytes: inout [UInt8], _ fill: (inout Line) -> Void) {
        var line = Line(bytes: [], isBinary: false)
        swap(&line.bytes, &bytes)
        fill(&line)
        line.bytes.append(UInt8(ascii: "\n"))
        swap(&line.bytes, &bytes)
    }

    /// Appends a binary row to `bytes`, its field count first; false, with `bytes` as it was, when a value refused.
    private static func appendBinary(to bytes: inout [UInt8], _ fill: (inout Line) -> Void) -> Bool {
        let start = bytes.count
        var line = Line(bytes: [], isBinary: true)
        swap(&line.bytes, &bytes)
        line.bytes.append(contentsOf: [0, 0])
        fill(&line)
        if line.refused {
            line.bytes.removeSubrange(start...)
        } else {
            line.bytes[start] = UInt8(truncatingIfNeeded: line.fields >> 8)
            line.bytes[start + 1] = UInt8(truncatingIfNeeded: line.fields)
        }
        swap(&line.bytes, &bytes)
        return !line.refused
    }

    /// Binary format's signature, flags (none) and header extension (none).
    private static let binaryHeader: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [UInt8](repeating: 0, count: 8)

    /// What `COPY … FROM STDIN (FORMAT binary)` reads for `table`'s binary rows, if it has any.
    public func binaryCopy(of table: String) -> [UInt8]? {
        guard let rows = binaryTables[table], rows.count > Self.binaryHeader.count else { return nil }
        return rows + [0xFF, 0xFF]
    }

    public mutating func removeAll() {
        tables = [:]
        binaryTables = [:]
        count = 0
    }
}
