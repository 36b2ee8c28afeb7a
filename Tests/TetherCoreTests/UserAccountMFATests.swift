import Foundation
import Testing
import TetherCore

@Suite("Second-factor decisions (pure)")
struct UserAccountMFATests {
    let now = Date(timeIntervalSince1970: 1_795_958_985)
    let id = UUID()
    let factorId = UUID()
    private let apple = ExternalIdentity(provider: "apple", uid: "001.apple", email: "a@example.com", isEmailVerified: true)

    /// A user with one confirmed TOTP factor (confirmed at step 100).
    private func userWithTOTP() throws -> UserAccount {
        var events = UserAccount.register(id: id, identity: apple, session: nil, now: now)
        var user = UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
        let enrol = try user.enrolTOTP(factorId: factorId, secret: "JBSWY3DPEHPK3PXP", displayName: nil, authTime: now, now: now)
        for event in enrol { user.apply(event, at: now) }
        let confirm = try user.confirmFactor(factorId, type: .totp, check: .totp(matchingStep: 100), recoveryCodeHashes: ["r1", "r2"], now: now)
        events += enrol + confirm.events
        return UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
    }

    private func newSession() -> NewSession { NewSession(id: UUID(), refreshTokenHash: UUID().uuidString, amr: ["apple"]) }

    private func applying(_ events: [AccountEvent], to user: UserAccount, at date: Date? = nil) -> UserAccount {
        var user = user
        for event in events { user.apply(event, at: date ?? now) }
        return user
    }

    @Test func aConfirmedFactorTurnsSignInIntoAChallenge() throws {
        let user = try userWithTOTP()
        let session = newSession()
        let events = try user.signIn(with: apple, session: session, now: now)
        #expect(events.map(\.type) == ["MFAChallengeIssued"])
        let challenged = applying(events, to: user)
        #expect(challenged.activeSessions.isEmpty)
        #expect(challenged.mfa.challenges[session.id]?.expiresAt == now.addingTimeInterval(300))
        #expect(challenged.mfa.unusedRecoveryCodeCount == 2)
    }

