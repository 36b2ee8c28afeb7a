import CMalloc
import Foundation

/// The arguments of one command: flags (`--name value`, `--name=value`, `--switch`) and positionals.
struct Arguments {
    private(set) var flags: [String: String] = [:]
    private(set) var switches: Set<String> = []
    private(set) var positionals: [String] = []

    /// Parses `arguments`; `valueFlags` name the flags that take a value. More than `positionals` arguments
    /// besides the options is a mistake (a stray word would otherwise be ignored in silence).
    init(_ arguments: [String], valueFlags: Set<String>, switchFlags: Set<String>, positionals allowed: Int = .max) throws(UsageError) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            if argument == "--" {
                positionals += remaining
                break
            }
            guard argument.hasPrefix("-"), argument != "-" else {
                positionals.append(argument)
                continue
            }
            var name = String(argument.drop(while: { $0 == "-" }))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if name == "h" { name = "help" }
            if switchFlags.contains(name) || name == "help" {
                guard inlineValue == nil else { throw UsageError("--\(name) takes no value") }
                switches.insert(name)
            } else if valueFlags.contains(name) {
                guard let value = inlineValue ?? remaining.popFirst() else { throw UsageError("--\(name) needs a value") }
                // Given twice, one would silently win (`--role admin --role support` made a support key).
                guard flags[name] == nil else { throw UsageError("--\(name) is given more than once") }
                flags[name] = value
            } else {
                throw UsageError("unknown option \(argument)")
            }
        }
        if positionals.count > allowed { throw UsageError("unexpected argument \(positionals[allowed])") }
    }

    func has(_ name: String) -> Bool { switches.contains(name) }
    subscript(_ name: String) -> String? { flags[name] }

    /// Refuses the options that `what` (one action of a command whose actions take different ones) does not take:
    /// `--events` given to `webhooks replay` would otherwise be ignored in silence. `--config` and `--help` always pass.
    func refusingOptions(but taken: Set<String>, of what: String) throws(UsageError) {
        let given = Set(flags.keys).union(switches).subtracting(taken.union(["config", "help"]))
        if let stray = given.sorted().first { throw UsageError("--\(stray) does not apply to \(what)") }
    }
}

/// A mistake in how the command was called (exit status 2).
struct UsageError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// A failure to report as one line on standard error (exit status 1, or `status`).
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    let status: Int32

    init(_ description: String, status: Int32 = 1) {
        self.description = description
        self.status = status
    }
}

extension Commands {
    /// Why standard output did not get everything written to it, or nil when it did.
    static func standardOutputFailure() -> String? {
        let code = tether_standard_output_error()
        return code == 0 ? nil : "could not write to standard output (\(String(cString: strerror(code))))"
    }

    /// Checks that a secret shown once reached standard output. When it did not (a full disk, a closed pipe),
    /// nobody holds it: `undo` takes back what was made with it, and the command fails saying so.
    static func requireShown(_ what: String, undoneBy verb: String, undo: () async throws -> Void) async throws {
        guard let failure = standardOutputFailure() else { return }
        do {
            try await undo()
        } catch {
            throw CommandFailure("\(failure); \(what) was made and could not be \(verb): \(error)")
        }
        throw CommandFailure("\(failure); \(what) was \(verb), since nobody saw its secret")
    }
}
