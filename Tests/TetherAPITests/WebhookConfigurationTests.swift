import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherProviders

@Suite("SMS and mail webhook settings")
struct WebhookConfigurationTests {
    static let url = "https://sms.example.com/hooks/tether"
    static let secret = "whsec-0123456789abcdef"

    @Test(arguments: [
        (["TETHER_SMS_WEBHOOK_URL": url], "TETHER_SMS_WEBHOOK_SECRET"),
        (["TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_SMS_WEBHOOK_URL": "ftp://sms.example.com/", "TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_SMS_WEBHOOK_URL": "not a url", "TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_SMS_WEBHOOK_URL": url, "TETHER_SMS_WEBHOOK_SECRET": "short"], "TETHER_SMS_WEBHOOK_SECRET"),
        (["TETHER_MAIL_WEBHOOK_URL": url, "TETHER_MAIL_WEBHOOK_SECRET": secret], "TETHER_PUBLIC_URL"),
        (["TETHER_MAIL_WEBHOOK_URL": url, "TETHER_PUBLIC_URL": "https://auth.example.com"], "TETHER_MAIL_WEBHOOK_SECRET"),
        (["TETHER_MAIL_WEBHOOK_SECRET": secret], "TETHER_MAIL_WEBHOOK_URL"),
        (["TETHER_MAIL_WEBHOOK_URL": "mailto:x@example.com", "TETHER_MAIL_WEBHOOK_SECRET": secret, "TETHER_PUBLIC_URL": "https://a.example"],
         "TETHER_MAIL_WEBHOOK_URL"),
        // Codes in clear text beyond this machine; links that carry credentials or lead elsewhere; a project id no path can hold.
        (["TETHER_SMS_WEBHOOK_URL": "http://sms.example.com/hook", "TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_PUBLIC_URL": "https://user:pw@auth.example.com"], "TETHER_PUBLIC_URL"),
        (["TETHER_PUBLIC_URL": "https://auth.example.com:99999"], "TETHER_PUBLIC_URL"),
        (["TETHER_PUBLIC_URL": "https://auth.example.com/base/../x"], "TETHER_PUBLIC_URL"),
        (["TETHER_FIREBASE_PROJECT_ID": "a/b c"], "TETHER_FIREBASE_PROJECT_ID"),
        (["TETHER_TRUSTED_PROXIES": "10.0.0.0/8, 10.0.0.1/8"], "TETHER_TRUSTED_PROXIES"),
        // A connection string libpq cannot read would be retried forever by a server: refused at start.
        (["TETHER_DATABASE_URL": "foo=bar"], "TETHER_DATABASE_URL"),
        (["TETHER_DATABASE_READ_URL": "postgresql://u:secret@127.0.0.1/db?bogus=1"], "TETHER_DATABASE_READ_URL"),
        // Values libpq reads only when it connects: every connection would fail.
        (["TETHER_DATABASE_URL": "postgresql://u@127.0.0.1/db?sslmode=bogus"], "TETHER_DATABASE_URL"),
        (["TETHER_DATABASE_URL": "postgresql://u@127.0.0.1:notaport/db"], "TETHER_DATABASE_URL"),
        (["TETHER_DATABASE_URL": "host=a,b port=5432,70000 dbname=db"], "TETHER_DATABASE_URL"),
        (["TETHER_DATABASE_URL": "postgresql://u@h1,h2/db?target_session_attrs=primary-ish"], "TETHER_DATABASE_URL"),
        (["TETHER_DATABASE_URL": "postgresql://u@h/db?connect_timeout=soon"], "TETHER_DATABASE_URL"),
        // A no-break space is no space to C's isspace: libpq refuses it.
        (["TETHER_DATABASE_URL": "postgresql://u@h/db?connect_timeout=%C2%A05"], "TETHER_DATABASE_URL"),
        // A port no request can reach.
        (["TETHER_SMS_WEBHOOK_URL": "https://sms.example:99999/h", "TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_PASSWORD_RESET_CODE_TTL": "forever"], "TETHER_PASSWORD_RESET_CODE_TTL"),
        (["TETHER_EMAIL_VERIFICATION_CODE_TTL": "90d"], "TETHER_EMAIL_VERIFICATION_CODE_TTL"),
    ])
    func anUnusableSettingStopsStartUpNamingTheVariable(values: [String: String], variable: String) {
        #expect {
            try TetherConfiguration(values: values)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.variable == variable && error.description.hasPrefix(variable + ": ") && !error.description.contains("\n")
        }
    }

    /// The values libpq reads only when it connects are checked as it checks them: these connect.
    @Test func usableConnectionOptionsStillStart() throws {
        for url in [
            "postgresql://u@h1:5432,h2:5433/db?target_session_attrs=read-write&sslmode=verify-full&connect_timeout=5",
            "host=a,b port=,5433 dbname=db gssencmode=disable channel_binding=prefer",
            // White space around a number, which libpq's strtol reads.
            "postgresql://u@127.0.0.1:5432/db?connect_timeout=%205", "host=a port=' 5432 ' dbname=db",
            "postgresql://u@127.0.0.1:5432/db?connect_timeout=5%0A",
        ] {
            #expect(try TetherConfiguration(values: ["TETHER_DATABASE_URL": url]).databaseURL == url)
        }
    }

    /// libpq quotes what it could not read, which may be the password itself.
    @Test func anUnreadableConnectionStringIsNamedWithoutItsPassword() {
        for url in ["postgresql://u:Pa%zzss@127.0.0.1/db", "host=127.0.0.1 password=two words", "postgresql://u@127.0.0.1/db?password=hu%zzsh"] {
            #expect {
                try TetherConfiguration(values: ["TETHER_DATABASE_URL": url])
            } throws: { error in
                let text = String(describing: error)
                return text.hasPrefix("TETHER_DATABASE_URL: ") && !text.contains("Pa%zz") && !text.contains("words") && !text.contains("hu%zz")
            }
        }
    }

    @Test func withoutAWebhookThereIsNoSMSSender() throws {
        #expect(try TetherConfiguration(values: [:]).smsSender() == nil)
    }

    @Test func aMailWebhookNeedsAPublicURLAndMakesAMailSender() throws {
        let configuration = try TetherConfiguration(values: [
            "TETHER_MAIL_WEBHOOK_URL": Self.url, "TETHER_MAIL_WEBHOOK_SECRET": Self.secret, "TETHER_PUBLIC_URL": "https://auth.example.com",
            "TETHER_PASSWORD_RESET_CODE_TTL": "30m",
        ])
        let sender = try #require(configuration.mailSender() as? WebhookMailSender)
        #expect(sender.configuration.url.absoluteString == Self.url)
        #expect(configuration.passwordResetCodeLifetime == 1800)
        #expect(configuration.emailVerificationCodeLifetime == 3 * 86400)
        #expect(try TetherConfiguration(values: [:]).mailSender() == nil)
    }

    @Test func aWebhookAndSecretMakeAWebhookSender() throws {
        let configuration = try TetherConfiguration(values: [
            "TETHER_SMS_WEBHOOK_URL": Self.url, "TETHER_SMS_WEBHOOK_SECRET": Self.secret,
        ])
        let sender = try #require(configuration.smsSender() as? WebhookSMSSender)
        #expect(sender.configuration.url.absoluteString == Self.url)
        #expect(sender.configuration.secret == Self.secret)
    }
}
