import Foundation
import Testing
import TetherAPI
import TetherCore
import TetherProviders

@Suite("SMS webhook settings")
struct SMSConfigurationTests {
    static let url = "https://sms.example.com/hooks/tether"
    static let secret = "whsec-0123456789abcdef"

    @Test(arguments: [
        (["TETHER_SMS_WEBHOOK_URL": url], "TETHER_SMS_WEBHOOK_SECRET"),
        (["TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_SMS_WEBHOOK_URL": "ftp://sms.example.com/", "TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_SMS_WEBHOOK_URL": "not a url", "TETHER_SMS_WEBHOOK_SECRET": secret], "TETHER_SMS_WEBHOOK_URL"),
        (["TETHER_SMS_WEBHOOK_URL": url, "TETHER_SMS_WEBHOOK_SECRET": "short"], "TETHER_SMS_WEBHOOK_SECRET"),
    ])
    func anUnusableSettingStopsStartUpNamingTheVariable(values: [String: String], variable: String) {
        #expect {
            try TetherConfiguration(values: values)
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.variable == variable && error.description.hasPrefix(variable + ": ") && !error.description.contains("\n")
        }
    }

    @Test func withoutAWebhookThereIsNoSMSSender() throws {
        #expect(try TetherConfiguration(values: [:]).smsSender() == nil)
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