    @Test func fiveWrongCodesEndTheChallengeAndTheNextMustWait() throws {
        var user = try userWithTOTP()
        let session = newSession()
        user = applying(try user.signIn(with: apple, session: session, now: now), to: user)
        for attempt in 1...5 {
            let outcome = try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: nil), session: newSession(), now: now)
            #expect(outcome.failure?.code == "invalid_code")
            guard case .mfaCodeRejected(let rejected)? = outcome.events.first else {
                Issue.record("attempt \(attempt) was not rejected")
                return
            }
            #expect(rejected.attempt == attempt && rejected.challengeId == session.id && rejected.reason == "wrong_code")
            #expect(outcome.events.count == (attempt == 5 ? 2 : 1))
            user = applying(outcome.events, to: user)
        }
        #expect(throws: AccountError.self) {
            try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: now)
        }
        let next = newSession()
        user = applying(try user.signIn(with: apple, session: next, now: now), to: user)
        do {
            _ = try user.verifyChallenge(next.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: now.addingTimeInterval(1))
            Issue.record("no backoff")
        } catch {
            #expect(error.code == "rate_limited")
            #expect(error.retryAfterSeconds == 4)
        }
        let later = try user.verifyChallenge(next.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: now.addingTimeInterval(6))
        #expect(later.failure == nil)
        #expect(later.events.map(\.type) == ["MFACodeAccepted", "MFAChallengeEnded", "SignedIn", "SessionStarted"])
    }

    @Test func aDayOfWrongCodesLocksTheSecondFactorUntilTheyAgeOut() throws {
        var user = try userWithTOTP()
        var clock = now
        // Wrong codes spread out enough that the short backoff never applies.
        for _ in 0..<UserAccount.maxDailyCodeFailures {
            let session = newSession()
            user = applying(try user.signIn(with: apple, session: session, now: clock), to: user, at: clock)
            let outcome = try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: nil), session: newSession(), now: clock)
            user = applying(outcome.events, to: user, at: clock)
            clock = clock.addingTimeInterval(20 * 60)
        }
        let session = newSession()
        user = applying(try user.signIn(with: apple, session: session, now: clock), to: user, at: clock)
        do {
            _ = try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: 500), session: newSession(), now: clock)
            Issue.record("a thirty-first code in a day was checked")
        } catch {
            #expect(error.code == "rate_limited")
            #expect((error.retryAfterSeconds ?? 0) > 0 && (error.retryAfterSeconds ?? 0) <= 24 * 3600)
        }
        let tomorrow = now.addingTimeInterval(24 * 3600 + 1)
        let next = newSession()
        user = applying(try user.signIn(with: apple, session: next, now: tomorrow), to: user, at: tomorrow)
        #expect(try user.verifyChallenge(next.id, factor: factorId, check: .totp(matchingStep: 500), session: newSession(), now: tomorrow).failure == nil)
    }

    /// The state forgets what can no longer decide anything: challenges an hour past their expiry, wrong codes
    /// over a day old. A sign-in every two hours for two days, each with a wrong code, leaves one challenge
    /// and the last day's twelve failures; a challenge expired within the hour is still refused as expired.
    @Test func longExpiredChallengesAndDayOldFailuresLeaveTheState() throws {
        var user = try userWithTOTP()
        var clock = now
        var last = newSession()
        for _ in 0..<24 {
            last = newSession()
            user = applying(try user.signIn(with: apple, session: last, now: clock), to: user, at: clock)
            let outcome = try user.verifyChallenge(last.id, factor: factorId, check: .totp(matchingStep: nil), session: newSession(), now: clock)
            #expect(outcome.failure?.code == "invalid_code")
            user = applying(outcome.events, to: user, at: clock)
            clock = clock.addingTimeInterval(2 * 3600)
        }
        #expect(Array(user.mfa.challenges.keys) == [last.id])
        #expect(user.mfa.failures.count == 12)
        #expect(user.mfa.failures.allSatisfy { clock.timeIntervalSince($0) <= 26 * 3600 })
        let late = clock.addingTimeInterval(-2 * 3600 + 35 * 60)
        do {
            _ = try user.verifyChallenge(last.id, factor: factorId, check: .totp(matchingStep: 500), session: newSession(), now: late)
            Issue.record("an expired challenge was verified")
        } catch {
            #expect(error.code == "invalid_mfa_pending_credential")
            #expect(error.detail.contains("expired"), "\(error)")
        }
    }

    @Test func aTOTPStepIsAcceptedOnceAndNeverBelowTheLastOne() throws {
        var user = try userWithTOTP()
        let session = newSession()
        user = applying(try user.signIn(with: apple, session: session, now: now), to: user)
        for (step, reason) in [(Int64(100), "reused_code"), (99, "reused_code")] {
            let outcome = try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: step), session: newSession(), now: now)
            if case .mfaCodeRejected(let rejected) = outcome.events.first { #expect(rejected.reason == reason) } else { Issue.record("accepted \(step)") }
            user = applying(outcome.events, to: user)
        }
        let accepted = try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: now)
        #expect(accepted.failure == nil)
    }

    @Test func revokingOrDisablingEndsOpenChallenges() throws {
        var user = try userWithTOTP()
        let session = newSession()
        user = applying(try user.signIn(with: apple, session: session, now: now), to: user)
        for decision in [try user.revokeAllSessions(now: now), try user.setDisabled(true, reason: nil, now: now)] {
            let ended = applying(decision, to: user)
            #expect(ended.mfa.challenges[session.id]?.isEnded == true)
            #expect(throws: AccountError.self) {
                try ended.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: now)
            }
        }
    }

    /// A sign-in begun with a provider the user unlinks before the second step does not finish, with a code or
    /// a recovery code; one begun with a provider still linked does.
    @Test func aChallengeBegunWithAnUnlinkedProviderDoesNotFinish() throws {
        var user = try userWithTOTP()
        let google = ExternalIdentity(provider: "google", uid: "g-1", email: nil, isEmailVerified: false)
        user = applying(try user.link(google), to: user)
        let viaApple = newSession(), viaGoogle = newSession()
        user = applying(try user.signIn(with: apple, session: viaApple, now: now), to: user)
        user = applying(try user.signIn(with: google, session: viaGoogle, now: now), to: user)
        let later = now.addingTimeInterval(30)
        let unlinked = applying(try user.unlink(provider: "apple", byAdmin: false), to: user, at: later)
        let isGone = { (error: any Error) in (error as? AccountError)?.reason == .invalidMFAPendingCredential }
        #expect {
            try unlinked.verifyChallenge(viaApple.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: later)
        } throws: { isGone($0) }
        #expect {
            try unlinked.verifyChallenge(viaApple.id, factor: nil, check: .recoveryCode(codeHashes: ["r1"]), session: newSession(), now: later)
        } throws: { isGone($0) }
        let finished = try unlinked.verifyChallenge(viaGoogle.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: later)
        #expect(finished.failure == nil)
    }

    /// Every way an identity goes ends the sign-ins waiting at a second factor that began with it, so none
    /// finishes after the provider is linked again: replaced by another id (a Parse `PUT`), unlinked and linked
    /// again with the same id, ended by the provider, moved to a new address by an admin. A sign-in begun
    /// with another provider stays open.
    @Test func everyWayAnIdentityGoesEndsTheChallengesItBegan() throws {
        let google = ExternalIdentity(provider: "google", uid: "g-1", email: nil, isEmailVerified: false)
        let password = ExternalIdentity(provider: "password", uid: "a@example.com", email: "a@example.com", isEmailVerified: false)
        var base = try userWithTOTP()
        base = applying(try base.link(google), to: base)
        base = applying(try base.link(password, passwordHash: "hash"), to: base)
        let otherApple = ExternalIdentity(provider: "apple", uid: "002.apple", email: nil, isEmailVerified: false)
        let removals: [(String, String, (UserAccount) throws -> [AccountEvent])] = [
            ("apple", "replaced", { try $0.link(otherApple, replacing: true) }),
            ("apple", "unlinked and linked again", { user in
                try user.deciding([{ try $0.unlink(provider: "apple", byAdmin: false) }, { try $0.link(self.apple) }], at: self.now)
            }),
            ("apple", "ended by Apple, then linked again", { user in
                try user.deciding([{ $0.endedByProvider("apple", uid: self.apple.uid, reason: "apple_consent_revoked") }, { try $0.link(self.apple) }], at: self.now)
            }),
            ("password", "moved to a new address", { try $0.changeEmail(to: "b@example.com", verified: true) }),
        ]
        for (provider, how, remove) in removals {
            let begun = newSession(), other = newSession()
            var user = applying(try base.signIn(with: provider == "apple" ? apple : password, session: begun, now: now), to: base)
            user = applying(try user.signIn(with: google, session: other, now: now), to: user)
            let events = try remove(user)
            let ended = events.compactMap { event -> AccountEvent.MFAChallengeEnded? in
                if case .mfaChallengeEnded(let ended) = event { ended } else { nil }
            }
            #expect(ended.map(\.challengeId) == [begun.id], "\(how)")
            #expect(ended.allSatisfy { $0.reason == "first_factor_unlinked" }, "\(how)")
            user = applying(events, to: user)
            #expect(user.identities[provider] != nil, "\(how): the provider is linked again")
            #expect(throws: AccountError.self, "\(how)") {
                try user.verifyChallenge(begun.id, factor: self.factorId, check: .totp(matchingStep: 101), session: self.newSession(), now: self.now)
            }
            let finished = try user.verifyChallenge(other.id, factor: factorId, check: .totp(matchingStep: 101), session: newSession(), now: now)
            #expect(finished.failure == nil, "\(how): a sign-in begun with another provider finishes")
        }
    }

    /// A password change, like every revocation, ends the sign-ins waiting at a second factor, and each ends
    /// once even when a reset also unlinks the identity one began with.
    @Test func revocationsEndEachOpenChallengeOnce() throws {
        var user = try userWithTOTP()
        let google = ExternalIdentity(provider: "google", uid: "g-1", email: "g@example.com", isEmailVerified: true)
        let password = ExternalIdentity(provider: "password", uid: "a@example.com", email: "a@example.com", isEmailVerified: false)
        user = applying(try user.link(google), to: user)
        user = applying(try user.link(password, passwordHash: "hash"), to: user)
        let viaGoogle = newSession(), viaApple = newSession()
        user = applying(try user.signIn(with: google, session: viaGoogle, now: now), to: user)
        user = applying(try user.signIn(with: apple, session: viaApple, now: now), to: user)
        let ends = { (events: [AccountEvent]) in
            events.compactMap { event -> UUID? in if case .mfaChallengeEnded(let ended) = event { ended.challengeId } else { nil } }.sorted { $0.sortsBefore($1) }
        }
        let both = [viaGoogle.id, viaApple.id].sorted { $0.sortsBefore($1) }
        let changed = try user.changePassword(passwordHash: "hash-2", session: newSession(), now: now)
        #expect(ends(changed) == both)

        let codeId = UUID()
        user = applying(try user.issueEmailCode(
            .passwordReset, codeId: codeId, codeHash: "c", email: "a@example.com", expiresAt: now.addingTimeInterval(60)), to: user)
        let reset = try user.resetPassword(with: try #require(user.emailCodes[codeId]), passwordHash: "hash-3", now: now)
        #expect(ends(reset) == both, "the unlinked google ends its sign-in, the revocation the other, each once")
    }

    /// A second factor guards a proved address: none on an address nobody proved (its owner would be locked out,
    /// as an account with a factor is never taken over); an account with no address may have one, and then takes a
    /// first address only proved.
    /// An address marked unproved as an admin could before factors needed a proved one (the decision refuses it now).
    static let markedUnproved = AccountEvent.profileUpdated(.init(personal: PersonalData(), cleared: [], emailVerified: false))

    /// An account with a factor keeps a proved address: a change to an unproved one, or marking it unproved, is refused
    /// whoever asks; a pending enrolment is not confirmed on an address marked unproved since it began.
    @Test func anAccountWithAFactorKeepsAProvedAddress() throws {
        let user = try userWithTOTP()
        #expect(throws: AccountError.unprovedEmailWithSecondFactor) { try user.changeEmail(to: "other@example.com", verified: false) }
        #expect(throws: AccountError.unprovedEmailWithSecondFactor) {
            try user.updateProfile(displayName: nil, photoURL: nil, clearing: [], emailVerified: false)
        }
        #expect(try !user.changeEmail(to: "other@example.com", verified: true).isEmpty)
        let pendingId = UUID()
        var pending = applying(
            try user.enrolTOTP(factorId: pendingId, secret: "KRSXG5CTMVRXEZLU", displayName: nil, authTime: now, now: now), to: user)
        pending = applying([Self.markedUnproved], to: pending)
        #expect(throws: AccountError.unprovedEmailSecondFactor) {
            try pending.confirmFactor(pendingId, type: .totp, check: .totp(matchingStep: 200), recoveryCodeHashes: [], now: now)
        }
    }

    @Test func aSecondFactorNeedsAProvedAddressOrNone() throws {
        func user(_ identity: ExternalIdentity) -> UserAccount {
            let events = UserAccount.register(id: id, identity: identity, session: nil, now: now)
            return UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
        }
        let unproved = user(ExternalIdentity(provider: "password", uid: "a@example.com", email: "a@example.com", isEmailVerified: false))
        #expect(throws: AccountError.unprovedEmailSecondFactor) {
            try unproved.enrolTOTP(factorId: factorId, secret: "JBSWY3DPEHPK3PXP", displayName: nil, authTime: now, now: now)
        }
        #expect(throws: AccountError.unprovedEmailSecondFactor) {
            try unproved.enrolPhone(factorId: factorId, phoneNumber: "+15555550100", displayName: nil, codeHash: "h", authTime: now, now: now)
        }
        let noAddress = user(ExternalIdentity(provider: "apple", uid: "003.apple", email: nil, isEmailVerified: false))
        let enrolment = try noAddress.enrolTOTP(factorId: factorId, secret: "JBSWY3DPEHPK3PXP", displayName: nil, authTime: now, now: now)
        let pending = applying(enrolment, to: noAddress)
        let facebook = ExternalIdentity(provider: "facebook", uid: "f-1", email: "b@example.com", isEmailVerified: false)
        // A pending enrolment, which no route lists, holds nothing back; it is not confirmed on the unproved address.
        let unprovedPending = applying(try pending.link(facebook), to: pending)
        #expect(throws: AccountError.unprovedEmailSecondFactor) {
            try unprovedPending.confirmFactor(factorId, type: .totp, check: .totp(matchingStep: 100), recoveryCodeHashes: [], now: now)
        }
        let guarded = applying(
            try pending.confirmFactor(factorId, type: .totp, check: .totp(matchingStep: 100), recoveryCodeHashes: [], now: now).events, to: pending)
        #expect(guarded.mfa.isRequired)
        #expect(throws: AccountError.unprovedEmailWithSecondFactor) { try guarded.link(facebook) }
        #expect(throws: AccountError.unprovedEmailWithSecondFactor) {
            try guarded.link(ExternalIdentity(provider: "password", uid: "b@example.com", email: "b@example.com", isEmailVerified: false), passwordHash: "h")
        }
        // Without the factor, or with a proved address, or with none, the link is made.
        #expect(try !noAddress.link(facebook).isEmpty)
        #expect(try !guarded.link(ExternalIdentity(provider: "google", uid: "g-9", email: "b@example.com", isEmailVerified: true)).isEmpty)
        #expect(try !guarded.link(ExternalIdentity(provider: "facebook", uid: "f-2", email: nil, isEmailVerified: false)).isEmpty)
        #expect(try !user(apple).enrolTOTP(factorId: factorId, secret: "JBSWY3DPEHPK3PXP", displayName: nil, authTime: now, now: now).isEmpty)
    }

    /// A factor on an address nobody proved (enrolled before factors needed a proved one, or the address marked
    /// unproved since) goes with a reset by mail, which proves the address: whoever enrolled it may not own it.
    @Test func aResetOfAnUnprovedAddressDropsTheFactorsOnIt() throws {
        var user = try userWithTOTP()
        user = applying([Self.markedUnproved], to: user)
        let codeId = UUID()
        user = applying(try user.issueEmailCode(
            .passwordReset, codeId: codeId, codeHash: "c", email: "a@example.com", expiresAt: now.addingTimeInterval(60)), to: user)
        let reset = try user.resetPassword(with: try #require(user.emailCodes[codeId]), passwordHash: "hash-1", now: now)
        let removed = reset.compactMap { event -> UUID? in if case .mfaFactorRemoved(let gone) = event { gone.factorId } else { nil } }
        #expect(removed == [factorId])
        #expect(applying(reset, to: user).mfa.factors.isEmpty)
    }

    @Test func anAccountWithASecondFactorIsNeverTakenOver() throws {
        // Its address proved when the factor came, then marked unproved (by an admin): still never taken over.
        var user = try userWithTOTP()
        user = applying([Self.markedUnproved], to: user)
        #expect(!user.isEmailVerified)
        let google = ExternalIdentity(provider: "google", uid: "g", email: "a@example.com", isEmailVerified: true)
        #expect(throws: AccountError.self) { try user.takeOver(with: google, session: newSession(), now: now) }
    }

    /// One secret or one number is one factor: a TOTP secret already enrolled (in any case or padding) is refused,
    /// so one code never passes twice; of two enrolments of one number begun side by side, the second cannot be
    /// confirmed once the first is.
    @Test func aSecretOrANumberIsOneFactorOnly() throws {
        var user = try userWithTOTP()
        #expect(throws: AccountError.self) {
            try user.enrolTOTP(factorId: UUID(), secret: "jbswy3dpehpk3pxp====", displayName: nil, authTime: now, now: now)
        }
        #expect(try user.enrolTOTP(factorId: UUID(), secret: "KRSXG5CTMVRXEZLU", displayName: nil, authTime: now, now: now).count == 1)
        let (first, second) = (UUID(), UUID())
        for factor in [first, second] {
            user = applying(try user.enrolPhone(
                factorId: factor, phoneNumber: "+15555550150", displayName: nil, codeHash: "h-\(factor)", authTime: now, now: now), to: user)
        }
        let confirmed = try user.confirmFactor(first, type: .phone, check: .sms(codeHash: "h-\(first)"), recoveryCodeHashes: [], now: now)
        #expect(confirmed.failure == nil)
        user = applying(confirmed.events, to: user)
        #expect(throws: AccountError.self) {
            try user.confirmFactor(second, type: .phone, check: .sms(codeHash: "h-\(second)"), recoveryCodeHashes: [], now: now)
        }
        // A secret enrolled (pending) on one surface, then enrolled and confirmed again on another: the first
        // cannot be confirmed after, or one code would pass on both.
        let (pending, again) = (UUID(), UUID())
        user = applying(try user.enrolTOTP(factorId: pending, secret: "MFRGGZDFMZTWQ2LK", displayName: nil, authTime: now, now: now), to: user)
        user = applying(try user.enrolTOTP(factorId: again, secret: "mfrggzdfmztwq2lk", displayName: nil, authTime: now, now: now), to: user)
        user = applying(try user.confirmFactor(again, type: .totp, check: .totp(matchingStep: 200), recoveryCodeHashes: [], now: now).events, to: user)
        #expect(throws: AccountError.totpSecretInUse) {
            try user.confirmFactor(pending, type: .totp, check: .totp(matchingStep: 201), recoveryCodeHashes: [], now: now)
        }
    }

    /// An anonymous user has no first factor for a second to guard: neither kind is enrolled (every surface).
    @Test func anAnonymousUserEnrolsNoFactor() throws {
        let anonymous = ExternalIdentity(provider: ExternalIdentity.anonymousProvider, uid: "anon-1", email: nil, isEmailVerified: false)
        let events = UserAccount.register(id: id, identity: anonymous, session: nil, now: now)
        let user = UserAccount(id: id, history: events.map { ($0, now) }, version: events.count)
        #expect(user.isAnonymous)
        #expect(throws: AccountError.anonymousSecondFactor) {
            try user.enrolTOTP(factorId: UUID(), secret: "KRSXG5CTMVRXEZLU", displayName: nil, authTime: now, now: now)
        }
        #expect(throws: AccountError.anonymousSecondFactor) {
            try user.enrolPhone(factorId: UUID(), phoneNumber: "+15555550150", displayName: nil, codeHash: "h", authTime: now, now: now)
        }
    }

    /// Wrong codes confirming an enrolment end that enrolment after five; they never lock the user's sign-ins.
    @Test func anEnrolmentsWrongCodesDoNotLockSignIn() throws {
        var user = try userWithTOTP()
        for _ in 0..<(UserAccount.maxDailyCodeFailures / UserAccount.maxCodeAttempts + 1) {
            let enrolment = UUID()
            user = applying(try user.enrolTOTP(factorId: enrolment, secret: "KRSXG5CTMVRXEZLU", displayName: nil, authTime: now, now: now), to: user)
            for attempt in 1...UserAccount.maxCodeAttempts {
                let outcome = try user.confirmFactor(enrolment, type: .totp, check: .totp(matchingStep: nil), recoveryCodeHashes: [], now: now)
                #expect(outcome.failure != nil)
                if attempt < UserAccount.maxCodeAttempts {
                    #expect(outcome.failure?.detail.hasSuffix("before the enrolment ends.") == true, "\(String(describing: outcome.failure))")
                }
                user = applying(outcome.events, to: user)
            }
        }
        let session = newSession()
        user = applying(try user.signIn(with: apple, session: session, now: now), to: user)
        #expect(try user.verifyChallenge(session.id, factor: factorId, check: .totp(matchingStep: 500), session: newSession(), now: now).failure == nil)
    }

    @Test func smsCodesPerUserAreLimited() throws {
        var user = try userWithTOTP()
        for index in 0..<5 {
            let events = try user.enrolPhone(
                factorId: UUID(), phoneNumber: "+1555555010\(index)", displayName: nil, codeHash: "h", authTime: now, now: now)
            user = applying(events, to: user)
        }
        do {
            _ = try user.enrolPhone(factorId: UUID(), phoneNumber: "+15555550109", displayName: nil, codeHash: "h", authTime: now, now: now)
            Issue.record("a sixth SMS in the window was allowed")
        } catch {
            #expect(error.code == "rate_limited")
        }
    }

    @Test func changesNeedASignInFromTheLastFiveMinutes() throws {
        let user = try userWithTOTP()
        #expect(throws: AccountError.recentLoginRequired) {
            try user.removeFactor(factorId, authTime: now.addingTimeInterval(-301), now: now)
        }
        #expect(try user.removeFactor(factorId, authTime: now.addingTimeInterval(-299), now: now).map(\.type) == ["MFAFactorRemoved"])
        #expect(try user.removeFactor(factorId, authTime: nil, byAdmin: true, now: now).map(\.type) == ["MFAFactorRemoved"])
    }

    /// Parse's `"mfa": null` removes every factor in one command: all of them, or none when one cannot go.
    @Test func severalFactorsGoTogetherOrNotAtAll() throws {
        var user = try userWithTOTP()
        let second = UUID()
        user = applying(try user.enrolTOTP(factorId: second, secret: "KRSXG5CTMVRXEZLU", displayName: nil, authTime: now, now: now), to: user)
        let both = try user.removeFactors([factorId, second], authTime: now, now: now)
        #expect(both.map(\.type) == ["MFAFactorRemoved", "MFAFactorRemoved"])
        #expect(applying(both, to: user).mfa.factors.isEmpty)
        #expect(throws: AccountError.mfaFactorNotFound) {
            try user.removeFactors([factorId, UUID()], authTime: now, now: now)
        }
        #expect(throws: AccountError.recentLoginRequired) {
            try user.removeFactors([factorId, second], authTime: now.addingTimeInterval(-301), now: now)
        }
    }

    /// A sign-in waiting at its challenge when the user removes their last factor cannot be finished with a
    /// recovery code of the factors that are gone: it ends. With a factor left, it stays open.
    @Test func removingTheLastFactorEndsTheChallengesStillOpen() throws {
        let user = try userWithTOTP()
        let pending = newSession()
        let waiting = applying(try user.signIn(with: apple, session: pending, now: now), to: user)
        // Before, the recovery code finishes it.
        #expect(try waiting.verifyChallenge(pending.id, factor: nil, check: .recoveryCode(codeHashes: ["r1"]), session: pending, now: now).failure == nil)
        let removed = try waiting.removeFactor(factorId, authTime: now, now: now)
        #expect(removed.map(\.type) == ["MFAFactorRemoved", "MFAChallengeEnded"])
        let after = applying(removed, to: waiting)
        #expect(throws: AccountError.self) {
            try after.verifyChallenge(pending.id, factor: nil, check: .recoveryCode(codeHashes: ["r1"]), session: pending, now: now)
        }
        let second = UUID()
        let twoFactors = applying(try waiting.enrolTOTP(factorId: second, secret: "KRSXG5CTMVRXEZLU", displayName: nil, authTime: now, now: now), to: waiting)
        let confirmed = applying(
            try twoFactors.confirmFactor(second, type: .totp, check: .totp(matchingStep: 7), recoveryCodeHashes: ["r3"], now: now).events, to: twoFactors)
        #expect(try confirmed.removeFactor(factorId, authTime: now, now: now).map(\.type) == ["MFAFactorRemoved"])
    }

    /// New tokens for a caller whose session ended meanwhile (a revocation racing an enrolment) are refused
    /// inside the command; a live caller gets them, and keeps its session.
    @Test func aReissueNeedsTheCallersSessionStillLive() throws {
        let user = try userWithTOTP()
        let first = newSession()
        let signedIn = applying(try user.signIn(with: apple, session: first, now: now), to: user)
        let pending = try #require(signedIn.mfa.challenges[first.id])
        let passed = applying(try signedIn.verifyChallenge(
            pending.id, factor: nil, check: .recoveryCode(codeHashes: ["r1"]), session: first, now: now).events, to: signedIn)
        #expect(passed.sessions[first.id]?.isActive == true)
        // The new session continues the caller's sign-in (``aReissueNeverSignsInLaterThanItsCaller``).
        var next = newSession()
        next.authTime = try #require(passed.sessions[first.id]).authTime
        let reissued = try passed.reissue(next, provider: "apple", continuing: first.id, now: now)
        #expect(!reissued.contains { if case .sessionEnded = $0 { true } else { false } })
        let revoked = applying(try passed.revokeAllSessions(now: now), to: passed)
        #expect(throws: AccountError.invalidToken) { try revoked.reissue(next, provider: "apple", continuing: first.id, now: now) }
    }

    @Test func phoneHintsMaskAllButTheLastFourDigits() {
        #expect(PhoneNumber.hint("+15555550100") == "+*******0100")
        #expect(PhoneNumber.isE164("+15555550100"))
        #expect(!PhoneNumber.isE164("+05555550100"))
        #expect(!PhoneNumber.isE164("5555550100"))
        #expect(!PhoneNumber.isE164("+1555"))
    }
}
